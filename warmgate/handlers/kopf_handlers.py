"""Kopf registration: settings, the level-based reconcile of SpecDecodeDeployments, metrics."""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from dataclasses import replace
from typing import Any

import kopf
from kubernetes import config as kube_config

from warmgate.api import GROUP, PLURAL, VERSION, ManifestError, SpecDecodeDeployment, parse_manifest
from warmgate.api.constants import COVERAGE_PROVEN, Reason
from warmgate.api.status import SpecDecodeDeploymentStatus
from warmgate.handlers import metrics, stages
from warmgate.reconcile.planning import PlanningResult, evaluate
from warmgate.reconcile.status_builder import build_status, status_patch
from warmgate.reconcile.warmup_state import WarmupState
from warmgate.resources import Children, PlanToRun, desired_children
from warmgate.settings import Settings

METRICS_PORT_ENV = "WARMGATE_METRICS_PORT"
SETTINGS = Settings.from_environment(os.environ)
RESYNC_SECONDS = SETTINGS.resync_seconds
_PLAN_CACHE_SIZE = 256
# Planning costs up to ~2 s per object; the resync timer must not pay it again for a spec
# it has already planned. Keyed by (uid, generation): any spec change bumps the generation.
_plans: OrderedDict[tuple[str, int], PlanningResult] = OrderedDict()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, logger: kopf.Logger, **_: Any) -> None:
    """Keep kopf's bookkeeping under `warmgate.dev/` annotations, out of the typed status."""
    # The CRD's status schema prunes unknown fields, so kopf's default status storage would be
    # dropped by the server and the handlers would re-run forever.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    settings.persistence.finalizer = f"{GROUP}/kopf-finalizer"
    # kopf turns object-log records at this level into Events: INFO would post "Timer 'resync'
    # succeeded" for every object on every resync. kopf.info also obeys this level, so the
    # handlers post their own Normal Events with kopf.event, which does not.
    settings.posting.level = logging.WARNING
    _load_client_config()
    port = int(os.environ.get(METRICS_PORT_ENV, "0") or 0)
    if port:
        metrics.serve(port)
        logger.info(f"Started the metrics endpoint on port {port}")


def _load_client_config() -> None:
    """The official client reads and creates children: in-cluster, else $KUBECONFIG."""
    try:
        kube_config.load_incluster_config()  # type: ignore[no-untyped-call]
    except kube_config.ConfigException:
        kube_config.load_kube_config()  # type: ignore[no-untyped-call]


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
def reconcile(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    """One path for create, resume and update: compute the status from the current state."""
    sdd = _parse(body, report=True)
    if sdd is not None:
        _sync(sdd, body, patch, logger)


@kopf.timer(GROUP, VERSION, PLURAL, interval=RESYNC_SECONDS, initial_delay=RESYNC_SECONDS)
def resync(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    """The same path on a timer: follows the warmup Job without watching Jobs."""
    sdd = _parse(body, report=False)  # the change handler already reported an unreadable object
    if sdd is not None:
        _sync(sdd, body, patch, logger)


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
    sdd: SpecDecodeDeployment, body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger
) -> None:
    result = _planned(sdd)
    warmup, verified = _warm(sdd, result, body, logger)
    serving = stages.guarded_serving(body, sdd, verified, result=result, logger=logger)
    status = build_status(sdd, result, warmup=warmup, serving=serving)
    _write_status(patch, sdd.status, status)
    _announce(body, sdd.status, result, logger)
    namespace, name = sdd.metadata.namespace or "", sdd.metadata.name or ""
    metrics.record(namespace, name, result)
    metrics.record_status(namespace, name, status)


def _warm(
    sdd: SpecDecodeDeployment, result: PlanningResult, body: kopf.Body, logger: kopf.Logger
) -> tuple[WarmupState | None, Children | None]:
    """The warmup state of the plan, and its children when the runner verified it."""
    if result.plan is None or not _may_warm(result):
        return None, None
    estimate = result.summary.estimated_warmup_seconds if result.summary else None
    to_run = PlanToRun(result.plan, float(estimate or 0), _recorded_kv_blocks(sdd))
    wanted = stages.plan_children(sdd, to_run, SETTINGS)
    if isinstance(wanted, WarmupState):
        logger.error(wanted.verdict.message)
        return wanted, None
    warmup = stages.guarded_warmup(body, sdd, wanted, logger)
    if warmup.verdict.status != "True":
        return warmup, None
    measured = warmup.summary_of_run.kv_blocks if warmup.summary_of_run else None
    if measured != to_run.kv_blocks:  # verified just now: serving pins what the runner measured
        wanted = desired_children(sdd, replace(to_run, kv_blocks=measured), SETTINGS)
    return warmup, wanted


def _recorded_kv_blocks(sdd: SpecDecodeDeployment) -> int | None:
    """The KV block count of the warmup the status records (the one serving pins)."""
    return sdd.status.warmup.kv_blocks if sdd.status and sdd.status.warmup else None


def _planned(sdd: SpecDecodeDeployment) -> PlanningResult:
    key = (sdd.metadata.uid or "", sdd.metadata.generation or 0)
    if key not in _plans:
        with metrics.PLAN_SECONDS.time():
            _plans[key] = evaluate(sdd)
        while len(_plans) > _PLAN_CACHE_SIZE:
            _plans.popitem(last=False)
    return _plans[key]


def _may_warm(result: PlanningResult) -> bool:
    """Warm a proven plan, or one whose holes the spec explicitly allows."""
    allowed = result.coverage.reason == Reason.UNCOVERED_SHAPES_ALLOWED
    return (
        result.plan is not None
        and not result.stalled
        and (result.coverage.status == "True" or allowed)
    )


def _write_status(
    patch: kopf.Patch, old: SpecDecodeDeploymentStatus | None, new: SpecDecodeDeploymentStatus
) -> None:
    """Write the status only when it changed, so an unchanged object causes no API write."""
    patch.status.update(status_patch(old, new))


def _announce(
    body: kopf.Body,
    old: SpecDecodeDeploymentStatus | None,
    result: PlanningResult,
    logger: kopf.Logger,
) -> None:
    """An Event and a log line when the plan or the coverage verdict changed."""
    previous = _verdict_of(old, COVERAGE_PROVEN)
    plan_hash = old.plan.hash if old and old.plan else None
    new_hash = result.summary.hash if result.summary else None
    if previous == (result.coverage.status, result.coverage.reason) and plan_hash == new_hash:
        return
    if result.planned.status != "True":
        kopf.warn(body, reason=result.planned.reason, message=result.planned.message)
        logger.warning(f"Refused to plan SpecDecodeDeployment: {result.planned.message}")
        return
    kind = "Normal" if result.coverage.status == "True" else "Warning"
    kopf.event(body, type=kind, reason=result.coverage.reason, message=result.coverage.message)
    logger.info(f"Planned SpecDecodeDeployment {new_hash}: {result.coverage.message}")


def _verdict_of(old: SpecDecodeDeploymentStatus | None, type_: str) -> tuple[str, str] | None:
    for condition in (old.conditions or []) if old else []:
        if condition.type == type_:
            return (condition.status, condition.reason)
    return None


__all__ = ["configure", "reconcile", "resync"]
