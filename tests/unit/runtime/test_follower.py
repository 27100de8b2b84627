"""One task follows every object: wakes, echoes, resyncs, one sync per object, deletion."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import generate_latest
from support.fake_cluster import FakeCluster

from warmgate.api import SpecDecodeDeploymentStatus
from warmgate.api.status import Condition
from warmgate.kube import controller_metrics
from warmgate.kube.cluster import Logger
from warmgate.reconcile.planning.planning_cache import PlanningCache
from warmgate.runtime import metrics
from warmgate.runtime.follower import Followers, Operator
from warmgate.runtime.sync import Synced
from warmgate.settings import Settings

LOG = logging.getLogger("test_followers")


def body(name: str, uid: str, namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "uid": uid}}


class Syncs:
    """A stand-in for one sync: records which objects were synced, optionally blocks or fails."""

    def __init__(self) -> None:
        self.uids: list[str] = []
        self.running = 0
        self.most = 0
        self.release = threading.Event()
        self.release.set()
        self.fail: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, raw: dict[str, Any], log: Logger) -> Synced | None:
        uid = raw["metadata"]["uid"]
        with self._lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.uids.append(uid)
        self.release.wait(5)
        with self._lock:
            self.running -= 1
        if uid in self.fail:
            self.fail.discard(uid)
            raise RuntimeError("a bug in the sync")
        return None


def operator(monkeypatch: pytest.MonkeyPatch, first: float = 3600.0) -> Operator:
    """Resyncs an hour away unless ``first`` says otherwise."""
    monkeypatch.setattr(Operator, "first_delay", lambda self: first)
    monkeypatch.setattr(Operator, "resync_delay", lambda self, status=None: 3600.0)
    return Operator(Settings(), FakeCluster(), PlanningCache(lambda _: None))  # type: ignore[arg-type,return-value]


def run(
    op: Operator,
    syncs: Callable[[dict[str, Any], Logger], Synced | None],
    scenario: Callable[[Followers], Awaitable[None]],
) -> None:
    async def main() -> None:
        task = asyncio.create_task(op.followers.run(op, syncs, lambda raw: LOG))
        try:
            await scenario(op.followers)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())


async def until(check: Callable[[], bool], timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_a_wake_syncs_every_object_of_the_key_and_nobody_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    op, syncs = operator(monkeypatch), Syncs()

    async def scenario(followers: Followers) -> None:
        followers.track(body("p", "u1"), op)
        followers.track(body("q", "u2"), op)
        await until(lambda: sorted(syncs.uids) == ["u1", "u2"])  # new objects sync at once
        syncs.uids.clear()
        assert followers.wake(("ns", "p"), ("Job", "ns", "j", "7")) == 1
        assert followers.wake(("ns", "nobody")) == 0
        await until(lambda: syncs.uids == ["u1"])
        await asyncio.sleep(0.3)

    run(op, syncs, scenario)
    assert syncs.uids == ["u1"]


def test_the_operators_own_write_coming_back_syncs_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    op, syncs = operator(monkeypatch), Syncs()
    job = {"kind": "Job", "metadata": {"namespace": "ns", "name": "j", "resourceVersion": "7"}}
    op.writes.add("Job", job)

    async def scenario(followers: Followers) -> None:
        followers.track(body("p", "u1"), op)
        await until(lambda: syncs.uids == ["u1"])
        syncs.uids.clear()
        followers.wake(("ns", "p"), ("Job", "ns", "j", "7"))  # the echo of the create
        await asyncio.sleep(0.4)
        assert syncs.uids == []
        followers.wake(("ns", "p"), ("Job", "ns", "j", "8"))  # someone else's change
        await until(lambda: syncs.uids == ["u1"])

    run(op, syncs, scenario)


def test_resyncs_come_when_due_and_a_failing_sync_stops_nobody(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    op, syncs = operator(monkeypatch, first=0.05), Syncs()
    syncs.fail.add("u1")
    monkeypatch.setattr(Operator, "resync_delay", lambda self, status=None: 0.05)

    async def scenario(followers: Followers) -> None:
        followers.track(body("p", "u1"), op)
        followers.track(body("q", "u2"), op)
        await until(lambda: syncs.uids.count("u1") >= 3 and syncs.uids.count("u2") >= 3)

    run(op, syncs, scenario)


def _failures(reason: str) -> float:
    return metrics.SYNC_FAILURES.labels(reason)._value.get()


def test_failed_syncs_are_counted_by_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    op, syncs = operator(monkeypatch, first=0.05), Syncs()
    monkeypatch.setattr(Operator, "resync_delay", lambda self, status=None: 3600.0)
    syncs.fail.add("u1")  # raises once: a bug
    api = Synced(result=None, status=None, status_patch={}, retry_after=3600.0)  # type: ignore[arg-type]

    def sync(raw: dict[str, Any], log: Logger) -> Synced | None:
        syncs(raw, log)
        return api if raw["metadata"]["uid"] == "u2" else None

    before = _failures("error"), _failures("api")

    async def scenario(followers: Followers) -> None:
        followers.track(body("p", "u1"), op)
        followers.track(body("q", "u2"), op)
        await until(lambda: sorted(syncs.uids) == ["u1", "u2"])
        await asyncio.sleep(0.2)

    run(op, sync, scenario)
    assert (_failures("error"), _failures("api")) == (before[0] + 1, before[1] + 1)


def _reconciles(result: str) -> float:
    return controller_metrics.RECONCILE_TOTAL.labels("specdecodedeployment", result)._value.get()


def _counted(counter: Any, *labels: str) -> float:
    return float(counter.labels(*labels)._value.get())


def test_each_sync_is_a_reconcile_with_controller_runtimes_result_and_queue_figures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 37: a bug, an API failure, a poll while a runner runs and a plain sync are
    # controller-runtime's error, error, requeue_after and success; each passed the queue.
    op, syncs = operator(monkeypatch), Syncs()
    queue = controller_metrics.WorkQueue("test-followers")
    op = replace(op, followers=Followers(queue))
    syncs.fail.add("u1")  # raises once: a bug
    api = Synced(result=None, status=None, status_patch={}, retry_after=3600.0)  # type: ignore[arg-type]
    running = SpecDecodeDeploymentStatus(
        conditions=[
            Condition(
                type="Warmed",
                status="False",
                reason="WarmupRunning",
                last_transition_time=datetime(2026, 12, 5, tzinfo=UTC),
            )
        ]
    )
    polled = Synced(result=None, status=running, status_patch={}, retry_after=None)  # type: ignore[arg-type]
    plain = Synced(result=None, status=SpecDecodeDeploymentStatus(), status_patch={})  # type: ignore[arg-type]
    answers = {"u2": api, "u3": polled, "u4": plain}

    def sync(raw: dict[str, Any], log: Logger) -> Synced | None:
        syncs(raw, log)
        return answers.get(raw["metadata"]["uid"])

    results = ("success", "error", "requeue", "requeue_after")
    before = {r: _reconciles(r) for r in results}
    errors = _counted(controller_metrics.RECONCILE_ERRORS, "specdecodedeployment")
    panics = _counted(controller_metrics.RECONCILE_PANICS, "specdecodedeployment")
    adds = _counted(controller_metrics.QUEUE_ADDS, "test-followers", "test-followers")
    retries = _counted(controller_metrics.QUEUE_RETRIES, "test-followers", "test-followers")

    async def scenario(followers: Followers) -> None:
        for i in (1, 2, 3, 4):
            followers.track(body(f"o{i}", f"u{i}", namespace="ns-rc"), op)
        await until(lambda: sorted(syncs.uids) == ["u1", "u2", "u3", "u4"])
        await asyncio.sleep(0.2)

    run(op, sync, scenario)
    after = {r: _reconciles(r) - before[r] for r in results}
    assert after == {"success": 1, "error": 2, "requeue": 0, "requeue_after": 1}
    assert _counted(controller_metrics.RECONCILE_ERRORS, "specdecodedeployment") == errors + 2
    assert _counted(controller_metrics.RECONCILE_PANICS, "specdecodedeployment") == panics + 1
    assert _counted(controller_metrics.QUEUE_ADDS, "test-followers", "test-followers") == adds + 4
    # the API failure's backoff and the poll come back after a delay they asked for
    assert (
        _counted(controller_metrics.QUEUE_RETRIES, "test-followers", "test-followers")
        == retries + 2
    )
    assert queue.depth() == 0
    exported = {
        (family.name, sample.labels.get("name")): sample.value
        for family in queue.collect()
        for sample in family.samples
    }
    assert exported == {
        ("workqueue_depth", "test-followers"): 0,
        ("workqueue_unfinished_work_seconds", "test-followers"): 0,
        ("workqueue_longest_running_processor_seconds", "test-followers"): 0,
    }
    text = generate_latest(metrics.REGISTRY).decode()
    failing = 'warmgate_sync_consecutive_failures{name="o1",namespace="ns-rc"} 1.0'
    assert failing in text  # the bug: one failed pass in a row
    assert 'warmgate_sync_consecutive_failures{name="o4",namespace="ns-rc"} 0.0' in text
    for i in (1, 2, 3, 4):
        metrics.forget("ns-rc", f"o{i}")


def test_a_spec_label_or_annotation_change_syncs_the_status_alone_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    op, syncs = operator(monkeypatch), Syncs()

    async def scenario(followers: Followers) -> None:
        first = body("p", "u1") | {"spec": {"k": 1}}
        first["metadata"]["generation"] = 1
        followers.track(first, op)
        await until(lambda: syncs.uids == ["u1"])
        with_status = first | {"status": {"phase": "Pending"}}  # the operator's own write
        followers.track(with_status, op)
        await asyncio.sleep(0.3)
        assert syncs.uids == ["u1"]
        edited = with_status | {"metadata": first["metadata"] | {"generation": 2}}
        followers.track(edited, op)
        await until(lambda: syncs.uids == ["u1", "u1"])
        rewarm = {"warmgate.dev/rewarm": "now"}
        followers.track(edited | {"metadata": edited["metadata"] | {"annotations": rewarm}}, op)
        await until(lambda: syncs.uids == ["u1", "u1", "u1"])

    run(op, syncs, scenario)


def test_one_sync_per_object_at_a_time_and_a_wake_during_it_syncs_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    op, syncs = operator(monkeypatch), Syncs()
    syncs.release.clear()

    async def scenario(followers: Followers) -> None:
        followers.track(body("p", "u1"), op)  # a new object: synced at once
        await until(lambda: syncs.running == 1)
        for _ in range(5):
            followers.wake(("ns", "p"))
            await asyncio.sleep(0.02)
        syncs.release.set()
        await until(lambda: len(syncs.uids) == 2)
        await asyncio.sleep(0.3)

    run(op, syncs, scenario)
    assert syncs.most == 1
    assert syncs.uids == ["u1", "u1"]  # the wakes during the sync: one more sync


def test_an_object_being_deleted_or_gone_is_followed_no_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    op, syncs = operator(monkeypatch), Syncs()

    def gone_after_sync(raw: dict[str, Any], log: Logger) -> Synced | None:
        syncs(raw, log)
        op.gone.add(raw["metadata"]["uid"])  # its status write found no object (404)
        return None

    async def scenario(followers: Followers) -> None:
        followers.track(body("p", "u1"), op)
        going = body("p", "u1")
        going["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
        followers.track(going, op)
        assert len(followers) == 0
        followers.track(body("q", "u2"), op)
        await until(lambda: len(followers) == 0)

    run(op, gone_after_sync, scenario)
    assert syncs.uids == ["u2"]


POSTER: contextvars.ContextVar[str] = contextvars.ContextVar("poster")


def test_syncs_run_in_the_context_of_the_watch_handler_that_tracked_the_object(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """kopf's Event poster lives in the context of its watch handlers, not in the task the
    followers run in (started before kopf sets it up)."""
    op, seen = operator(monkeypatch), []

    def sync(raw: dict[str, Any], log: Logger) -> Synced | None:
        seen.append(POSTER.get("missing"))
        return None

    async def main() -> None:
        task = asyncio.create_task(op.followers.run(op, sync, lambda raw: LOG))

        async def watch_handler() -> None:  # what kopf runs for a watch event
            POSTER.set("kopf's poster")
            op.followers.track(body("p", "u1"), op)

        await asyncio.create_task(watch_handler())
        await until(lambda: seen != [])
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())
    assert seen == ["kopf's poster"]


def test_the_first_resync_after_the_first_sync_spreads_over_an_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Objects applied together resync anywhere in an interval after their first sync
    (`first_delay`), the later ones a jittered interval apart (`resync_delay`)."""
    op, syncs = operator(monkeypatch, first=0.05), Syncs()

    async def scenario(followers: Followers) -> None:
        followers.track(body("p", "u1"), op)
        await until(lambda: syncs.uids == ["u1", "u1"])  # the first sync, then the first resync
        await asyncio.sleep(0.3)

    run(op, syncs, scenario)
    assert syncs.uids == ["u1", "u1"]  # the next one is an hour away
