"""Kopf registration: settings, the level-based reconcile of SpecDecodeDeployments, metrics."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import OrderedDict
from dataclasses import replace
from typing import Any

import kopf
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from warmgate.api import GROUP, PLURAL, VERSION, ManifestError, SpecDecodeDeployment, parse_manifest
from warmgate.api.conditions import now
from warmgate.api.constants import (
    COVERAGE_PROVEN,
    LABEL_PLAN_HASH,
    PREFIX,
    READINESS_GATE,
    Reason,
)
from warmgate.api.status import SpecDecodeDeploymentStatus, WarmupSummary
from warmgate.buckets import BucketPlan
from warmgate.handlers import children, metrics
from warmgate.handlers.planning import PlanningResult, Verdict, evaluate, planned_status
from warmgate.handlers.serving_stage import ServingState, evaluate_serving, served_plan
from warmgate.handlers.warmup_stage import WarmupState, evaluate_warmup
from warmgate.resources.engine import cache_key
from warmgate.resources.names import plan_label
from warmgate.resources.serving import (
    build_service,
    build_serving_deployment,
    serving_name,
    serving_selector,
)
from warmgate.resources.warmup import (
    build_cache_pvc,
    build_plan_configmap,
    build_warmup_job,
    job_name,
)

METRICS_PORT_ENV = "WARMGATE_METRICS_PORT"
OPERATOR_IMAGE_ENV = "WARMGATE_OPERATOR_IMAGE"  # the image whose runner files the Job copies
RESYNC_ENV = "WARMGATE_RESYNC_SECONDS"
DEFAULT_OPERATOR_IMAGE = "ghcr.io/warmgate/warmgate:0.1.0"
ANNOTATION_APPLIED = f"{PREFIX}applied-hash"  # what the operator last wrote into the Deployment
RESYNC_SECONDS = float(os.environ.get(RESYNC_ENV, "15") or 15)
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
    settings.posting.level = logging.INFO
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
    _sync(body, patch, logger)


@kopf.timer(GROUP, VERSION, PLURAL, interval=RESYNC_SECONDS, initial_delay=RESYNC_SECONDS)
def resync(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    """The same path on a timer: follows the warmup Job without watching Jobs."""
    _sync(body, patch, logger)


def _sync(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger) -> None:
    try:
        sdd = parse_manifest(dict(body))
    except ManifestError as exc:
        # The server validated the spec, so this is version skew between CRD and operator.
        # Retrying cannot help; report it and wait for the next change of the object.
        kopf.warn(body, reason="InvalidSpec", message=str(exc)[:1024])
        raise kopf.PermanentError(f"Refused an object the operator cannot read: {exc}") from exc
    result = _planned(sdd)
    plan = result.plan if _may_warm(result) else None
    warmup = _guarded_warmup(body, sdd, plan, logger) if plan else None
    verified = plan if plan and warmup and warmup.verdict.status == "True" else None
    kv_blocks = warmup.summary_of_run.kv_blocks if warmup and warmup.summary_of_run else None
    serving = _guarded_serving(
        body, sdd, verified, kv_blocks=kv_blocks, result=result, logger=logger
    )
    status = planned_status(sdd, result, warmup=warmup, serving=serving)
    _write_status(patch, sdd.status, status)
    _announce(body, sdd.status, result, logger)
    metrics.record(sdd.metadata.namespace or "", sdd.metadata.name or "", result)


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


def _guarded_warmup(
    body: kopf.Body, sdd: SpecDecodeDeployment, plan: BucketPlan, logger: kopf.Logger
) -> WarmupState:
    """The warmup stage; an API or build failure is reported, and the next resync retries."""
    try:
        return _warmup(body, sdd, plan)
    except (ApiException, ValueError, ValidationError) as exc:
        message = f"Could not create or read the warmup Job, retrying: {_short(exc)}"
        logger.error(message)
        verdict = Verdict("Unknown", Reason.WARMUP_PENDING, message)
        return WarmupState(verdict, WarmupSummary(cache_key=cache_key(sdd, plan)))


def _guarded_serving(
    body: kopf.Body,
    sdd: SpecDecodeDeployment,
    verified: BucketPlan | None,
    *,
    kv_blocks: int | None,
    result: PlanningResult,
    logger: kopf.Logger,
) -> ServingState | None:
    """The serving stage; None (Ready follows the warmup) when it could not read its children."""
    digest = result.summary.hash if result.summary else ""
    try:
        return _serving(body, sdd, verified, kv_blocks, digest or "")
    except (ApiException, ValueError, ValidationError) as exc:
        logger.error(f"Could not reconcile the serving Deployment, retrying: {_short(exc)}")
        return None


def _serving(
    body: kopf.Body,
    sdd: SpecDecodeDeployment,
    verified: BucketPlan | None,
    kv_blocks: int | None,
    digest: str,
) -> ServingState:
    """Point the Deployment at a verified plan only; while a new plan warms, keep the old one."""
    namespace, name = sdd.metadata.namespace or "default", serving_name(sdd)
    deployment = children.read_deployment(namespace, name)
    if verified is not None:
        desired = build_serving_deployment(
            sdd, verified, operator_image=_operator_image(), kv_blocks=kv_blocks
        )
        desired["metadata"]["annotations"][ANNOTATION_APPLIED] = _hash(desired)
        if _annotation(deployment, ANNOTATION_APPLIED) != _hash(desired):
            children.apply_deployment(desired, deployment)
            kopf.info(
                body,
                reason="Rolled",
                message=f"Pointed Deployment {name} at verified plan {verified.digest[:12]}",
            )
            deployment = children.read_deployment(namespace, name)
        if children.create_service(build_service(sdd)):
            kopf.info(body, reason="Created", message=f"Created Service {name}")
    elif deployment is not None and deployment["spec"].get("replicas") != sdd.spec.serving.replicas:
        children.scale_deployment(namespace, name, sdd.spec.serving.replicas)
        deployment = children.read_deployment(namespace, name)
    if deployment is not None:
        _gate_pods(namespace, sdd, deployment)
    return evaluate_serving(deployment, digest, names=(name, name), selector=serving_selector(sdd))


def _gate_pods(namespace: str, sdd: SpecDecodeDeployment, deployment: dict[str, Any]) -> None:
    """Open the `warmgate.dev/warmed` readiness gate of Pods that run the served, verified plan."""
    served = served_plan(deployment)
    if served is None:
        return
    for pod in children.pods(namespace, serving_selector(sdd)):
        labels = pod["metadata"].get("labels") or {}
        conditions = (pod.get("status") or {}).get("conditions") or []
        gated = any(
            c.get("type") == READINESS_GATE and c.get("status") == "True" for c in conditions
        )
        if labels.get(LABEL_PLAN_HASH) == plan_label(served) and not gated:
            children.set_pod_condition(namespace, pod["metadata"]["name"], {
                "type": READINESS_GATE, "status": "True", "reason": "WarmupVerified",
                "message": f"Plan {served[:12]} was warmed and verified",
                "lastTransitionTime": now().strftime("%Y-%m-%dT%H:%M:%SZ"),
            })  # fmt: skip


def _operator_image() -> str:
    return os.environ.get(OPERATOR_IMAGE_ENV, DEFAULT_OPERATOR_IMAGE)


def _hash(manifest: dict[str, Any]) -> str:
    """Digest of what the operator wants the Deployment to be (spec plus its own labels)."""
    wanted = {"spec": manifest["spec"], "labels": manifest["metadata"].get("labels")}
    return hashlib.sha256(json.dumps(wanted, sort_keys=True).encode()).hexdigest()[:32]


def _annotation(obj: dict[str, Any] | None, key: str) -> str | None:
    return None if obj is None else (obj["metadata"].get("annotations") or {}).get(key)


def _short(exc: Exception) -> str:
    return " ".join(str(exc).split())[:512]


def _warmup(body: kopf.Body, sdd: SpecDecodeDeployment, plan: BucketPlan) -> WarmupState:
    """Create the warmup children of this plan when missing, then read the Job's verdict."""
    namespace, key = sdd.metadata.namespace or "default", cache_key(sdd, plan)
    name = job_name(sdd, key)
    job = children.read_job(namespace, name)
    if job is None:
        image = _operator_image()
        wanted = (
            build_cache_pvc(sdd),
            build_plan_configmap(sdd, plan),
            build_warmup_job(sdd, plan, operator_image=image),
        )
        for manifest in filter(None, wanted):
            if children.create_if_absent(manifest):
                kind, child = manifest["kind"], manifest["metadata"]["name"]
                kopf.info(body, reason="Created", message=f"Created {kind} {child}")
        job = children.read_job(namespace, name)
    state = evaluate_warmup(job, children.job_pods(namespace, name), key)
    if state.verdict.status == "True":  # the runner checked every planned bucket against the log
        warmed = len(plan.prompt_buckets) + len(plan.decode_buckets)
        state = replace(state, summary=state.summary.model_copy(update={"warmed_buckets": warmed}))
    return state


def _write_status(
    patch: kopf.Patch, old: SpecDecodeDeploymentStatus | None, new: SpecDecodeDeploymentStatus
) -> None:
    """Write the status only when it changed, so an unchanged object causes no API write."""
    dumped = new.model_dump(mode="json", by_alias=True, exclude_none=True)
    before = (old or SpecDecodeDeploymentStatus()).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    if dumped != before:
        patch.status.update(dumped)
        for gone in before.keys() - dumped.keys():
            patch.status[gone] = None  # a merge patch deletes a key only when it is null


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
    post = kopf.info if result.coverage.status == "True" else kopf.warn
    post(body, reason=result.coverage.reason, message=result.coverage.message)
    logger.info(f"Planned SpecDecodeDeployment {new_hash}: {result.coverage.message}")


def _verdict_of(old: SpecDecodeDeploymentStatus | None, type_: str) -> tuple[str, str] | None:
    for condition in (old.conditions or []) if old else []:
        if condition.type == type_:
            return (condition.status, condition.reason)
    return None


__all__ = ["Verdict", "configure", "reconcile", "resync"]
