"""Each object's follower: a kopf daemon that syncs it when a child changes, and rarely else.

The create, update and resume handlers sync an object when its spec changes or the operator
starts. Between those, the follower (one daemon per object, kopf's way to run a loop per
object) sleeps until one of:

- a watched child changed (`children.child_changed` sets its `Wakeups` event): a Job's
  completion or a Pod's readiness reaches the status within about a second;
- the safety resync: `resync_seconds`, jittered by +-20% so objects never resync in lockstep,
  the first one anywhere in 0.2-1.2 intervals (shorter, `ACTIVE_RESYNC_SECONDS`, while a runner
  runs: its progress is polled from the Pod); at most `RESYNCS` run at once;
- the backoff after an API failure (`Outcome.retry_after`).

The sync runs in a thread of kopf's executor, under the object's lock (a handler and the
follower never sync one object at once), and writes the status itself when it changed.
`StatusMemory` keeps the status last written until the watch brings the object back with it,
so a sync that starts in between neither writes it again nor posts its Events twice.
"""

from __future__ import annotations

import asyncio
import contextvars
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Final

import kopf

from warmgate.api import SpecDecodeDeployment, SpecDecodeDeploymentStatus
from warmgate.api.conditions import get_condition
from warmgate.api.constants import Reason
from warmgate.handlers import metrics
from warmgate.handlers.children import OwnWrites, Wakeups, WatchVersions, parent_key
from warmgate.handlers.sync_reads import SyncReads
from warmgate.reconcile.cluster import Logger
from warmgate.reconcile.sync import Outcome, Runtime

JITTER: Final = 0.2
FIRST_LOW: Final = 0.2
RESYNCS: Final = 4
# While a runner runs, its progress (read from the Pod) is polled this often at most.
ACTIVE_RESYNC_SECONDS: Final = 15.0
# Events that come together (a Pod's, then its Job's status) are synced once.
COALESCE_SECONDS: Final = 0.1
# How long a written status stands in for the one the watch has not brought back yet.
REMEMBER_SECONDS: Final = 30.0


class StatusMemory:
    """The status each object was last given, until the watch delivers the object with it."""

    def __init__(self) -> None:
        self._written: dict[str, tuple[SpecDecodeDeploymentStatus, float]] = {}
        self._lock = threading.Lock()

    def remember(self, uid: str, status: SpecDecodeDeploymentStatus) -> None:
        now = time.monotonic()
        with self._lock:
            # Expired entries go now, not at the object's next sync (minutes away): each one
            # holds a whole status.
            for stale in [key for key, (_, until) in self._written.items() if until < now]:
                del self._written[stale]
            self._written[uid] = (status, now + REMEMBER_SECONDS)

    def latest(self, sdd: SpecDecodeDeployment) -> SpecDecodeDeployment:
        """``sdd`` with the status last written to it, when its body is older than that."""
        uid = sdd.metadata.uid or ""
        with self._lock:
            written, until = self._written.get(uid, (None, 0.0))
            if written is None or written == sdd.status or time.monotonic() > until:
                self._written.pop(uid, None)
                return sdd
        return sdd.model_copy(update={"status": written})

    def forget(self, uid: str) -> None:
        with self._lock:
            self._written.pop(uid, None)

    def __len__(self) -> int:
        """How many statuses are held."""
        return len(self._written)


class Gone:
    """UIDs of deleted objects (the last ``kept``): a sync that was already running or queued
    when its object was deleted must not bring the object's metrics series back."""

    def __init__(self, kept: int = 10_000) -> None:
        self._uids: OrderedDict[str, None] = OrderedDict()
        self._kept = kept
        self._lock = threading.Lock()

    def add(self, uid: str) -> None:
        with self._lock:
            self._uids[uid] = None
            while len(self._uids) > self._kept:
                self._uids.popitem(last=False)

    def __contains__(self, uid: object) -> bool:
        with self._lock:
            return uid in self._uids


class ObjectLocks:
    """One lock per object uid: its handler and its follower take turns."""

    def __init__(self) -> None:
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    @contextmanager
    def hold(self, uid: str) -> Iterator[None]:
        with self._guard:
            lock = self._locks.setdefault(uid, threading.Lock())
        with lock:
            yield

    def forget(self, uid: str) -> None:
        with self._guard:
            self._locks.pop(uid, None)


@dataclass(frozen=True)
class Operator(Runtime):
    """kopf's memo: the sync's runtime plus what the handlers and followers share."""

    wakeups: Wakeups = field(default_factory=Wakeups)
    writes: OwnWrites = field(default_factory=OwnWrites)
    versions: WatchVersions = field(default_factory=WatchVersions)
    statuses: StatusMemory = field(default_factory=StatusMemory)
    locks: ObjectLocks = field(default_factory=ObjectLocks)
    gone: Gone = field(default_factory=Gone)
    executor: Executor | None = None
    # Resyncs in flight at once: the rest of the executor stays free for the syncs a change
    # asked for, so a wave of resyncs never delays a Job's completion.
    resyncs: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(RESYNCS))

    def first_delay(self) -> float:
        """The first resync of a follower, anywhere in one interval: objects created together
        (a `kubectl apply` of hundreds) resync spread out, not in one wave."""
        return self.settings.resync_seconds * random.uniform(FIRST_LOW, 1 + JITTER)

    def resync_delay(self, status: SpecDecodeDeploymentStatus | None = None) -> float:
        """The next safety resync, jittered; sooner while a runner runs."""
        base = self.settings.resync_seconds
        warmed = get_condition(status.conditions if status else None, "Warmed")
        if warmed is not None and warmed.reason == Reason.WARMUP_RUNNING:
            base = min(base, ACTIVE_RESYNC_SECONDS)
        return base * random.uniform(1 - JITTER, 1 + JITTER)

    def for_one_sync(self) -> Operator:
        """The runtime of one sync: its reads of the children are sent once (`SyncReads`)."""
        return replace(self, cluster=SyncReads(self.cluster))

    def forget(self, uid: str) -> None:
        """A deleted object: drop what is kept about it."""
        self.backoff.forget(uid)
        self.plans.forget(uid)
        self.statuses.forget(uid)
        self.locks.forget(uid)


# One sync of an object's body in a thread: its outcome, None when the body is unreadable.
SyncOnce = Callable[[dict[str, Any], Logger], Outcome | None]


async def follow(
    op: Operator, body: kopf.Body, logger: Logger, stopped: kopf.DaemonStopped, once: SyncOnce
) -> None:
    """Sync this object on its children's changes and on the resync, until kopf stops it."""
    meta = body.metadata
    key, uid = parent_key(meta.namespace, meta.name or ""), meta.uid or ""
    wake = op.wakeups.register(key, uid)
    due = time.monotonic() + op.first_delay()  # the create or resume handler just synced it
    retrying = False
    try:
        while not stopped:
            await _sleep(wake, stopped, max(0.0, due - time.monotonic()))
            if stopped:
                break
            if wake.is_set():
                await asyncio.sleep(COALESCE_SECONDS)  # by now the writes have their answers
                wake.clear()
                if op.writes.echoes(op.wakeups.take(uid)) and time.monotonic() < due:
                    metrics.FOLLOWER_SYNCS.labels("echo").inc()
                    continue  # only the operator's own writes came back: nothing new
                metrics.FOLLOWER_SYNCS.labels("child").inc()
                outcome = await _in_thread(op, once, dict(body), logger)
            else:
                metrics.FOLLOWER_SYNCS.labels("retry" if retrying else "resync").inc()
                async with op.resyncs:
                    outcome = await _in_thread(op, once, dict(body), logger)
            retrying = outcome is not None and outcome.retry_after is not None
            due = time.monotonic() + _next_delay(op, outcome)
    finally:
        op.wakeups.unregister(key, uid)


def _next_delay(op: Operator, outcome: Outcome | None) -> float:
    if outcome is not None and outcome.retry_after is not None:
        return outcome.retry_after
    return op.resync_delay(outcome.status if outcome is not None else None)


async def _sleep(wake: asyncio.Event, stopped: kopf.DaemonStopped, delay: float) -> None:
    """Until woken, the delay passed or the daemon is stopped."""
    waits = {asyncio.ensure_future(wake.wait()), asyncio.ensure_future(stopped.wait())}
    try:
        await asyncio.wait(waits, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()


async def _in_thread(
    op: Operator, once: SyncOnce, raw: dict[str, Any], logger: Logger
) -> Outcome | None:
    """Run one sync in kopf's executor, with kopf's context (its Event poster lives there)."""
    context = contextvars.copy_context()
    loop = asyncio.get_running_loop()
    outcome: Outcome | None = await loop.run_in_executor(
        op.executor, context.run, once, raw, logger
    )
    return outcome


__all__ = ["Gone", "ObjectLocks", "Operator", "StatusMemory", "follow"]
