"""The warmup and serving stages against the cluster: create the children, read their state.

The decisions are pure (`warmgate.reconcile.warmup_state`, `serving_state`); this module does
the I/O around them with the official client (`children`) and posts an Event for every child it
creates or rolls.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import kopf
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from warmgate.api import SpecDecodeDeployment
from warmgate.api.conditions import get_condition, now
from warmgate.api.constants import (
    ANNOTATION_APPLIED_HASH,
    ANNOTATION_PLAN_HASH,
    LABEL_PLAN_HASH,
    READINESS_GATE,
    WARMED,
    Reason,
)
from warmgate.api.status import WarmupSummary
from warmgate.handlers import kube_cluster as children
from warmgate.reconcile.planning import PlanningResult
from warmgate.reconcile.serving_state import ServingState, evaluate_serving, served_plan
from warmgate.reconcile.verdict import Verdict, one_line
from warmgate.reconcile.warmup_state import WarmupState, evaluate_warmup, remembered
from warmgate.resources import Children, PlanToRun, cache_key, desired_children
from warmgate.resources.names import plan_label
from warmgate.resources.serving_children import serving_name, serving_selector
from warmgate.settings import Settings


def plan_children(
    sdd: SpecDecodeDeployment, to_run: PlanToRun, settings: Settings
) -> Children | WarmupState:
    """The children of the plan, or the warmup state that reports why they cannot be built."""
    try:
        return desired_children(sdd, to_run, settings)
    except (ValueError, ValidationError) as exc:
        message = f"Could not create or read the warmup Job, retrying: {one_line(exc, 512)}"
        verdict = Verdict("Unknown", Reason.WARMUP_PENDING, message)
        return WarmupState(verdict, WarmupSummary(cache_key=cache_key(sdd, to_run.buckets)))


def guarded_warmup(
    body: kopf.Body, sdd: SpecDecodeDeployment, wanted: Children, logger: kopf.Logger
) -> WarmupState:
    """The warmup stage; an API failure is reported, and the next resync retries."""
    try:
        return _warmup(body, sdd, wanted)
    except ApiException as exc:
        message = f"Could not create or read the warmup Job, retrying: {one_line(exc, 512)}"
        logger.error(message)
        verdict = Verdict("Unknown", Reason.WARMUP_PENDING, message)
        return WarmupState(verdict, WarmupSummary(cache_key=wanted.cache_key))


def _warmup(body: kopf.Body, sdd: SpecDecodeDeployment, wanted: Children) -> WarmupState:
    """Create the warmup children of this plan when missing, then read the Job's verdict."""
    namespace, key = sdd.metadata.namespace or "default", wanted.cache_key
    old = sdd.status
    known = remembered(
        get_condition(old.conditions if old else None, WARMED), old.warmup if old else None, key
    )
    if known is not None:
        return known
    name = wanted.warmup_job["metadata"]["name"]
    job = children.read_job(namespace, name)
    if job is None:
        for manifest in wanted.warmup:
            if children.create_if_absent(manifest):
                kind, child = manifest["kind"], manifest["metadata"]["name"]
                kopf.event(body, type="Normal", reason="Created", message=f"Created {kind} {child}")
        job = children.read_job(namespace, name)
    state = evaluate_warmup(job, children.job_pods(namespace, name), key)
    if state.verdict.status == "True":  # the runner checked every planned bucket against the log
        plan = wanted.runner_plan["buckets"]["expected"]
        warmed = plan["prompt"]["count"] + plan["decode"]["count"]
        state = replace(state, summary=state.summary.model_copy(update={"warmed_buckets": warmed}))
    return state


def guarded_serving(
    body: kopf.Body,
    sdd: SpecDecodeDeployment,
    verified: Children | None,
    *,
    result: PlanningResult,
    logger: kopf.Logger,
) -> ServingState | None:
    """The serving stage; None (Ready follows the warmup) when it could not read its children."""
    digest = result.summary.hash if result.summary else ""
    try:
        return _serving(body, sdd, verified, digest or "")
    except ApiException as exc:
        logger.error(f"Could not reconcile the serving Deployment, retrying: {one_line(exc, 512)}")
        return None


def _serving(
    body: kopf.Body, sdd: SpecDecodeDeployment, verified: Children | None, digest: str
) -> ServingState:
    """Point the Deployment at a verified plan only; while a new plan warms, keep the old one."""
    namespace, name = sdd.metadata.namespace or "default", serving_name(sdd)
    deployment = children.read_deployment(namespace, name)
    if verified is not None:
        desired = verified.serving_deployment
        wanted = desired["metadata"]["annotations"][ANNOTATION_APPLIED_HASH]
        if _annotation(deployment, ANNOTATION_APPLIED_HASH) != wanted:
            if children.apply_deployment(desired, deployment):
                plan = desired["metadata"]["annotations"][ANNOTATION_PLAN_HASH]
                message = f"Pointed Deployment {name} at verified plan {plan[:12]}"
                kopf.event(body, type="Normal", reason="Rolled", message=message)
            deployment = children.read_deployment(namespace, name)
        if children.create_if_absent(verified.service):
            kopf.event(body, type="Normal", reason="Created", message=f"Created Service {name}")
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


def _annotation(obj: dict[str, Any] | None, key: str) -> str | None:
    return None if obj is None else (obj["metadata"].get("annotations") or {}).get(key)
