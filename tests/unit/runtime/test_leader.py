"""Leader election with client-go's semantics (runtime/leader.py), against an in-memory Lease.

The real Lease API is exercised in tests/integration/test_leader_lease.py; here the clock is
the test's, so every rule about time is checked exactly: a standby's wait is measured on its
own clock from when it saw the record change, never from a time another replica wrote.
"""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

from warmgate.runtime.leader import Elector
from warmgate.settings import LeaseSettings

TIMINGS = LeaseSettings("warmgate", "ns", duration=15.0, renew_deadline=10.0, retry_period=2.0)


class MemoryLease:
    """One Lease: a spec and a version that every write moves on; updates at a version."""

    def __init__(self) -> None:
        self.spec: dict[str, Any] | None = None
        self.version = 0
        self.fail = False
        self.lock = threading.Lock()

    def get(self) -> tuple[dict[str, Any], str] | None:
        self._maybe_fail()
        with self.lock:
            return None if self.spec is None else (copy.deepcopy(self.spec), str(self.version))

    def create(self, spec: dict[str, Any]) -> str | None:
        self._maybe_fail()
        with self.lock:
            if self.spec is not None:
                return None
            return self._write(spec)

    def update(self, spec: dict[str, Any], version: str) -> str | None:
        self._maybe_fail()
        with self.lock:
            if str(self.version) != version:
                return None  # 409: someone wrote since that version
            return self._write(spec)

    def wait_change(self, version: str, seconds: float) -> None:
        time.sleep(min(seconds, 0.01))

    def _write(self, spec: dict[str, Any]) -> str:
        self.spec, self.version = copy.deepcopy(spec), self.version + 1
        return str(self.version)

    def _maybe_fail(self) -> None:
        if self.fail:
            raise ConnectionResetError("the apiserver went away")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def elector(lease: MemoryLease, holder: str, clock: Clock, **timings: float) -> Elector:
    settings = LeaseSettings("warmgate", "ns", **timings) if timings else TIMINGS
    return Elector(lease, holder, settings, clock)


def test_the_first_replica_creates_the_lease_and_holds_it() -> None:
    lease, clock = MemoryLease(), Clock()
    first = elector(lease, "a", clock)
    assert first.try_acquire_or_renew()
    assert lease.spec is not None
    assert lease.spec["holderIdentity"] == "a"
    assert lease.spec["leaseDurationSeconds"] == 15
    assert first.leading
    assert first.deadline == clock.now + 10.0


def test_a_standby_waits_the_lease_duration_on_its_own_clock_from_when_it_saw_the_record() -> None:
    lease, clock = MemoryLease(), Clock()
    active, standby = elector(lease, "a", clock), elector(lease, "b", clock)
    assert active.try_acquire_or_renew()
    # The holder's wall clock is an hour behind: its renewTime says nothing to the standby.
    assert lease.spec is not None
    lease.spec["renewTime"] = "2026-12-01T08:00:00.000000Z"
    assert not standby.try_acquire_or_renew()  # first seen now: 15 s from now at the earliest
    clock.now += 14.9
    assert not standby.try_acquire_or_renew()
    clock.now += 0.2
    assert standby.try_acquire_or_renew()  # unchanged for 15.1 s of its own clock
    assert lease.spec["holderIdentity"] == "b"
    assert lease.spec["leaseTransitions"] == 1


def test_every_renewal_restarts_the_standbys_wait() -> None:
    lease, clock = MemoryLease(), Clock()
    active, standby = elector(lease, "a", clock), elector(lease, "b", clock)
    assert active.try_acquire_or_renew()
    for _ in range(20):  # 40 s of renewals every 2 s: the standby never takes over
        assert not standby.try_acquire_or_renew()
        clock.now += 2.0
        assert active.try_acquire_or_renew()
    assert lease.spec is not None
    assert lease.spec["holderIdentity"] == "a"
    assert lease.spec["leaseTransitions"] == 0


def test_a_released_lease_is_taken_at_once() -> None:
    lease, clock = MemoryLease(), Clock()
    active, standby = elector(lease, "a", clock), elector(lease, "b", clock)
    assert active.try_acquire_or_renew()
    assert not standby.try_acquire_or_renew()
    assert active.release()
    assert lease.spec is not None
    assert lease.spec["holderIdentity"] == ""
    assert standby.try_acquire_or_renew()  # no wait: nobody holds it
    assert not active.release()  # it no longer holds it: nothing to release


def test_of_two_replicas_racing_for_a_free_lease_one_wins() -> None:
    lease, clock = MemoryLease(), Clock()
    first, second = elector(lease, "a", clock), elector(lease, "b", clock)
    assert first.try_acquire_or_renew()
    assert first.release()
    assert second.api.get() is not None
    # Both read the released record; the second's update, at the version both read, loses.
    spec, version = lease.get() or ({}, "")
    first._observe(spec, version)
    second._observe(spec, version)
    assert first._attempt(clock.now)
    assert not second._attempt(clock.now)
    assert lease.spec is not None
    assert lease.spec["holderIdentity"] == "a"


def test_a_failed_read_is_a_lost_round_and_the_next_one_works() -> None:
    lease, clock = MemoryLease(), Clock()
    replica = elector(lease, "a", clock)
    lease.fail = True
    assert not replica.try_acquire_or_renew()  # logged, not raised: the loop goes on
    lease.fail = False
    assert replica.try_acquire_or_renew()


def test_the_leader_gives_up_when_it_cannot_renew_within_the_deadline() -> None:
    """Real threads and time, short timings: renewals fail, `on_lost` comes at the deadline.
    A second between the deadline and a standby's takeover, so a loaded machine's scheduling
    delays (0.61 s measured against a 0.2 s margin) do not decide the test."""
    lease = MemoryLease()
    timings = {"duration": 2.0, "renew_deadline": 1.0, "retry_period": 0.05}
    leader = elector(lease, "a", time.monotonic, **timings)  # type: ignore[arg-type]
    assert leader.try_acquire_or_renew()
    renewed = time.monotonic()
    lost, stop = threading.Event(), threading.Event()
    lease.fail = True
    thread = threading.Thread(target=leader.keep, args=(stop, lost.set), daemon=True)
    thread.start()
    assert lost.wait(5.0)
    gave_up = time.monotonic() - renewed
    stop.set()
    thread.join(2.0)
    assert 1.0 <= gave_up < 2.0  # at the renew deadline, before a standby's 2 s


def test_the_leader_stops_at_once_when_another_replica_holds_the_lease() -> None:
    lease = MemoryLease()
    timings = {"duration": 30.0, "renew_deadline": 20.0, "retry_period": 0.05}
    leader = elector(lease, "a", time.monotonic, **timings)  # type: ignore[arg-type]
    assert leader.try_acquire_or_renew()
    assert lease.spec is not None
    lease.update({**lease.spec, "holderIdentity": "b"}, str(lease.version))  # taken over
    lost, stop = threading.Event(), threading.Event()
    thread = threading.Thread(target=leader.keep, args=(stop, lost.set), daemon=True)
    thread.start()
    assert lost.wait(2.0)  # far before its 20 s deadline
    stop.set()
    thread.join(2.0)


def test_a_standby_stops_standing_by_when_asked() -> None:
    lease, clock = MemoryLease(), Clock()
    assert elector(lease, "other", clock).try_acquire_or_renew()
    stop = threading.Event()
    stop.set()
    assert not elector(lease, "b", clock).acquire(stop)


def test_a_watch_stream_is_read_for_a_release_across_chunks() -> None:
    """The standby's watch (lease_api._released): a renewal is no news, a release, a deletion
    or an ERROR event (a version too old) ends the wait; events may be split across chunks."""
    from warmgate.kube.lease_api import _released

    renewed = b'{"type":"MODIFIED","object":{"spec":{"holderIdentity":"a"}}}\n'
    released = b'{"type":"MODIFIED","object":{"spec":{"holderIdentity":""}}}\n'
    assert not _released(iter([renewed[:10], renewed[10:], renewed]))
    assert _released(iter([renewed, released[:7], released[7:]]))
    assert _released(iter([b'{"type":"ERROR","object":{"code":410}}\n']))
    assert _released(iter([b'{"type":"DELETED","object":{"spec":{"holderIdentity":"a"}}}\n']))
    assert not _released(iter([]))  # the server ended the watch: the retry period passed
