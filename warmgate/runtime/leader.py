"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

Several replicas run; the one holding the Lease runs kopf, the others stand by without a watch
open or a write made (issue 23 item 9, replacing kopf peering: one failed read ended its
activity check for good, and it compared another replica's wall clock with its own).

As client-go's `leaderelection` does, no replica ever compares a time another one wrote:

- A standby takes the Lease only once its record (holder, renew time, ...) has not changed
  for the record's `leaseDurationSeconds`, measured on the standby's own monotonic clock from
  when it saw the record change (`Elector.try_acquire_or_renew`), or at once when the record
  has no holder (released).
- The leader renews every `retry_period`; when it could not renew for `renew_deadline`,
  measured on its own monotonic clock from the start of its last successful renewal, it
  stops acting at once (`on_lost`: the process exits; kopf's graceful stop takes seconds).
  Since `renew_deadline < duration`, it stops before any standby may take over.
- Every write is an update at the resourceVersion read, so two replicas never both win.
- A leader stopped gracefully releases the Lease (an empty holder); a standby watching the
  Lease (`LeaseApi.wait_change`) takes it at once.

The wall-clock times written into the record (acquireTime, renewTime) are for people
(`kubectl get lease`), never read.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Protocol

from warmgate.api import Manifest
from warmgate.kube.controller_metrics import LEADER
from warmgate.kube.lease_api import KubeLeases
from warmgate.runtime.liveness import Liveness
from warmgate.settings import LeaseSettings

log = logging.getLogger(__name__)

# How often the leader's watchdog compares its clock with the renew deadline.
WATCHDOG_SECONDS: Final = 0.25
Clock = Callable[[], float]


class LeaseApi(Protocol):
    """The Lease as the elector uses it (`lease_api.KubeLeases` over the real API)."""

    def get(self) -> tuple[Manifest, str] | None:
        """The Lease's spec and resourceVersion; None when it does not exist. Raises on an
        API or transport failure."""

    def create(self, spec: Manifest) -> str | None:
        """Create it with this spec: its resourceVersion; None when it exists (409)."""

    def update(self, spec: Manifest, version: str) -> str | None:
        """Replace its spec at ``version``: the new resourceVersion; None on a conflict."""

    def wait_change(self, version: str, seconds: float) -> None:
        """Return when the Lease changes after ``version``, or after ``seconds``."""


def identity() -> str:
    """This replica's holder identity: its host (the Pod's name) and a random suffix, as
    client-go's callers build it, so a restarted Pod of the same name is another holder."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def _micro_time(at: float | None = None) -> str:
    """A metav1.MicroTime (RFC 3339 with microseconds), for people reading the Lease."""
    moment = datetime.fromtimestamp(time.time() if at is None else at, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Elector:
    """One replica's side of the election (client-go `LeaderElector`)."""

    def __init__(
        self,
        api: LeaseApi,
        holder: str,
        timings: LeaseSettings,
        clock: Clock = time.monotonic,
    ) -> None:
        self.api, self.holder, self.timings, self.clock = api, holder, timings, clock
        # The record last seen, its resourceVersion, and when (this replica's clock) it was
        # first seen: the only time a standby's decision reads.
        self.observed: Manifest | None = None
        self.observed_version: str | None = None
        self.observed_at = 0.0
        # Until when this replica may act (the start of its last renewal + renew_deadline).
        self.deadline = 0.0
        # When the last attempt ended, for the liveness check of a standby.
        self.last_attempt = clock()

    @property
    def leading(self) -> bool:
        return self.observed is not None and self.observed.get("holderIdentity") == self.holder

    def try_acquire_or_renew(self) -> bool:
        """One attempt (client-go `tryAcquireOrRenew`): whether this replica holds the Lease."""
        started = self.clock()
        try:
            return self._attempt(started)
        except Exception as exc:  # a failed attempt is a lost round, never a crash
            log.warning(f"Could not read or write the leader Lease: {type(exc).__name__}: {exc}")
            return False
        finally:
            self.last_attempt = self.clock()

    def _attempt(self, started: float) -> bool:
        found = self.api.get()
        if found is None:
            version = self.api.create(self._record(None))
            return version is not None and self._won(self._record(None), version, started)
        spec, version = found
        self._observe(spec, version)
        holder = str(spec.get("holderIdentity") or "")
        if holder and holder != self.holder and not self._expired(spec):
            return False
        record = self._record(spec)
        written = self.api.update(record, version)
        return written is not None and self._won(record, written, started)

    def _observe(self, spec: Manifest, version: str) -> None:
        if spec != self.observed:
            self.observed, self.observed_at = spec, self.clock()
        self.observed_version = version

    def _expired(self, spec: Manifest) -> bool:
        """The holder's record has not changed for its lease duration, on our clock."""
        duration = float(spec.get("leaseDurationSeconds") or self.timings.duration)
        return self.observed_at + duration <= self.clock()

    def _record(self, old: Manifest | None) -> Manifest:
        """Our record: a renewal keeps the acquire time and the transitions count."""
        now = _micro_time()
        ours = old is not None and old.get("holderIdentity") == self.holder
        transitions = int((old or {}).get("leaseTransitions") or 0)
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": round(self.timings.duration),
            "acquireTime": (old or {}).get("acquireTime") if ours else now,
            "renewTime": now,
            "leaseTransitions": transitions if ours or old is None else transitions + 1,
        }

    def _won(self, record: Manifest, version: str, started: float) -> bool:
        self.observed, self.observed_version, self.observed_at = record, version, started
        # Measured from before the write: the standbys saw it commit later than that.
        self.deadline = started + self.timings.renew_deadline
        return True

    def acquire(self, stop: threading.Event) -> bool:
        """Stand by until this replica holds the Lease (True) or ``stop`` is set (False)."""
        while not stop.is_set():
            if self.try_acquire_or_renew():
                return True
            if self.observed_version is None:
                stop.wait(self.timings.retry_period)
            else:  # a release wakes us at once; else the next try after the retry period
                self.api.wait_change(self.observed_version, self.timings.retry_period)
        return False

    def keep(self, stop: threading.Event, on_lost: Callable[[], None]) -> None:
        """While leading: renew every retry period, and call ``on_lost`` once this replica
        may no longer act (the renew deadline passed on its clock), until ``stop`` is set."""
        watchdog = threading.Thread(
            target=self._watch_deadline, args=(stop, on_lost), name="lease-watchdog", daemon=True
        )
        watchdog.start()
        while not stop.wait(self.timings.retry_period):
            if not self.try_acquire_or_renew() and self.observed is not None and not self.leading:
                on_lost()  # another replica holds it now: stop at once, not at the deadline
                return

    def _watch_deadline(self, stop: threading.Event, on_lost: Callable[[], None]) -> None:
        """A renewal stuck in a request must not let the deadline pass unnoticed."""
        while not stop.wait(WATCHDOG_SECONDS):
            if self.clock() > self.deadline:
                on_lost()
                return

    def release(self) -> bool:
        """Give the Lease up (an empty holder), so a standby takes it at once."""
        if not self.leading or self.observed_version is None:
            return False
        record = {**(self.observed or {}), "holderIdentity": "", "leaseDurationSeconds": 1}
        record["renewTime"] = _micro_time()
        try:
            released = self.api.update(record, self.observed_version) is not None
        except Exception as exc:
            log.warning(f"Could not release the leader Lease: {type(exc).__name__}: {exc}")
            return False
        self.observed = record
        return released

    def standby_stalled(self, bound: float) -> str | None:
        """The liveness check of a standby: its attempts still run."""
        idle = self.clock() - self.last_attempt
        if idle > bound:
            return f"the leader election made no attempt for {idle:.0f} s"
        return None


def exit_now() -> None:
    """Stop acting at once: the process exits (kopf's graceful stop takes seconds, more than
    the margin between the renew deadline and a standby's takeover). The Pod restarts as a
    standby, as a controller-runtime manager does after `leader election lost`."""
    log.error(
        "Lost the leader Lease (not renewed within the renew deadline, or another replica "
        "holds it); exiting, to restart as a standby"
    )
    logging.shutdown()
    os._exit(1)


def keep_in_background(
    elector: Elector, on_lost: Callable[[], None] = exit_now
) -> Callable[[], None]:
    """Renew in a daemon thread; returns the function that stops renewing."""
    stop = threading.Event()
    thread = threading.Thread(
        target=elector.keep, args=(stop, on_lost), name="lease-renew", daemon=True
    )
    thread.start()

    def stop_renewing() -> None:
        stop.set()
        thread.join(timeout=elector.timings.renew_deadline)

    return stop_renewing


# The in-cluster namespace of the Pod (its ServiceAccount's).
POD_NAMESPACE_FILE: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def lease_namespace(lease: LeaseSettings, watched: Collection[str]) -> str:
    """Where the Lease lives: as set, else the Pod's own namespace, else the first watched."""
    if lease.namespace:
        return lease.namespace
    with contextlib.suppress(OSError):
        return POD_NAMESPACE_FILE.read_text().strip()
    return next(iter(watched), "default")


@dataclass(frozen=True)
class Leadership:
    """This replica holds the Lease and renews it in the background."""

    elector: Elector
    stop_renewing: Callable[[], None]
    name: str = ""

    def release(self) -> None:
        """Stop renewing and give the Lease up, once nothing of this replica acts any more."""
        self.stop_renewing()
        LEADER.labels(self.name).set(0)
        if self.elector.release():
            log.info("Released the leader Lease")


def lead(
    lease: LeaseSettings, namespace: str, timeouts: tuple[float, float], health: Liveness
) -> Leadership:
    """Stand by until this replica holds the Lease (a SIGTERM meanwhile ends the process: it
    holds nothing); then renew it in the background, exiting the process if it is lost."""
    api = KubeLeases.connect(namespace, lease, timeouts)
    elector = Elector(api, identity(), lease)
    # An attempt and the wait after it each end within their timeouts: three rounds' worth.
    bound = 3 * (lease.retry_period + sum(api.timeouts))
    health.add("leader-election", lambda: elector.standby_stalled(bound))
    log.info(f"Standing by for the leader Lease {namespace}/{lease.name} as {elector.holder}")
    status = LEADER.labels(lease.name)
    status.set(0)
    elector.acquire(threading.Event())
    status.set(1)
    health.remove("leader-election")
    log.info(f"Acquired the leader Lease {namespace}/{lease.name}")
    return Leadership(elector, keep_in_background(elector), lease.name)


__all__ = [
    "Elector",
    "Leadership",
    "LeaseApi",
    "exit_now",
    "identity",
    "keep_in_background",
    "lead",
    "lease_namespace",
]
