"""Kopf wiring: registers the SpecDecodeDeployment handlers, which call the reconcile's sync.

`run` builds everything once at start-up: the cluster adapter (one API client), the plan
cache, the executor of the syncs, the metrics endpoint and the kopf registry. The handlers
reach them through kopf's ``memo``, the `follower.Operator`.

What triggers a sync: the create, update and resume handlers (a spec change, the operator's
start), and the object's follower daemon (`handlers.follower`), which a watched child's change
wakes (`handlers.children`) and which resyncs on a slow jittered interval.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Final, cast

import kopf

from warmgate.api import GROUP, PLURAL, VERSION, ManifestError, SpecDecodeDeployment, parse_manifest
from warmgate.api.constants import FINALIZER, LABEL_NAME
from warmgate.handlers import api_session, children, heap, metrics, peering, runtime_metrics
from warmgate.handlers.follower import Operator, follow
from warmgate.handlers.kube_cluster import KubeCluster
from warmgate.handlers.runner_endpoints import HttpRunnerEndpoints
from warmgate.reconcile.cluster import ClusterError, EventType
from warmgate.reconcile.plan_cache import PlanCache
from warmgate.reconcile.planning import PlanningResult, evaluate
from warmgate.reconcile.sync import Outcome, sync
from warmgate.settings import Settings

log = logging.getLogger(__name__)

# Seconds a stopping follower may take before kopf cancels it (it stops within one sync).
FOLLOWER_EXIT_SECONDS: Final = 3.0
# Seconds kopf waits for the echo of its own patch before it acts on an older event.
CONSISTENCY_SECONDS: Final = 30.0


def run(
    settings: Settings,
    *,
    namespaces: Collection[str],
    liveness_endpoint: str | None,
    verbose: bool = False,
) -> None:
    """Run the operator until it is stopped: every namespace when ``namespaces`` is empty."""
    kopf.configure(verbose=verbose)
    started = time.time()
    cluster = KubeCluster.connect(pool_size=settings.sync_workers)
    plans = PlanCache(_timed_evaluate, max_bytes=settings.plan_cache_mb * 2**20)
    executor = ThreadPoolExecutor(settings.sync_workers, thread_name_prefix="warmgate-sync")
    if settings.peering is not None:
        peering.ensure_objects(cluster.api, settings.peering, namespaces)
    configured = kopf_settings(settings, executor)
    peering.configure(configured, settings, started)
    memo = Operator(
        settings,
        cluster,
        plans,
        HttpRunnerEndpoints(),
        writes=cluster.writes,
        versions=cluster.versions,
        executor=executor,
    )
    if settings.metrics_port:
        metrics.serve(settings.metrics_port)
        runtime_metrics.serve_runtime(cluster.connections, plans.stats)
        log.info(f"Started the metrics endpoint on port {settings.metrics_port}")
    try:
        kopf.run(
            registry=registry(settings, namespaces),
            settings=configured,
            memo=memo,
            standalone=settings.peering is None,
            clusterwide=not namespaces,
            namespaces=namespaces,
            liveness_endpoint=liveness_endpoint,
        )
    finally:
        # Syncs still queued when kopf stops are dropped, not run one by one before the
        # process may exit (hundreds after a burst of creations); the next operator's resume
        # handlers sync every object again. The ones running finish their sync.
        executor.shutdown(wait=True, cancel_futures=True)


def kopf_settings(
    ours: Settings | None = None, executor: ThreadPoolExecutor | None = None
) -> kopf.OperatorSettings:
    """Keep kopf's bookkeeping under `warmgate.dev/` annotations, out of the typed status;
    run the syncs in as many threads as the API client's pool has connections."""
    settings = kopf.OperatorSettings()
    if executor is not None:  # the handlers' and the followers' syncs share it
        settings.execution.executor = executor
    settings.execution.max_workers = (ours or Settings()).sync_workers
    children.label_selectors(settings)
    # The CRD's status schema prunes unknown fields, so kopf's default status storage would be
    # dropped by the server and the handlers would re-run forever.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    # After its own patch kopf waits this long for the watch to bring it back before it acts on
    # an older event. Its 5 s default runs out when 1,000 objects are applied at once and the
    # watch lags: kopf then ran the create handler again for a quarter of the objects
    # (docs/benchmarks.md). Only a patch whose echo never comes waits the whole time.
    settings.persistence.consistency_timeout = CONSISTENCY_SECONDS
    # kopf puts it on every object because of the resync timer (docs/operator.md says how to
    # remove it when the operator is gone).
    settings.persistence.finalizer = FINALIZER
    # kopf turns object-log records at this level into Events: INFO would post "Timer 'resync'
    # succeeded" for every object on every resync. kopf.info also obeys this level, so the
    # handlers post their own Normal Events with kopf.event, which does not.
    settings.posting.level = logging.WARNING
    return settings


def registry(settings: Settings, namespaces: Collection[str] = ()) -> kopf.OperatorRegistry:
    """The handlers: one path for create, resume and update; each object's follower, woken by
    its children's watch events and a slow jittered resync (``settings.resync_seconds``);
    login."""
    handlers = kopf.OperatorRegistry()
    # kopf logs in with the official client's configuration (in-cluster, else $KUBECONFIG),
    # as its default registry does, but with a bounded connection pool (`api_session`).
    limit = api_session.connection_limit(len(children.WATCHED) + 1, len(namespaces))
    kopf.on.login(id="login_via_client", registry=handlers)(api_session.bounded_login(limit))
    resource = (GROUP, VERSION, PLURAL)
    kopf.on.resume(*resource, id="reconcile", registry=handlers)(reconcile)
    kopf.on.create(*resource, id="reconcile", registry=handlers)(reconcile)
    kopf.on.update(*resource, id="reconcile", registry=handlers)(reconcile)
    # Optional: no finalizer of its own; kopf calls it while it removes the timer's finalizer.
    kopf.on.delete(*resource, id="forget", optional=True, registry=handlers)(forget)
    kopf.daemon(
        *resource,
        id="follow",
        cancellation_timeout=FOLLOWER_EXIT_SECONDS,
        registry=handlers,
    )(follower)
    kopf.on.event(*resource, id="trim", registry=handlers)(trim_body)
    present = {LABEL_NAME: kopf.PRESENT}
    for kind in children.WATCHED:
        kopf.on.event(*kind, id="child", labels=present, registry=handlers)(child_changed)
    return handlers


def reconcile(
    body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, memo: Operator, **_: Any
) -> None:
    """Compute the whole status from the current state of the object and its children."""
    sdd = _parse(body, report=True)
    if sdd is not None:
        with memo.locks.hold(sdd.metadata.uid or ""):
            if sdd.metadata.uid not in memo.gone:
                _sync(memo.statuses.latest(sdd), body, patch, logger, memo)


async def follower(
    body: kopf.Body, logger: kopf.Logger, stopped: kopf.DaemonStopped, memo: Operator, **_: Any
) -> None:
    """The object's follower: syncs it when a child changes and on the slow resync."""

    def once(raw: dict[str, Any], log: Any) -> Outcome | None:
        return resync(raw, log, memo)

    await follow(memo, body, logger, stopped, once)


def resync(raw: dict[str, Any], logger: kopf.Logger, memo: Operator) -> Outcome | None:
    """The same path from the follower (in a thread): it writes the status itself."""
    body = kopf.Body(cast(kopf.RawBody, raw))
    sdd = _parse(body, report=False)  # the change handler already reported an unreadable object
    if sdd is None:
        return None
    namespace, name, uid = sdd.metadata.namespace or "", sdd.metadata.name or "", sdd.metadata.uid
    with memo.locks.hold(uid or ""):
        if uid in memo.gone:  # deleted while this sync waited for the lock
            return None
        outcome = sync(memo.statuses.latest(sdd), memo.for_one_sync(), _KopfEvents(body), logger)
        if outcome.status_patch:
            try:
                memo.cluster.patch_status(namespace, name, outcome.status_patch)
            except ClusterError as exc:
                logger.error(f"Could not write the status, retrying: {exc}")
                retry = memo.backoff.after(uid or "", [exc])
                return replace(outcome, retry_after=retry)
            memo.statuses.remember(uid or "", outcome.status)
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
    """A watched child changed: wake its parent's follower (which skips the operator's echo).

    Its resourceVersion is noted first, so the lists of the sync it causes show at least this
    (`children.WatchVersions`). The initial listing (type None) wakes nobody: the resume
    handlers sync every object then.
    """
    meta = body.get("metadata") or {}
    kind, version = str(body.get("kind") or ""), str(meta.get("resourceVersion") or "")
    memo.versions.seen(kind, namespace or "", version)
    if type is not None:
        child = children.child_version(type, body)
        memo.wakeups.wake(children.child_parent(namespace, labels), child)


async def trim_body(event: kopf.RawEvent, **_: Any) -> None:
    """Drop the managedFields of the body kopf keeps of each object for its follower.

    kopf holds every object's latest body as long as the object exists; its managedFields are
    about 40% of it (3 KB of a 7 KB body, more as Python objects) and nothing here reads
    them. The event's body is the one kopf keeps (kopf/_core/reactor/processing.py,
    `process_resource_event`), and event handlers run before the daemons and the change
    handlers, so the object's other handlers see it trimmed too.
    """
    meta: dict[str, Any] | None = cast(dict[str, Any] | None, event["object"].get("metadata"))
    if meta is not None:
        meta.pop("managedFields", None)


def forget(body: kopf.Body, memo: Operator, **_: Any) -> None:
    """A deleted object: drop its metrics series, its retry count, plan pin and status memory."""
    meta = body.get("metadata") or {}
    uid = str(meta.get("uid") or "")
    with memo.locks.hold(uid):  # after a sync in flight, before any later one (`Gone`)
        memo.gone.add(uid)
        metrics.forget(str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    memo.forget(uid)


def _parse(body: kopf.Body, *, report: bool) -> SpecDecodeDeployment | None:
    """The object as the models read it; None (timer) or PermanentError when they cannot."""
    try:
        return parse_manifest(dict(body))
    except ManifestError as exc:
        if not report:
            return None
        # The server validated the spec, so this is version skew between CRD and operator.
        # Retrying cannot help; report it once and wait for the next change of the object.
        kopf.warn(body, reason="InvalidSpec", message=str(exc)[:1024])
        raise kopf.PermanentError(f"Refused an object the operator cannot read: {exc}") from exc


def _sync(
    sdd: SpecDecodeDeployment,
    body: kopf.Body,
    patch: kopf.Patch,
    logger: kopf.Logger,
    runtime: Operator,
) -> None:
    outcome = sync(sdd, runtime.for_one_sync(), _KopfEvents(body), logger)
    patch.status.update(outcome.status_patch)  # empty when unchanged: no API write
    if outcome.status_patch:  # kopf writes it after the handler returns
        runtime.statuses.remember(sdd.metadata.uid or "", outcome.status)
    namespace, name = sdd.metadata.namespace or "", sdd.metadata.name or ""
    metrics.record(namespace, name, outcome.result)
    metrics.record_status(namespace, name, outcome.status)
    if outcome.retry_after is not None:
        # kopf still writes the status patch, then calls the handler again after the delay.
        raise kopf.TemporaryError("the cluster did not answer; retrying", delay=outcome.retry_after)


class _KopfEvents:
    """Events on the object through kopf's poster (batched, posted in the background)."""

    def __init__(self, body: kopf.Body) -> None:
        self._body = body

    def post(self, type_: EventType, reason: str, message: str) -> None:
        kopf.event(self._body, type=type_, reason=reason, message=message)


def _timed_evaluate(sdd: SpecDecodeDeployment) -> PlanningResult:
    with metrics.PLAN_SECONDS.time():
        result = evaluate(sdd)
    heap.release_free_memory()  # the planning's garbage (handlers/heap.py)
    return result


__all__ = ["forget", "kopf_settings", "reconcile", "registry", "resync", "run", "trim_body"]
