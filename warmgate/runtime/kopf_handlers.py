"""Kopf wiring: the watches that feed the followers, which call the reconcile's sync.

`run` builds everything once at start-up: the cluster adapter (one API client), the plan
cache, the executor of the syncs, the metrics endpoint and the kopf registry. The handlers
reach them through kopf's ``memo``, the `follower.Operator`.

What triggers a sync: the followers (`runtime.follower`, one task for all objects), fed by the
SpecDecodeDeployment watch (`observe`: a new or changed object syncs at once) and woken by a
watched child's change (`child_changed`, `kube.children`); they also resync each object on
a slow jittered interval. There are no kopf change handlers, so kopf writes nothing to the
objects, and no handler needs a finalizer, so kopf sets none (and removes the one earlier builds
set, `FINALIZER`); a deleted object's DELETED watch event drops what is kept of it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, cast

import kopf

from warmgate.api import GROUP, PLURAL, VERSION, ManifestError, SpecDecodeDeployment, parse_manifest
from warmgate.api.constants import FINALIZER, LABEL_NAME
from warmgate.kube import api_session, children, controller_metrics
from warmgate.kube.kube_cluster import KubeCluster
from warmgate.kube.runner_endpoints import HttpRunnerEndpoints
from warmgate.reconcile.planning.evaluate import PlanningResult, evaluate
from warmgate.reconcile.planning.planning_cache import PlanningCache
from warmgate.reconcile.sync.actions import EventType
from warmgate.runtime import heap, leader, liveness, metrics, runtime_metrics
from warmgate.runtime.follower import Operator
from warmgate.runtime.sync import (
    Synced,
    keep_serving,
    refuse_namespace,
    refused_namespace,
    sync,
)
from warmgate.settings import Settings

log = logging.getLogger(__name__)
# kopf's total for a request other than a watch stream, in read timeouts (120 s by default).
KOPF_REQUEST_READS: Final = 4


def run(
    settings: Settings,
    *,
    namespaces: Collection[str],
    liveness_endpoint: str | None,
    verbose: bool = False,
) -> None:
    """Run the operator until it is stopped: every namespace when ``namespaces`` is empty.

    With a leader Lease (`Settings.lease`), kopf starts only once this replica holds it
    (`leader.lead`); until then the process stands by, watching nothing, writing nothing.
    """
    kopf.configure(verbose=verbose)
    if not verbose:
        logging.getLogger("kopf.objects").addFilter(quiet_watch_handlers)
    timeouts = (settings.api_connect_timeout, settings.api_read_timeout)
    cluster = KubeCluster.connect(settings.sync_workers, timeouts)
    plans = PlanningCache(_timed_evaluate, max_bytes=settings.plan_cache_mb * 2**20)
    executor = ThreadPoolExecutor(settings.sync_workers, thread_name_prefix="warmgate-sync")
    health = liveness.Liveness()
    progress = liveness.SyncProgress(settings.stall_seconds)
    health.add("syncs", progress.stalled)
    memo = Operator(
        settings,
        cluster,
        plans,
        HttpRunnerEndpoints(),
        writes=cluster.writes,
        versions=cluster.versions,
        executor=executor,
        progress=progress,
        liveness=health,
    )
    if liveness_endpoint:
        liveness.serve(liveness_endpoint, health)
    if settings.metrics_port:
        workers = controller_metrics.MAX_CONCURRENT.labels(controller_metrics.CONTROLLER)
        workers.set(settings.sync_workers)
        metrics.serve(settings.metrics_port)
        runtime_metrics.serve_runtime(cluster.connections, plans.stats)
        log.info(f"Started the metrics endpoint on port {settings.metrics_port}")
    held = None
    if settings.lease is not None:
        namespace = leader.lease_namespace(settings.lease, namespaces)
        held = leader.lead(settings.lease, namespace, timeouts, health)
    try:
        kopf.run(
            registry=registry(settings, namespaces),
            settings=kopf_settings(settings, executor),
            memo=memo,
            standalone=True,  # one replica acts: the only one, or the Lease's holder
            clusterwide=not namespaces,
            namespaces=namespaces,
        )
    finally:
        # Syncs still queued when kopf stops are dropped, not run one by one before the
        # process may exit (hundreds after a burst of creations); the next operator's
        # followers sync every object as they first see it. The ones running finish their sync.
        executor.shutdown(wait=True, cancel_futures=True)
        if held is not None:  # only now: no sync of this replica runs any more
            held.release()


# kopf logs these at INFO after every watch event of every object and child: thousands of lines
# a minute at scale, telling nothing (a failing handler still logs its error).
WATCH_HANDLER_SUCCESSES: Final = frozenset(
    {"Handler 'observe' succeeded.", "Handler 'child' succeeded."}
)


def quiet_watch_handlers(record: logging.LogRecord) -> bool:
    """The log filter that drops the watch handlers' successes (`WATCH_HANDLER_SUCCESSES`)."""
    return not (record.levelno == logging.INFO and record.msg in WATCH_HANDLER_SUCCESSES)


def kopf_settings(
    ours: Settings | None = None, executor: ThreadPoolExecutor | None = None
) -> kopf.OperatorSettings:
    """Keep kopf's bookkeeping under `warmgate.dev/` annotations, out of the typed status;
    run the syncs in as many threads as the API client's pool has connections."""
    ours = ours or Settings()
    settings = kopf.OperatorSettings()
    if executor is not None:  # the handlers' and the followers' syncs share it
        settings.execution.executor = executor
    settings.execution.max_workers = ours.sync_workers
    # kopf's own requests: a connect timeout, and a total for its requests other than watch
    # streams (patches, Events, the list that starts each watch: thousands of objects at
    # scale, so four read timeouts, not one) instead of aiohttp's 5 minutes; its watch streams
    # reconnect after kopf's inactivity timeout (70 s without an event).
    settings.networking.connect_timeout = ours.api_connect_timeout
    settings.networking.request_timeout = KOPF_REQUEST_READS * ours.api_read_timeout
    settings.watching.connect_timeout = ours.api_connect_timeout
    children.label_selectors(settings)
    # No change handlers (create/update/resume): the followers see every change in the
    # object's watch events and sync level-based, so kopf writes nothing to an object (no
    # last-handled annotation, no progress) and never waits for its own patch's echo.
    # No handler needs a finalizer; kopf removes this one, which earlier builds put on
    # every object for their per-object daemons, when it sees an object carrying it.
    settings.persistence.finalizer = FINALIZER
    # Nothing compares an object with its last handled state (that is for change handlers):
    # without this, kopf deep-copies every watched body (Jobs and Pods included) on each event.
    settings.persistence.diffbase_storage = NoDiffBase()
    # kopf turns object-log records at this level into Events: INFO would post "Timer 'resync'
    # succeeded" for every object on every resync. kopf.info also obeys this level, so the
    # handlers post their own Normal Events with kopf.event, which does not.
    settings.posting.level = logging.WARNING
    return settings


class NoDiffBase(kopf.DiffBaseStorage):
    """The diff base of an operator without change handlers: no essence is built, stored or
    read (kopf builds one for every watch event of every watched kind, a deep copy of the body,
    to detect the changes that only change handlers use)."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


def registry(settings: Settings, namespaces: Collection[str] = ()) -> kopf.OperatorRegistry:
    """The handlers: the watch of the objects and of their children, which feeds the followers
    (started and stopped with the operator; they sync on a new object, a changed spec, label
    or annotation, a changed child, and the resync); login."""
    handlers = kopf.OperatorRegistry()
    # kopf logs in with the official client's configuration (in-cluster, else $KUBECONFIG),
    # as its default registry does, but with a bounded connection pool (`api_session`).
    limit = api_session.connection_limit(len(children.WATCHED) + 1, len(namespaces))
    timeouts = (settings.api_connect_timeout, settings.api_read_timeout)
    login = api_session.bounded_login(limit, timeouts)
    kopf.on.login(id="login_via_client", registry=handlers)(login)
    resource = (GROUP, VERSION, PLURAL)
    kopf.on.event(*resource, id="observe", registry=handlers)(observe)
    kopf.on.startup(id="followers", registry=handlers)(start_followers)
    kopf.on.cleanup(id="followers", registry=handlers)(stop_followers)
    present = {LABEL_NAME: kopf.PRESENT}
    for kind in children.WATCHED:
        kopf.on.event(*kind, id="child", labels=present, registry=handlers)(child_changed)
    return handlers


async def start_followers(
    memo: Operator, settings: kopf.OperatorSettings, logger: kopf.Logger, **_: Any
) -> None:
    """Start the one task that follows every object (`follower.Followers`), and the event
    loop's heartbeat; the liveness probe fails when either stops."""

    def once(raw: dict[str, Any], log: Any) -> Synced | None:
        return resync(raw, log, memo)

    def object_log(raw: dict[str, Any]) -> kopf.Logger:
        return kopf.ObjectLogger(body=kopf.Body(cast(kopf.RawBody, raw)), settings=settings)

    following = asyncio.create_task(memo.followers.run(memo, once, object_log))
    # Between syncs, the serving runners are asked for new unwarmed shapes (runner_watch).
    poll = memo.watch.run(
        memo.endpoints.read, memo.followers.wake, memo.settings.runner_poll_seconds
    )
    heartbeat = liveness.Heartbeat()
    memo.tasks.extend([following, asyncio.create_task(poll), asyncio.create_task(_beat(heartbeat))])
    memo.liveness.add("event-loop", heartbeat.stalled)
    memo.liveness.add("followers", lambda: "the followers stopped" if following.done() else None)
    logger.debug("Started the followers")


async def _beat(heartbeat: liveness.Heartbeat) -> None:
    while True:
        heartbeat.beat()
        await asyncio.sleep(1.0)


async def stop_followers(memo: Operator, **_: Any) -> None:
    """Stop following: the syncs in flight are cancelled (their threads finish their sync)."""
    memo.liveness.remove("event-loop")
    memo.liveness.remove("followers")
    for task in memo.tasks:
        task.cancel()
    await asyncio.gather(*memo.tasks, return_exceptions=True)
    memo.tasks.clear()


def resync(raw: dict[str, Any], logger: kopf.Logger, memo: Operator) -> Synced | None:
    """One sync of an object (in a thread): compute the whole status from the current state of
    the object and its children, and write it when it changed."""
    body = kopf.Body(cast(kopf.RawBody, raw))
    sdd = _parse(body, memo, logger)
    if sdd is None:
        return None
    namespace, name, uid = sdd.metadata.namespace or "", sdd.metadata.name or "", sdd.metadata.uid
    version = str((raw.get("metadata") or {}).get("resourceVersion") or "") or None
    if refused_namespace(sdd, memo.settings):
        refuse_namespace(sdd, memo, logger, version)
        return None
    with memo.locks.hold(uid or ""):
        if uid in memo.gone:  # deleted while this sync waited for the lock
            return None
        sdd, version = memo.statuses.latest(sdd, version)
        outcome = sync(sdd, memo, _KopfEvents(body), logger, version=version)
        if outcome.gone:  # deleted unseen (the watch was away)
            _forget(namespace, name, uid or "", memo)
            return None
        if outcome.written:
            memo.statuses.remember(uid or "", outcome.status, outcome.version, outcome.replaced)
        # Under the lock: a delete's `forget` removes the series after this, never before.
        metrics.record(namespace, name, outcome.result)
        metrics.record_status(namespace, name, outcome.status)
    return outcome


async def child_changed(
    type: str | None,  # kopf passes the watch event type under this name
    body: kopf.Body,
    namespace: str | None,
    labels: Mapping[str, str],
    memo: Operator,
    **_: Any,
) -> None:
    """A watched child changed: wake its parent (whose follower skips the operator's echo).

    Its resourceVersion is noted first, so the lists of the sync it causes show at least this
    (`children.WatchVersions`). The initial listing (type None) wakes nobody: the followers
    sync every object as the objects' own listing brings it.
    """
    meta = body.get("metadata") or {}
    kind, version = str(body.get("kind") or ""), str(meta.get("resourceVersion") or "")
    memo.versions.seen(kind, namespace or "", version)
    if type is not None:
        child = children.child_version(type, body)
        memo.followers.wake(children.child_parent(namespace, labels), child)


async def observe(
    event: kopf.RawEvent,
    type: str | None,
    memo: Operator,
    **_: Any,
) -> None:
    """Every watch event of an object: its latest body for the followers; a deletion forgets it.

    The body loses its managedFields first: the followers hold every object's latest body as
    long as it exists, and the managedFields are about 40% of it (3 KB of a 7 KB body, more as
    Python objects) that nothing here reads. Event handlers run before the change handlers, on
    the dict kopf keeps (kopf/_core/reactor/processing.py), so they see it trimmed too.
    """
    raw = cast(dict[str, Any], event["object"])
    meta = raw.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    if type == "DELETED":
        memo.followers.drop(str(meta.get("uid") or "") if isinstance(meta, dict) else "")
        # In a thread: it waits for a sync of the object in flight (its lock).
        await asyncio.get_running_loop().run_in_executor(memo.executor, forget, raw, memo)
    else:
        memo.followers.track(raw, memo)


def forget(raw: Mapping[str, Any], memo: Operator) -> None:
    """A deleted object: drop its metrics series, its retry count, plan pin and status memory."""
    meta = raw.get("metadata") or {}
    uid = str(meta.get("uid") or "")
    with memo.locks.hold(uid):  # after a sync in flight, before any later one (`Gone`)
        _forget(str(meta.get("namespace") or ""), str(meta.get("name") or ""), uid, memo)


def _forget(namespace: str, name: str, uid: str, memo: Operator) -> None:
    """Under the object's lock: it is gone (its followers stop), its series and memories go."""
    memo.gone.add(uid)
    metrics.forget(namespace, name)
    memo.forget(uid)


def _parse(body: kopf.Body, memo: Operator, logger: Any) -> SpecDecodeDeployment | None:
    """The object as the models read it; None when they cannot, reported once per generation.

    The server validated the spec, so an unreadable one is version skew between the CRD and the
    operator: retrying cannot help, so it gets one `InvalidSpec` warning until the spec changes.
    """
    try:
        return parse_manifest(dict(body))
    except ManifestError as exc:
        meta = body.get("metadata") or {}
        uid, generation = str(meta.get("uid") or ""), meta.get("generation")
        if memo.refused.get(uid) != generation:
            memo.refused[uid] = generation
            kopf.warn(body, reason="InvalidSpec", message=str(exc)[:1024])
        keep_serving(dict(body), str(exc), memo, _KopfEvents(body), logger)
        return None


class _KopfEvents:
    """Events on the object through kopf's poster (batched, posted in the background)."""

    def __init__(self, body: kopf.Body) -> None:
        self._body = body

    def post(self, type_: EventType, reason: str, message: str) -> None:
        kopf.event(self._body, type=type_, reason=reason, message=message)


def _timed_evaluate(sdd: SpecDecodeDeployment) -> PlanningResult:
    with metrics.PLAN_SECONDS.time():
        result = evaluate(sdd)
    heap.release_free_memory()  # the planning's garbage (runtime/heap.py)
    return result


__all__ = ["NoDiffBase", "forget", "kopf_settings", "observe", "registry", "resync", "run"]
