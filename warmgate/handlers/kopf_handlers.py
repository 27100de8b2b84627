"""Kopf wiring: registers the SpecDecodeDeployment handlers, which call the reconcile's sync.

`run` builds everything once at start-up: the cluster adapter (one API client), the plan
cache, the metrics endpoint and the kopf registry, whose resync interval comes from the
settings. The handlers reach them through kopf's ``memo``, which is the `Runtime`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

import kopf

from warmgate.api import GROUP, PLURAL, VERSION, ManifestError, SpecDecodeDeployment, parse_manifest
from warmgate.api.constants import FINALIZER
from warmgate.handlers import metrics, runtime_metrics
from warmgate.handlers.kube_cluster import KubeCluster
from warmgate.handlers.runner_endpoints import HttpRunnerEndpoints
from warmgate.reconcile.cluster import EventType
from warmgate.reconcile.plan_cache import PlanCache
from warmgate.reconcile.planning import PlanningResult, evaluate
from warmgate.reconcile.sync import Runtime, sync
from warmgate.settings import Settings

log = logging.getLogger(__name__)


def run(
    settings: Settings,
    *,
    namespaces: Collection[str],
    liveness_endpoint: str | None,
    verbose: bool = False,
) -> None:
    """Run the operator until it is stopped: every namespace when ``namespaces`` is empty."""
    kopf.configure(verbose=verbose)
    cluster = KubeCluster.connect(pool_size=settings.sync_workers)
    plans = PlanCache(_timed_evaluate, max_bytes=settings.plan_cache_mb * 2**20)
    runtime = Runtime(settings, cluster, plans, HttpRunnerEndpoints())
    if settings.metrics_port:
        metrics.serve(settings.metrics_port)
        runtime_metrics.serve_runtime(cluster.connections, plans.stats)
        log.info(f"Started the metrics endpoint on port {settings.metrics_port}")
    kopf.run(
        registry=registry(settings),
        settings=kopf_settings(settings),
        memo=runtime,
        standalone=True,
        clusterwide=not namespaces,
        namespaces=namespaces,
        liveness_endpoint=liveness_endpoint,
    )


def kopf_settings(ours: Settings | None = None) -> kopf.OperatorSettings:
    """Keep kopf's bookkeeping under `warmgate.dev/` annotations, out of the typed status;
    run the syncs in as many threads as the API client's pool has connections."""
    settings = kopf.OperatorSettings()
    settings.execution.max_workers = (ours or Settings()).sync_workers
    # The CRD's status schema prunes unknown fields, so kopf's default status storage would be
    # dropped by the server and the handlers would re-run forever.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    # kopf puts it on every object because of the resync timer (docs/operator.md says how to
    # remove it when the operator is gone).
    settings.persistence.finalizer = FINALIZER
    # kopf turns object-log records at this level into Events: INFO would post "Timer 'resync'
    # succeeded" for every object on every resync. kopf.info also obeys this level, so the
    # handlers post their own Normal Events with kopf.event, which does not.
    settings.posting.level = logging.WARNING
    return settings


def registry(settings: Settings) -> kopf.OperatorRegistry:
    """The handlers: one path for create, resume and update, the same path on a timer, login."""
    handlers = kopf.OperatorRegistry()
    # kopf logs in with the official client's configuration (in-cluster, else $KUBECONFIG),
    # as its default registry does when the client is installed.
    kopf.on.login(id="login_via_client", registry=handlers)(kopf.login_via_client)
    resource = (GROUP, VERSION, PLURAL)
    kopf.on.resume(*resource, id="reconcile", registry=handlers)(reconcile)
    kopf.on.create(*resource, id="reconcile", registry=handlers)(reconcile)
    kopf.on.update(*resource, id="reconcile", registry=handlers)(reconcile)
    # Optional: no finalizer of its own; kopf calls it while it removes the timer's finalizer.
    kopf.on.delete(*resource, id="forget", optional=True, registry=handlers)(forget)
    interval = settings.resync_seconds
    kopf.timer(
        *resource, id="resync", interval=interval, initial_delay=interval, registry=handlers
    )(resync)
    return handlers


def reconcile(
    body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, memo: Runtime, **_: Any
) -> None:
    """Compute the whole status from the current state of the object and its children."""
    sdd = _parse(body, report=True)
    if sdd is not None:
        _sync(sdd, body, patch, logger, memo)


def resync(
    body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, memo: Runtime, **_: Any
) -> None:
    """The same path on a timer: follows the warmup Job without watching Jobs."""
    sdd = _parse(body, report=False)  # the change handler already reported an unreadable object
    if sdd is not None:
        _sync(sdd, body, patch, logger, memo)


def forget(body: kopf.Body, memo: Runtime, **_: Any) -> None:
    """A deleted object: drop its metrics series, its retry count and its plan pin."""
    meta = body.get("metadata") or {}
    metrics.forget(str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    memo.backoff.forget(str(meta.get("uid") or ""))
    memo.plans.forget(str(meta.get("uid") or ""))


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
    runtime: Runtime,
) -> None:
    outcome = sync(sdd, runtime, _KopfEvents(body), logger)
    patch.status.update(outcome.status_patch)  # empty when unchanged: no API write
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
        return evaluate(sdd)


__all__ = ["forget", "kopf_settings", "reconcile", "registry", "resync", "run"]
