"""The serve step of a sync: the Deployment and Service of the verified plan, and the gate.

Only a verified plan is written into the Deployment. It is replaced when a newly verified plan
arrives (its `applied-hash` changed) and when a hand edit changed a field the operator sets
(drift, `drift.first_difference`); while a new plan warms, only its replica count follows the
spec. The Service is read, created when missing and patched when its type, ports, selector or
labels drifted. The readiness gate opens only for Pods the operator's Deployment owns through
a ReplicaSet whose template runs the served plan and cache key.
"""

from __future__ import annotations

from warmgate.api import Manifest
from warmgate.api.conditions import get_condition, now
from warmgate.api.constants import (
    ANNOTATION_APPLIED_HASH,
    ANNOTATION_CACHE_KEY,
    ANNOTATION_PLAN_HASH,
    LABEL_PLAN_HASH,
    READINESS_GATE,
    READY,
    Reason,
)
from warmgate.api.status import ServingSummary
from warmgate.reconcile.cluster import ClusterError
from warmgate.reconcile.hand_edits import first_difference
from warmgate.reconcile.planning import PlanningResult
from warmgate.reconcile.serving_state import Serving, ServingState, evaluate_serving
from warmgate.reconcile.stage import Stage, controlled_by
from warmgate.reconcile.verdict import Verdict
from warmgate.resources import Children, serving_name, serving_selector
from warmgate.resources.names import plan_label
from warmgate.resources.serving_children import build_service


def serve(stage: Stage, verified: Children | None, result: PlanningResult) -> ServingState | None:
    """The serving state; None when the cluster could not be read (the status keeps its own)."""
    namespace, name = stage.namespace, serving_name(stage.sdd)
    try:
        deployment = stage.cluster.read("Deployment", namespace, name)
        if deployment is not None and not controlled_by(deployment, stage.uid):
            return _not_owned(stage, name)
        if verified is not None:
            deployment = _roll(stage, verified.serving_deployment, deployment)
        elif deployment is not None and deployment["spec"].get("replicas") != _replicas(stage):
            stage.cluster.scale(namespace, name, _replicas(stage))
            deployment = stage.cluster.read("Deployment", namespace, name)
        if deployment is not None:
            _service(stage, verified.service if verified else build_service(stage.sdd))
            _gate_pods(stage, deployment)
    except ClusterError as exc:
        stage.failed("Could not reconcile the serving Deployment", exc)
        return None
    old = stage.old
    ready = get_condition(old.conditions, READY)
    asked = Serving(
        plan_digest=result.summary.hash if result.summary and result.summary.hash else "",
        replicas=_replicas(stage),
        names=(name, name),
        selector=serving_selector(stage.sdd),
        served_before=old.serving.plan_hash if old.serving else None,
        was_ready=ready is not None and ready.status == "True",
    )
    return evaluate_serving(deployment, asked)


def _replicas(stage: Stage) -> int:
    return stage.sdd.spec.serving.replicas


def _not_owned(stage: Stage, name: str) -> ServingState:
    """A Deployment of that name that this object does not control is left alone."""
    message = (
        f"Deployment {name} exists and is not controlled by this SpecDecodeDeployment; "
        "delete or rename it"
    )
    verdict = Verdict("False", Reason.NOT_OWNED, message)
    return ServingState(verdict, ServingSummary(selector=serving_selector(stage.sdd)), stalled=True)


def _roll(stage: Stage, desired: Manifest, deployment: Manifest | None) -> Manifest | None:
    """Apply the verified plan's Deployment when it is new, or repair what drifted."""
    meta = desired["metadata"]
    if deployment is None:
        created = stage.create((desired,))
        if created:
            _rolled(stage, meta)
            return created[0]
        return stage.cluster.read("Deployment", meta["namespace"], meta["name"])  # someone's
    applied = (deployment["metadata"].get("annotations") or {}).get(ANNOTATION_APPLIED_HASH)
    new_plan = applied != meta["annotations"][ANNOTATION_APPLIED_HASH]
    drifted = None if new_plan else _drift(desired, deployment)
    if not new_plan and drifted is None:
        return deployment
    version = deployment["metadata"]["resourceVersion"]
    if stage.cluster.replace({**desired, "metadata": {**meta, "resourceVersion": version}}):
        if new_plan:
            _rolled(stage, meta)
        else:
            message = f"Repaired Deployment {meta['name']}: {drifted} differed from the spec"
            stage.events.post("Warning", "DriftRepaired", message)
    # A lost race (the resync timer and a change handler) is no error: the next sync re-reads.
    return stage.cluster.read("Deployment", meta["namespace"], meta["name"])


def _rolled(stage: Stage, meta: Manifest) -> None:
    plan = meta["annotations"][ANNOTATION_PLAN_HASH][:12]
    stage.events.post(
        "Normal", "Rolled", f"Pointed Deployment {meta['name']} at verified plan {plan}"
    )


def _drift(desired: Manifest, live: Manifest) -> str | None:
    """The first field of the Deployment's spec or labels that a hand edit changed."""
    labels = desired["metadata"]["labels"]
    found = first_difference(labels, live["metadata"].get("labels") or {}, "metadata.labels")
    return found or first_difference(desired["spec"], live.get("spec") or {}, "spec")


def _service(stage: Stage, desired: Manifest) -> None:
    """Create the Service, or patch it back when its type, ports, selector or labels drifted."""
    meta = desired["metadata"]
    live = stage.cluster.read("Service", meta["namespace"], meta["name"])
    if live is None:
        stage.create((desired,))
        return
    spec, labels = desired["spec"], meta["labels"]
    drifted = first_difference(spec, live.get("spec") or {}, "spec") or first_difference(
        labels, live["metadata"].get("labels") or {}, "metadata.labels"
    )
    if drifted is None:
        return
    selector = {**dict.fromkeys((live.get("spec") or {}).get("selector") or {}), **spec["selector"]}
    body = {"metadata": {"labels": labels}, "spec": {**spec, "selector": selector}}
    if stage.cluster.patch("Service", meta["namespace"], meta["name"], body):
        message = f"Repaired Service {meta['name']}: {drifted} differed from the spec"
        stage.events.post("Warning", "DriftRepaired", message)


def _trusted_replicasets(stage: Stage, deployment: Manifest) -> set[str]:
    """UIDs of the ReplicaSets the Deployment controls whose template runs its plan and key."""
    annotations = deployment["metadata"].get("annotations") or {}
    wanted = (annotations.get(ANNOTATION_PLAN_HASH), annotations.get(ANNOTATION_CACHE_KEY))
    selector = serving_selector(stage.sdd)
    trusted = set()
    for rs in stage.cluster.list_objects("ReplicaSet", stage.namespace, selector):
        template = ((rs.get("spec") or {}).get("template") or {}).get("metadata") or {}
        got = template.get("annotations") or {}
        pair = (got.get(ANNOTATION_PLAN_HASH), got.get(ANNOTATION_CACHE_KEY))
        if controlled_by(rs, deployment["metadata"]["uid"]) and pair == wanted:
            trusted.add(str(rs["metadata"]["uid"]))
    return trusted


def _gate_pods(stage: Stage, deployment: Manifest) -> None:
    """Open the `warmgate.dev/warmed` readiness gate of Pods that run the served, verified plan
    and that the Deployment owns (through a trusted ReplicaSet)."""
    annotations = deployment["metadata"].get("annotations") or {}
    served = annotations.get(ANNOTATION_PLAN_HASH)
    if served is None:
        return
    pods = stage.cluster.list_pods(stage.namespace, serving_selector(stage.sdd))
    wanted = (served, annotations.get(ANNOTATION_CACHE_KEY))
    trusted: set[str] | None = None
    for pod in pods:
        if _gated(pod) or _plan_of(pod) != wanted:
            continue
        if (pod["metadata"].get("labels") or {}).get(LABEL_PLAN_HASH) != plan_label(served):
            continue
        if trusted is None:
            trusted = _trusted_replicasets(stage, deployment)
        if not any(controlled_by(pod, uid) for uid in trusted):
            continue
        condition = {
            "type": READINESS_GATE,
            "status": "True",
            "reason": "WarmupVerified",
            "message": f"Plan {served[:12]} was warmed and verified",
            "lastTransitionTime": now().strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        stage.cluster.set_pod_condition(stage.namespace, pod["metadata"]["name"], condition)


def _plan_of(pod: Manifest) -> tuple[str | None, str | None]:
    annotations = pod["metadata"].get("annotations") or {}
    return annotations.get(ANNOTATION_PLAN_HASH), annotations.get(ANNOTATION_CACHE_KEY)


def _gated(pod: Manifest) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == READINESS_GATE and c.get("status") == "True" for c in conditions)
