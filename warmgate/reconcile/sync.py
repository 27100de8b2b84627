"""One sync of a SpecDecodeDeployment: plan, warm, serve, and the status that reports them.

The kopf handlers call `sync` for every event and on the resync timer; it reads the children
through the cluster adapter, creates what the plan needs, and returns the status to write.
The decisions are the pure state machines (`warmup_state`, `serving_state`); this module
orders them and does the adapter calls around them, posting an Event for every child it
creates or rolls.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from warmgate.api import Manifest, SpecDecodeDeployment, SpecDecodeDeploymentStatus
from warmgate.api.conditions import get_condition, now
from warmgate.api.constants import (
    ANNOTATION_APPLIED_HASH,
    ANNOTATION_PLAN_HASH,
    COVERAGE_PROVEN,
    LABEL_PLAN_HASH,
    READINESS_GATE,
    WARMED,
    Reason,
)
from warmgate.api.status import WarmupSummary
from warmgate.reconcile.cluster import (
    JOB_NAME_LABEL,
    Cluster,
    ClusterError,
    Events,
    EventType,
    Logger,
)
from warmgate.reconcile.drift import DriftState
from warmgate.reconcile.observation import announce_drift, serving_drift, with_progress
from warmgate.reconcile.plan_cache import PlanCache
from warmgate.reconcile.plan_evaluation import total_buckets
from warmgate.reconcile.planning import PlanningResult
from warmgate.reconcile.progress import NoEndpoints, RunnerEndpoints
from warmgate.reconcile.serving_state import ServingState, evaluate_serving, served_plan
from warmgate.reconcile.status_builder import build_status, status_patch
from warmgate.reconcile.verdict import Verdict, one_line
from warmgate.reconcile.warmup_state import WarmupState, evaluate_warmup, remembered
from warmgate.resources import Children, PlanToRun, cache_key, desired_children
from warmgate.resources.names import plan_label
from warmgate.resources.serving_children import serving_name, serving_selector
from warmgate.settings import Settings


@dataclass(frozen=True)
class Runtime:
    """What every sync shares: the settings, the cluster adapter and the planning results,
    and the reader of the runners' status endpoints (progress, serving drift)."""

    settings: Settings
    cluster: Cluster
    plans: PlanCache
    endpoints: RunnerEndpoints = field(default_factory=NoEndpoints)


@dataclass(frozen=True)
class Outcome:
    """What one sync found: the planning result, the new status and the patch that writes it."""

    result: PlanningResult
    status: SpecDecodeDeploymentStatus
    status_patch: dict[str, Any]


def sync(sdd: SpecDecodeDeployment, runtime: Runtime, events: Events, log: Logger) -> Outcome:
    """Plan (once per generation), warm the plan, serve verified plans, report it all."""
    result = runtime.plans.get(sdd)
    warmup, verified = _warm(sdd, result, runtime, events, log)
    serving = _serve(sdd, verified, result, cluster=runtime.cluster, events=events, log=log)
    drift = _drift(sdd, result, serving, runtime, log)
    status = build_status(sdd, result, warmup=warmup, serving=serving, drift=drift)
    _announce(sdd.status, result, events, log)
    announce_drift(drift, events)
    return Outcome(result, status, status_patch(sdd.status, status))


def _warm(
    sdd: SpecDecodeDeployment,
    result: PlanningResult,
    runtime: Runtime,
    events: Events,
    log: Logger,
) -> tuple[WarmupState | None, Children | None]:
    """The warmup state of the plan, and its children once the runner verified it."""
    to_run = result.to_run(kv_blocks=_recorded_kv_blocks(sdd.status))
    if to_run is None:
        return None, None
    try:
        children = desired_children(sdd, to_run, runtime.settings)
        warmup = _warmup(sdd, children, to_run, runtime, events)
    except (ClusterError, ValueError) as exc:
        return _retry_warmup(exc, cache_key(sdd, to_run.buckets), log), None
    if not warmup.verdict.holds:
        return warmup, None
    measured = warmup.summary_of_run.kv_blocks if warmup.summary_of_run else None
    if measured != to_run.kv_blocks:  # verified just now: serving pins what the runner measured
        children = desired_children(sdd, replace(to_run, kv_blocks=measured), runtime.settings)
    return warmup, children


def _recorded_kv_blocks(status: SpecDecodeDeploymentStatus | None) -> int | None:
    """The KV block count of the warmup the status records (the count serving pins)."""
    return status.warmup.kv_blocks if status and status.warmup else None


def _retry_warmup(exc: Exception, key: str, log: Logger) -> WarmupState:
    """An API or build failure: reported in Warmed, and the next resync tries again."""
    message = f"Could not create or read the warmup Job, retrying: {one_line(exc, 512)}"
    log.error(message)
    verdict = Verdict("Unknown", Reason.WARMUP_PENDING, message)
    return WarmupState(verdict, WarmupSummary(cache_key=key))


def _warmup(
    sdd: SpecDecodeDeployment,
    children: Children,
    to_run: PlanToRun,
    runtime: Runtime,
    events: Events,
) -> WarmupState:
    """Create the warmup children of this plan when missing, then read the Job's verdict."""
    key, old, cluster = children.cache_key, sdd.status, runtime.cluster
    known = remembered(
        get_condition(old.conditions if old else None, WARMED), old.warmup if old else None, key
    )
    if known is not None:
        return known
    namespace, name = _namespace(sdd), children.warmup_job["metadata"]["name"]
    job = cluster.read("Job", namespace, name)
    if job is None:
        _create(cluster, events, children.warmup)
        job = cluster.read("Job", namespace, name)
    pods = cluster.list_pods(namespace, f"{JOB_NAME_LABEL}={name}")
    state = evaluate_warmup(job, pods, key)
    state = with_progress(
        sdd,
        state,
        pods,
        planned=total_buckets(to_run.buckets),
        estimate_s=to_run.estimated_warmup_s,
        endpoints=runtime.endpoints,
    )
    if state.verdict.holds:  # the runner checked every planned bucket against the engine's log
        warmed = total_buckets(to_run.buckets)
        state = replace(state, summary=state.summary.model_copy(update={"warmed_buckets": warmed}))
    return state


def _serve(
    sdd: SpecDecodeDeployment,
    verified: Children | None,
    result: PlanningResult,
    *,
    cluster: Cluster,
    events: Events,
    log: Logger,
) -> ServingState | None:
    """Point the Deployment at a verified plan only; while a new plan warms, keep the old one.

    None (Ready then follows the warmup) when the children could not be read: the next resync
    tries again.
    """
    namespace, name = _namespace(sdd), serving_name(sdd)
    try:
        deployment = cluster.read("Deployment", namespace, name)
        if verified is not None:
            deployment = _roll(cluster, events, verified, deployment)
        elif deployment is not None and deployment["spec"].get("replicas") != _replicas(sdd):
            cluster.scale(namespace, name, _replicas(sdd))
            deployment = cluster.read("Deployment", namespace, name)
        if deployment is not None:
            _gate_pods(cluster, namespace, serving_selector(sdd), deployment)
    except ClusterError as exc:
        log.error(f"Could not reconcile the serving Deployment, retrying: {one_line(exc, 512)}")
        return None
    digest = result.summary.hash if result.summary else None
    return evaluate_serving(
        deployment, digest or "", names=(name, name), selector=serving_selector(sdd)
    )


def _drift(
    sdd: SpecDecodeDeployment,
    result: PlanningResult,
    serving: ServingState | None,
    runtime: Runtime,
    log: Logger,
) -> DriftState:
    """What the serving Pods' runners counted; the record stays when they cannot be listed."""
    try:
        return serving_drift(
            sdd,
            result,
            serving,
            cluster=runtime.cluster,
            endpoints=runtime.endpoints,
            selector=serving_selector(sdd),
        )
    except ClusterError as exc:
        log.error(f"Could not list the serving Pods, retrying: {one_line(exc, 512)}")
        return DriftState(sdd.status.drift if sdd.status else None)


def _roll(
    cluster: Cluster, events: Events, verified: Children, deployment: Manifest | None
) -> Manifest | None:
    """Apply the verified plan's Deployment when it differs from what was last applied."""
    desired = verified.serving_deployment
    meta = desired["metadata"]
    wanted = meta["annotations"][ANNOTATION_APPLIED_HASH]
    if _annotation(deployment, ANNOTATION_APPLIED_HASH) != wanted:
        if _apply(cluster, desired, deployment):
            plan = meta["annotations"][ANNOTATION_PLAN_HASH][:12]
            message = f"Pointed Deployment {meta['name']} at verified plan {plan}"
            events.post("Normal", "Rolled", message)
        deployment = cluster.read("Deployment", meta["namespace"], meta["name"])
    _create(cluster, events, (verified.service,))
    return deployment


def _apply(cluster: Cluster, desired: Manifest, existing: Manifest | None) -> bool:
    """Create the Deployment, or replace it at the version read (optimistic locking).

    A lost race (the resync timer and a change handler) is no error: the other one wrote
    first, and the next sync re-reads and converges. Returns whether this call wrote.
    """
    if existing is None:
        return cluster.create(desired)
    version = existing["metadata"]["resourceVersion"]
    meta = {**desired["metadata"], "resourceVersion": version}
    return cluster.replace({**desired, "metadata": meta})


def _create(cluster: Cluster, events: Events, manifests: tuple[Manifest, ...]) -> None:
    """Create the children that do not exist yet, with a `Created` Event for each."""
    for manifest in manifests:
        if cluster.create(manifest):
            kind, name = manifest["kind"], manifest["metadata"]["name"]
            events.post("Normal", "Created", f"Created {kind} {name}")


def _gate_pods(cluster: Cluster, namespace: str, selector: str, deployment: Manifest) -> None:
    """Open the `warmgate.dev/warmed` readiness gate of Pods that run the served, verified plan."""
    served = served_plan(deployment)
    if served is None:
        return
    for pod in cluster.list_pods(namespace, selector):
        labels = pod["metadata"].get("labels") or {}
        conditions = (pod.get("status") or {}).get("conditions") or []
        gated = any(
            c.get("type") == READINESS_GATE and c.get("status") == "True" for c in conditions
        )
        if labels.get(LABEL_PLAN_HASH) == plan_label(served) and not gated:
            condition = {
                "type": READINESS_GATE,
                "status": "True",
                "reason": "WarmupVerified",
                "message": f"Plan {served[:12]} was warmed and verified",
                "lastTransitionTime": now().strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            cluster.set_pod_condition(namespace, pod["metadata"]["name"], condition)


def _announce(
    old: SpecDecodeDeploymentStatus | None, result: PlanningResult, events: Events, log: Logger
) -> None:
    """An Event and a log line when the plan or the coverage verdict changed."""
    before = get_condition(old.conditions if old else None, COVERAGE_PROVEN)
    previous = (before.status, before.reason) if before else None
    plan_hash = old.plan.hash if old and old.plan else None
    new_hash = result.summary.hash if result.summary else None
    if previous == (result.coverage.status, result.coverage.reason) and plan_hash == new_hash:
        return
    if not result.planned.holds:
        events.post("Warning", result.planned.reason, result.planned.message)
        log.warning(f"Refused to plan SpecDecodeDeployment: {result.planned.message}")
        return
    kind: EventType = "Normal" if result.coverage.holds else "Warning"
    events.post(kind, result.coverage.reason, result.coverage.message)
    log.info(f"Planned SpecDecodeDeployment {new_hash}: {result.coverage.message}")


def _namespace(sdd: SpecDecodeDeployment) -> str:
    return sdd.metadata.namespace or "default"


def _replicas(sdd: SpecDecodeDeployment) -> int:
    return sdd.spec.serving.replicas


def _annotation(obj: Manifest | None, key: str) -> str | None:
    return None if obj is None else (obj["metadata"].get("annotations") or {}).get(key)
