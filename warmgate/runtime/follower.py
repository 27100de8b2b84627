"""The followers: one task that syncs each object when it or a child changes, and rarely else.

`Followers` (one asyncio task for all objects; not kopf's change handlers, which write their
state into every object and wait for its echo, nor a kopf daemon per object, which needs a
finalizer on every object and a task of its own) syncs an object when:

- it is new to the followers (created, or first listed since the operator started)
  or its generation (spec), labels or annotations changed (`Followers.track`, from the
  SpecDecodeDeployment watch); its status changing (the operator's own write) is no news;
- a watched child changed (`kube.children`, `Followers.wake`): a Job's completion or a Pod's
  readiness reaches the status within about a second;
- the safety resync: `resync_seconds`, jittered by +-20% so objects never resync in lockstep,
  the first one anywhere in 0.2-1.2 intervals (shorter, `ACTIVE_RESYNC_SECONDS`, while a runner
  runs: its progress is polled from the Pod); at most `RESYNCS` run at once;
- the backoff after an API failure (`Synced.retry_after`).

The objects and their latest bodies come from the SpecDecodeDeployment watch (`Followers.track`,
a deletion `Followers.drop`). A sync runs in a thread of kopf's executor, under the object's
lock (a deletion's `forget` waits for a sync in flight), one at a time per object, and
writes the status itself when it changed. `StatusMemory` keeps the status last written until
the watch brings the object back with it, so a sync that starts in between neither writes it
again nor posts its Events twice.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import itertools
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

from warmgate.api import SpecDecodeDeployment, SpecDecodeDeploymentStatus
from warmgate.api.conditions import get_condition
from warmgate.api.constants import Reason
from warmgate.kube import controller_metrics
from warmgate.kube.children import (
    ChildVersion,
    OwnWrites,
    ParentKey,
    WatchVersions,
    parent_key,
)
from warmgate.kube.cluster import Logger
from warmgate.runtime import metrics
from warmgate.runtime.liveness import Liveness, SyncProgress
from warmgate.runtime.sync import Runtime, Synced
from warmgate.settings import DEFAULT_STALL_SECONDS

JITTER: Final = 0.2
FIRST_LOW: Final = 0.2
RESYNCS: Final = 4
# While a runner runs, its progress (read from the Pod) is polled this often at most.
ACTIVE_RESYNC_SECONDS: Final = 15.0
# Events that come together (a Pod's, then its Job's status) are synced once.
COALESCE_SECONDS: Final = 0.1
# How long a written status stands in for the one the watch has not brought back yet.
REMEMBER_SECONDS: Final = 30.0


@dataclass(frozen=True, slots=True)
class _Written:
    """A status write: the status, the object's resourceVersion after it (None when unknown),
    the versions it replaced (the body the sync read, its own earlier write), until when."""

    status: SpecDecodeDeploymentStatus
    version: str | None
    replaced: frozenset[str]
    until: float


class StatusMemory:
    """The status each object was last given, until the watch delivers the object with it.

    With resourceVersions known (the operator's writes are preconditioned on them), a body
    stands for the write only when it is one of the versions the write replaced: the watch has
    not brought the write back yet. Any other version is newer news (a spec edit, another
    writer): the memory is dropped and the body taken as it is.
    """

    def __init__(self) -> None:
        self._written: dict[str, _Written] = {}
        self._lock = threading.Lock()

    def remember(
        self,
        uid: str,
        status: SpecDecodeDeploymentStatus,
        version: str | None = None,
        replaced: frozenset[str] = frozenset(),
    ) -> None:
        now = time.monotonic()
        with self._lock:
            # Expired entries go now, not at the object's next sync (minutes away): each one
            # holds a whole status.
            for stale in [key for key, w in self._written.items() if w.until < now]:
                del self._written[stale]
            self._written[uid] = _Written(status, version, replaced, now + REMEMBER_SECONDS)

    def latest(
        self, sdd: SpecDecodeDeployment, version: str | None = None
    ) -> tuple[SpecDecodeDeployment, str | None]:
        """``sdd`` (read at resourceVersion ``version``) and the version to write its next
        status at: with the status last written and that write's version when the body is
        older than the write; else as it is."""
        uid = sdd.metadata.uid or ""
        with self._lock:
            written = self._written.get(uid)
            if written is not None and time.monotonic() <= written.until:
                if version is not None and written.version is not None:
                    stands_in = version in written.replaced
                else:  # versions unknown: compare the statuses
                    stands_in = written.status != sdd.status
                if stands_in:
                    updated = sdd.model_copy(update={"status": written.status})
                    return updated, written.version or version
            self._written.pop(uid, None)
        return sdd, version

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
    """One lock per object uid: its sync and its deletion's `forget` take turns."""

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


# One sync of an object's body in a thread: its outcome, None when the body is unreadable.
SyncOnce = Callable[[dict[str, Any], Logger], Synced | None]
# The logger of one object's sync (kopf's object logger: its warnings become Events).
ObjectLog = Callable[[dict[str, Any]], Logger]


@dataclass(eq=False, slots=True)
class _Followed:
    """One followed object: its latest body and when it syncs next."""

    key: ParentKey
    body: dict[str, Any]
    due: float
    retrying: bool = False
    woken: bool = False
    news: bool = False  # the object itself is new or changed
    fresh: bool = True  # its first sync is still to come
    running: bool = False
    seen: list[ChildVersion] = field(default_factory=list)


class Followers:
    """Every object's follower in one asyncio task (no task, no finalizer per object).

    The SpecDecodeDeployment watch tracks each object's latest body (`track`, `drop`), the
    children's watch wakes objects (`wake`); `run` syncs each one when woken and when its
    resync is due, at most one sync per object at a time, until it is stopped. Everything runs
    on the event loop; the syncs themselves in the executor's threads.
    """

    def __init__(self, queue: controller_metrics.WorkQueue | None = None) -> None:
        # The objects waiting for their sync, as controller-runtime's work queue metrics.
        self.queue = queue or controller_metrics.FOLLOWER_QUEUE
        self._objects: dict[str, _Followed] = {}
        self._by_key: dict[ParentKey, set[str]] = {}
        self._due: list[tuple[float, int, str]] = []  # a heap; stale entries are skipped
        self._woken: set[str] = set()  # woken since the last start: started without a scan
        self._order = itertools.count()
        self._tasks: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Event()
        # kopf's context of a watch event (its Event poster lives there), for the syncs.
        self.context: contextvars.Context | None = None

    def __len__(self) -> int:
        return len(self._objects)

    def track(self, body: dict[str, Any], op: Operator) -> None:
        """The latest body of an object: a new one (created, or first seen since the operator
        started) and a changed spec, label or annotation sync at once; a new one's first resync
        lies anywhere in one interval after. Called from kopf's handler of the object's watch
        events, whose context the syncs run in."""
        if self.context is None:
            self.context = contextvars.copy_context()
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if meta.get("deletionTimestamp"):  # being deleted: nothing to follow any more
            self.drop(uid)
            return
        followed = self._objects.get(uid)
        if followed is not None:
            changed = _essence(followed.body) != _essence(body)
            followed.body = body
            if changed:  # a spec, label or annotation edit: not its status (the operator's)
                self._news(uid, followed)
            return
        key = parent_key(meta.get("namespace"), str(meta.get("name") or ""))
        followed = _Followed(key, body, time.monotonic() + op.first_delay())  # until its sync
        self._objects[uid] = followed
        self._by_key.setdefault(key, set()).add(uid)
        self._schedule(uid, followed)
        self._news(uid, followed)  # created, or seen first since the operator started: sync now

    def _news(self, uid: str, followed: _Followed) -> None:
        followed.news = True
        self._wake(uid, followed)

    def _wake(self, uid: str, followed: _Followed) -> None:
        self.queue.add(uid)
        followed.woken = True
        self._woken.add(uid)
        self._changed.set()

    def drop(self, uid: str) -> None:
        """An object deleted (or going): no more syncs of it."""
        followed = self._objects.pop(uid, None)
        self.queue.discard(uid)
        if followed is None:
            return
        uids = self._by_key.get(followed.key, set())
        uids.discard(uid)
        if not uids:
            self._by_key.pop(followed.key, None)

    def wake(self, key: ParentKey | None, version: ChildVersion = None) -> int:
        """Wake the objects of this parent key (a label value may be shared); how many."""
        uids = self._by_key.get(key, set()) if key is not None else set()
        for uid in uids:
            followed = self._objects[uid]
            followed.seen.append(version)
            self._wake(uid, followed)
        return len(uids)

    async def run(self, op: Operator, once: SyncOnce, object_log: ObjectLog) -> None:
        """Start the syncs that are due, until cancelled; then cancel the ones in flight."""
        try:
            while True:
                self._start_due(op, once, object_log)
                self._changed.clear()
                delay = self._due[0][0] - time.monotonic() if self._due else None
                if delay is None or delay > 0:
                    await _wait(self._changed, delay)
        finally:
            for task in self._tasks:
                task.cancel()

    def _schedule(self, uid: str, followed: _Followed) -> None:
        heapq.heappush(self._due, (followed.due, next(self._order), uid))
        self._changed.set()

    def _start_due(self, op: Operator, once: SyncOnce, object_log: ObjectLog) -> None:
        now = time.monotonic()
        starting, self._woken = list(self._woken), set()  # a running one loops while woken
        while self._due and self._due[0][0] <= now:
            due, _, uid = heapq.heappop(self._due)
            followed = self._objects.get(uid)
            if followed is not None and followed.due == due and not followed.running:
                self.queue.add(uid)  # its resync or retry is due
                starting.append(uid)
        for uid in starting:
            followed = self._objects.get(uid)
            if followed is None or followed.running:  # dropped, or its sync loops while woken
                continue
            followed.running = True
            task = asyncio.create_task(self._follow(uid, followed, op, once, object_log))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _follow(
        self, uid: str, followed: _Followed, op: Operator, once: SyncOnce, object_log: ObjectLog
    ) -> None:
        """Sync one object while it is woken or due; one such task per object at a time."""
        try:
            while self._objects.get(uid) is followed:
                if followed.woken:
                    await asyncio.sleep(COALESCE_SECONDS)  # by now the writes have their answers
                    followed.woken = False
                    seen, followed.seen = followed.seen, []
                    news, followed.news = followed.news, False
                    if not news and op.writes.echoes(seen) and time.monotonic() < followed.due:
                        metrics.FOLLOWER_SYNCS.labels("echo").inc()
                        self.queue.discard(uid)
                        continue  # only the operator's own writes came back: nothing new
                    metrics.FOLLOWER_SYNCS.labels("object" if news else "child").inc()
                    done = await _in_thread(op, once, uid, followed.body, object_log)
                elif followed.due <= time.monotonic():
                    metrics.FOLLOWER_SYNCS.labels("retry" if followed.retrying else "resync").inc()
                    self.queue.add(uid)
                    async with op.resyncs:
                        done = await _in_thread(op, once, uid, followed.body, object_log)
                else:
                    return
                if uid in op.gone:  # deleted while the watch was away (the status write: 404)
                    self.drop(uid)
                    return
                outcome = done.outcome
                followed.retrying = outcome is not None and outcome.retry_after is not None
                if followed.retrying:
                    metrics.SYNC_FAILURES.labels("api").inc()
                result = _result(done)
                controller_metrics.observe_reconcile(result, done.seconds, raised=done.raised)
                if result in ("error", "requeue_after") and outcome is not None:
                    self.queue.retry()  # it comes back after the delay it asked for
                if self._objects.get(uid) is followed:  # not deleted meanwhile: no series back
                    meta = followed.body.get("metadata") or {}
                    ok = result != "error"
                    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
                    metrics.record_sync(namespace, name, ok, time.time())
                delay = _next_delay(op, outcome)
                if followed.fresh and not followed.retrying:
                    # Objects applied together resync spread over an interval, not in one wave.
                    delay = op.first_delay()
                followed.fresh = False
                followed.due = time.monotonic() + delay
                self._schedule(uid, followed)
        finally:
            followed.running = False


@dataclass(frozen=True)
class Operator(Runtime):
    """kopf's memo: the sync's runtime plus what the handlers and followers share."""

    followers: Followers = field(default_factory=Followers)
    writes: OwnWrites = field(default_factory=OwnWrites)
    versions: WatchVersions = field(default_factory=WatchVersions)
    statuses: StatusMemory = field(default_factory=StatusMemory)
    locks: ObjectLocks = field(default_factory=ObjectLocks)
    gone: Gone = field(default_factory=Gone)
    # The generation of each object whose spec could not be read, reported once (InvalidSpec).
    refused: dict[str, Any] = field(default_factory=dict)
    executor: Executor | None = None
    # Syncs asked for and finished, and the checks the liveness probe runs (`runtime.liveness`).
    progress: SyncProgress = field(default_factory=lambda: SyncProgress(DEFAULT_STALL_SECONDS))
    liveness: Liveness = field(default_factory=Liveness)
    # The followers' task and the event loop's heartbeat, started and stopped with kopf.
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
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
        if polling(status):
            base = min(base, ACTIVE_RESYNC_SECONDS)
        return base * random.uniform(1 - JITTER, 1 + JITTER)

    def forget(self, uid: str) -> None:
        """A deleted object: drop what is kept about it."""
        self.backoff.forget(uid)
        self.watch.forget(uid)
        self.plans.forget(uid)
        self.statuses.forget(uid)
        self.locks.forget(uid)
        self.refused.pop(uid, None)


def polling(status: SpecDecodeDeploymentStatus | None) -> bool:
    """A runner runs: the object is synced again within `ACTIVE_RESYNC_SECONDS`."""
    warmed = get_condition(status.conditions if status else None, "Warmed")
    return warmed is not None and warmed.reason == Reason.WARMUP_RUNNING


async def _wait(event: asyncio.Event, seconds: float | None) -> None:
    """Until the event is set or the seconds passed. Not `asyncio.wait_for`: in Python 3.11 it
    can swallow a cancellation that comes as the event is set (cpython issue 86296), and the
    followers' task then never stopped."""
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter}, timeout=seconds)
    finally:
        waiter.cancel()


def _essence(body: dict[str, Any]) -> tuple[Any, ...]:
    """What a user changes: the spec (its generation), labels and annotations."""
    meta = body.get("metadata") or {}
    return meta.get("generation"), meta.get("labels"), meta.get("annotations")


def _next_delay(op: Operator, outcome: Synced | None) -> float:
    if outcome is not None and outcome.retry_after is not None:
        return outcome.retry_after
    return op.resync_delay(outcome.status if outcome is not None else None)


@dataclass(frozen=True, slots=True)
class _Pass:
    """One sync as the followers saw it: its outcome, whether it raised, its seconds."""

    outcome: Synced | None
    raised: bool
    seconds: float


def _result(done: _Pass) -> str:
    """controller-runtime's result of one sync (`controller_metrics`)."""
    if done.raised or (done.outcome is not None and done.outcome.retry_after is not None):
        return "error"
    if done.outcome is not None and polling(done.outcome.status):
        return "requeue_after"
    return "success"


async def _in_thread(
    op: Operator,
    once: SyncOnce,
    uid: str,
    body: dict[str, Any],
    object_log: ObjectLog,
) -> _Pass:
    """Run one sync in kopf's executor, in a copy of the context of kopf's watch handlers
    (its Event poster lives there: the followers' own task, started before it, lacks it).

    A sync that raises (a bug: the sync reports the cluster's failures in its outcome) is
    logged and the object resyncs as usual: one object never stops the others' followers."""
    raw = dict(body)
    logger = object_log(raw)
    context = (op.followers.context or contextvars.copy_context()).copy()
    loop = asyncio.get_running_loop()
    queue = op.followers.queue
    workers = controller_metrics.ACTIVE_WORKERS.labels(controller_metrics.CONTROLLER)
    took = [0.0]

    def work() -> Synced | None:
        token = queue.start(uid)  # it leaves the queue once a thread runs it
        workers.inc()
        started = time.perf_counter()
        try:
            return once(raw, logger)
        finally:
            took[0] = time.perf_counter() - started
            workers.dec()
            queue.done(token)

    op.progress.started()
    try:
        outcome: Synced | None = await loop.run_in_executor(op.executor, context.run, work)
    except Exception as exc:
        metrics.SYNC_FAILURES.labels("error").inc()
        logger.error(f"The sync failed: {exc!r}", exc_info=exc)
        return _Pass(None, True, took[0])
    finally:
        op.progress.finished()
    return _Pass(outcome, False, took[0])


__all__ = ["Followers", "Gone", "ObjectLocks", "Operator", "StatusMemory"]
