"""The serving part of a decision: the Deployment and Service of the verified plan, the gate.

Only a verified plan is written into the Deployment. It is replaced when a newly verified plan
arrives (its `applied-hash` changed) and when a hand edit changed a field the operator sets
(`hand_edits.first_difference`); while a new plan warms, only its replica count follows the
spec. The Service is created when missing and patched when its type, ports, selector or labels
drifted. The readiness gate opens only for Pods the operator's Deployment owns through a
ReplicaSet whose template runs the served plan and cache key. A Deployment or Service of the
wanted name that this object does not control is left alone and reported (NotOwned).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from warmgate.api import Manifest, SpecDecodeDeployment, SpecDecodeDeploymentStatus
from warmgate.api.conditions import get_condition
from warmgate.api.constants import (
    ANNOTATION_APPLIED_HASH,
    ANNOTATION_CACHE_KEY,
    ANNOTATION_PLAN_HASH,
    LABEL_PLAN_HASH,
    READINESS_GATE,
    READY,
)
from warmgate.api.status import ServingSummary, WarmupSummary
from warmgate.reconcile.planning.evaluate import PlanningResult
from warmgate.reconcile.planning.verdict import not_owned
from warmgate.reconcile.sync.actions import (
    Action,
    Create,
    Delete,
    Event,
    OpenGate,
    Patch,
    Replace,
    Scale,
)
from warmgate.reconcile.sync.hand_edits import first_difference
from warmgate.reconcile.sync.observed import Observed, controlled_by, name_of, uid_of
from warmgate.reconcile.sync.pod_template import template_mismatch
from warmgate.reconcile.sync.served import RecordSeen, ServedRecord
from warmgate.reconcile.sync.serving_state import Serving, ServingState, evaluate_serving
from warmgate.reconcile.sync.subject import Identity, Subject
from warmgate.resources import Children
from warmgate.resources.names import plan_label
from warmgate.resources.served_record import build_served_record, record_digest
from warmgate.resources.serving_children import build_service


@dataclass(frozen=True)
class ServingDecision:
    """The serving state (None: the cluster could not be read, the status keeps its own)."""

    state: ServingState | None
    actions: tuple[Action, ...] = ()
    # The UIDs of the serving Pods the operator can prove it created (`proven_pods`): the only
    # ones whose gate opens and whose runner's board counts.
    proven: frozenset[str] = frozenset()


def decide_serving(
    sdd: SpecDecodeDeployment,
    result: PlanningResult,
    seen: Observed,
    verified: Children | None,
    warmup: WarmupSummary | None = None,
    *,
    of: Subject,
) -> ServingDecision:
    """Roll the verified plan out (``warmup``: its verified warmup, for the served record),
    follow the replicas, keep the Service and the served plan's ConfigMap, open the gates;
    while no plan of the spec is verified, put a deleted Deployment back from the record.
    The status keeps the digest of the record whatever else it says. ``of``: the object's
    names, what of ``seen`` it controls, its served record."""
    decision = _decide_serving(sdd, result, seen, verified, warmup, of=of)
    state = decision.state
    if state is None or state.summary.record_digest is not None:
        return decision
    summary = state.summary.model_copy(update={"record_digest": of.record.digest})
    return replace(decision, state=replace(state, summary=summary))


def _decide_serving(
    sdd: SpecDecodeDeployment,
    result: PlanningResult,
    seen: Observed,
    verified: Children | None,
    warmup: WarmupSummary | None,
    *,
    of: Subject,
) -> ServingDecision:
    if "serving" in seen.failed:
        return ServingDecision(None)
    ids, seen_record = of.ids, of.record
    name = ids.serving_name
    deployment = seen.deployment
    holder = seen.taken.get(("Deployment", name))
    if holder is not None or (deployment is not None and not of.mine.deployment):
        return ServingDecision(_not_owned(ids, "Deployment", name, holder))
    actions: list[Action] = []
    replicas = sdd.spec.serving.replicas
    record = seen_record.record
    seed = _taken_seed(of, seen, verified, record)
    if seed is not None:  # its Pods would mount someone else's seed file
        return ServingDecision(seed)
    digest = seen_record.digest
    forged = seen_record.tampered if verified is None else None
    if forged is not None:
        actions.append(_drop_record(forged))
    if verified is not None:
        actions += _roll(verified.serving_deployment, deployment)
        written, digest = _record(sdd, seen, verified, warmup, seen_record)
        actions += written
    elif deployment is None and record is not None:
        deployment_name = record.deployment["metadata"]["name"]
        plan = (record.deployment["metadata"].get("annotations") or {}).get(ANNOTATION_PLAN_HASH)
        message = (
            f"Restored Deployment {deployment_name} from the record of the plan serving now, "
            f"{(plan or '')[:12]}: the spec's plan is not verified yet"
        )
        restore = {**record.deployment, "spec": {**record.deployment["spec"], "replicas": replicas}}
        actions.append(Create("serving", restore, Event("Warning", "Restored", message)))
    elif deployment is not None and deployment["spec"].get("replicas") != replicas:
        actions.append(Scale("serving", deployment, replicas))
    actions += _served_configmap(seen, verified, record)
    if deployment is not None or verified is not None:
        service = verified.service if verified else build_service(sdd)
        taken = _service_taken(of, seen, service)
        if taken is not None:
            return ServingDecision(taken, tuple(actions))
        actions += _service(service, seen.service)
    asked = _asked(sdd, ids, result)
    proven = proven_owners(seen, deployment, serving_template(verified, record))
    if deployment is not None:
        actions += open_gates(seen, deployment, proven)
    state = evaluate_serving(deployment, asked)
    summary = state.summary.model_copy(update={"record_digest": digest})
    return ServingDecision(replace(state, summary=summary), tuple(actions), frozenset(proven))


def _record(
    sdd: SpecDecodeDeployment,
    seen: Observed,
    verified: Children,
    warmup: WarmupSummary | None,
    seen_record: RecordSeen,
) -> tuple[list[Action], str | None]:
    """Write the record of the verified plan the Deployment serves, when it says otherwise,
    and the digest the status keeps of it (the record's, derived from the spec and the
    verified plan; the one kept so far while no record is written)."""
    if warmup is None:
        return [], seen_record.digest
    desired = build_served_record(sdd, verified.serving_deployment, verified.plan_configmap, warmup)
    digest = record_digest(desired["data"])
    live = seen_record.live
    if seen.configmaps is None and live is None:
        return [], digest  # not listed this sync (an object's first): written on the next
    if live is None:
        return [Create("serving", desired)], digest
    if live.get("data") == desired["data"]:
        return [], digest
    version = live["metadata"].get("resourceVersion")
    manifest = {**desired, "metadata": {**desired["metadata"], "resourceVersion": version}}
    event = None
    if seen_record.tampered is not None:
        event = Event("Warning", "RecordNotVerified", _tampered_message(live, "wrote it again"))
    return [Replace("serving", manifest, live, event)], digest


def _drop_record(record: Manifest) -> Action:
    """A record edited after the operator wrote it is no evidence: delete it (UID
    precondition), saying so once; nothing is restored from it and its plan's verdict is not
    taken from it."""
    message = _tampered_message(record, "deleted it; nothing is restored or verified from it")
    return Delete("serving", "ConfigMap", record, Event("Warning", "RecordNotVerified", message))


def _tampered_message(record: Manifest, then: str) -> str:
    return (
        f"ConfigMap {name_of(record)} was changed after the operator wrote it (its data no "
        f"longer matches status.serving.recordDigest): not the served record; the operator {then}"
    )


def _seed_of(verified: Children | None, record: ServedRecord | None) -> Manifest | None:
    """The seed-file ConfigMap the serving Pods mount: the verified plan's, else the record's."""
    if verified is not None:
        return verified.plan_configmap
    return record.configmap if record is not None else None


def _taken_seed(
    of: Subject,
    seen: Observed,
    verified: Children | None,
    record: ServedRecord | None,
) -> ServingState | None:
    """The seed file's name held by a ConfigMap this object does not control (made again by
    someone else after a deletion): no Deployment is created or restored to mount it."""
    wanted = _seed_of(verified, record)
    if wanted is None:
        return None
    name = name_of(wanted)
    holder = seen.taken.get(("ConfigMap", name))
    if holder is None and ("ConfigMap", name) not in of.mine.foreign:
        return None
    return _not_owned(of.ids, "ConfigMap", name, holder)


def _served_configmap(
    seen: Observed, verified: Children | None, record: ServedRecord | None
) -> list[Action]:
    """The seed-file ConfigMap of the plan serving now, created again when it is missing
    (deleted by hand: new serving Pods would wait for it forever)."""
    if seen.configmaps is None:
        return []  # not listed this sync
    wanted = _seed_of(verified, record)
    if wanted is None or any(name_of(c) == name_of(wanted) for c in seen.configmaps):
        return []
    return [Create("serving", wanted)]


def _asked(sdd: SpecDecodeDeployment, ids: Identity, result: PlanningResult) -> Serving:
    old = sdd.status or SpecDecodeDeploymentStatus()
    ready = get_condition(old.conditions, READY)
    name = ids.serving_name
    return Serving(
        plan_digest=result.summary.hash if result.summary and result.summary.hash else "",
        replicas=sdd.spec.serving.replicas,
        names=(name, name),
        selector=ids.selector,
        served_before=old.serving.plan_hash if old.serving else None,
        was_ready=ready is not None and ready.status == "True",
    )


def _not_owned(ids: Identity, kind: str, name: str, holder: str | None) -> ServingState:
    """A child of that name that this object does not control is left alone."""
    verdict = not_owned(kind, name, holder)
    return ServingState(verdict, ServingSummary(selector=ids.selector), stalled=True)


def _service_taken(of: Subject, seen: Observed, desired: Manifest) -> ServingState | None:
    name = name_of(desired)
    holder = seen.taken.get(("Service", name))
    if holder is None and seen.service is not None and not of.mine.service:
        return _not_owned(of.ids, "Service", name, None)
    return None if holder is None else _not_owned(of.ids, "Service", name, holder)


def _roll(desired: Manifest, deployment: Manifest | None) -> list[Action]:
    """Apply the verified plan's Deployment when it is new, or repair what drifted."""
    meta = desired["metadata"]
    if deployment is None:
        return [Create("serving", desired, _rolled(meta))]
    applied = (deployment["metadata"].get("annotations") or {}).get(ANNOTATION_APPLIED_HASH)
    new_plan = applied != meta["annotations"][ANNOTATION_APPLIED_HASH]
    drifted = None if new_plan else _drift(desired, deployment)
    if not new_plan and drifted is None:
        return []
    version = deployment["metadata"]["resourceVersion"]
    manifest = {**desired, "metadata": {**meta, "resourceVersion": version}}
    if new_plan:
        return [Replace("serving", manifest, deployment, _rolled(meta))]
    message = f"Repaired Deployment {meta['name']}: {drifted} differed from the spec"
    return [Replace("serving", manifest, deployment, Event("Warning", "DriftRepaired", message))]


def _rolled(meta: Manifest) -> Event:
    plan = meta["annotations"][ANNOTATION_PLAN_HASH][:12]
    return Event("Normal", "Rolled", f"Pointed Deployment {meta['name']} at verified plan {plan}")


def _drift(desired: Manifest, live: Manifest) -> str | None:
    """The first field of the Deployment's spec or labels that a hand edit changed."""
    labels = desired["metadata"]["labels"]
    found = first_difference(labels, live["metadata"].get("labels") or {}, "metadata.labels")
    return found or first_difference(desired["spec"], live.get("spec") or {}, "spec")


def _service(desired: Manifest, live: Manifest | None) -> list[Action]:
    """Create the Service, or patch it back when its type, ports, selector or labels drifted.
    Without a Deployment yet (it is created in this decision), a Service is created blindly:
    an existing one of that name answers the create and is checked then."""
    if live is None:
        return [Create("serving", desired)]
    spec, labels = desired["spec"], desired["metadata"]["labels"]
    drifted = first_difference(spec, live.get("spec") or {}, "spec") or first_difference(
        labels, live["metadata"].get("labels") or {}, "metadata.labels"
    )
    if drifted is None:
        return []
    selector = {**dict.fromkeys((live.get("spec") or {}).get("selector") or {}), **spec["selector"]}
    body = {"metadata": {"labels": labels}, "spec": {**spec, "selector": selector}}
    message = f"Repaired Service {desired['metadata']['name']}: {drifted} differed from the spec"
    return [Patch("serving", "Service", live, body, Event("Warning", "DriftRepaired", message))]


def served_pair(deployment: Manifest) -> tuple[str | None, str | None]:
    """The (plan digest, cache key) the Deployment's template runs."""
    annotations = deployment["metadata"].get("annotations") or {}
    return annotations.get(ANNOTATION_PLAN_HASH), annotations.get(ANNOTATION_CACHE_KEY)


def gate_candidates(deployment: Manifest | None, pods: tuple[Manifest, ...]) -> list[Manifest]:
    """Serving Pods whose gate is closed and that run the served plan and key (their owners
    are checked next, against the ReplicaSets)."""
    if deployment is None:
        return []
    wanted = served_pair(deployment)
    if wanted[0] is None:
        return []
    label = plan_label(wanted[0])
    return [
        pod
        for pod in pods
        if not _gated(pod)
        and _pair_of(pod) == wanted
        and (pod["metadata"].get("labels") or {}).get(LABEL_PLAN_HASH) == label
    ]


def serving_template(verified: Children | None, record: ServedRecord | None) -> Manifest | None:
    """The serving Pod template the operator derived itself: the verified plan's, else the
    one of the plan serving now as its bound record keeps it (None: neither is known)."""
    if verified is not None:
        return dict(verified.serving_deployment["spec"]["template"])
    if record is not None:
        return dict((record.deployment.get("spec") or {}).get("template") or {})
    return None


def proven_owners(
    seen: Observed, deployment: Manifest | None, template: Manifest | None
) -> dict[str, Manifest]:
    """The serving Pods the operator can prove it created (issue 34 case 3), by UID, each with
    its ReplicaSet (computed once a sync, for the gates and the boards): controlled by a
    ReplicaSet that its Deployment controls, whose template carries the served plan and key
    and runs the ``template`` the operator derived, and running that template themselves. An
    owner reference and labels are anyone's to write who may create Pods; running the
    operator's containers on the operator's volumes is the runner's and engine's, whoever
    created the Pod (`pod_template.template_mismatch`, as for the warmup Pods). The owners are
    sorted out first, then the templates."""
    if deployment is None or template is None:
        return {}
    replica_sets = _trusted_replicasets(seen, deployment)
    owned = [
        (pod, rs)
        for pod in seen.serving_pods
        if (rs := next((r for r in replica_sets if controlled_by(pod, uid_of(r))), None))
        is not None
    ]
    runs = {
        uid_of(rs)
        for rs in replica_sets
        if template_mismatch({"spec": _rs_template(rs).get("spec")}, template) is None
    }
    return {
        uid_of(pod): rs
        for pod, rs in owned
        if uid_of(rs) in runs and template_mismatch(pod, template) is None
    }


def proven_pods(
    seen: Observed, deployment: Manifest | None, template: Manifest | None
) -> list[Manifest]:
    """The serving Pods of `proven_owners`."""
    owners = proven_owners(seen, deployment, template)
    return [pod for pod in seen.serving_pods if uid_of(pod) in owners]


def _rs_template(rs: Manifest) -> Manifest:
    return dict((rs.get("spec") or {}).get("template") or {})


def open_gates(
    seen: Observed, deployment: Manifest, proven: Mapping[str, Manifest]
) -> list[Action]:
    """Open the `warmgate.dev/warmed` readiness gate of Pods that run the served, verified plan
    and that the operator can prove it created (``proven``: `proven_owners`, with the
    ReplicaSet through which it does)."""
    candidates = gate_candidates(deployment, seen.serving_pods)
    if not candidates:
        return []
    served = served_pair(deployment)[0] or ""
    actions: list[Action] = []
    for pod in candidates:
        owner = proven.get(uid_of(pod))
        if owner is None:
            continue
        condition = {
            "type": READINESS_GATE,
            "status": "True",
            "reason": "WarmupVerified",
            "message": f"Plan {served[:12]} was warmed and verified",
            "lastTransitionTime": seen.at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        actions.append(OpenGate("serving", pod, owner, deployment, condition))
    return actions


def _trusted_replicasets(seen: Observed, deployment: Manifest) -> list[Manifest]:
    """The ReplicaSets the Deployment controls whose template runs its plan and key."""
    wanted = served_pair(deployment)
    trusted = []
    for rs in seen.replica_sets:
        template = ((rs.get("spec") or {}).get("template") or {}).get("metadata") or {}
        got = template.get("annotations") or {}
        pair = (got.get(ANNOTATION_PLAN_HASH), got.get(ANNOTATION_CACHE_KEY))
        if controlled_by(rs, uid_of(deployment)) and pair == wanted:
            trusted.append(rs)
    return trusted


def _pair_of(pod: Manifest) -> tuple[str | None, str | None]:
    annotations = pod["metadata"].get("annotations") or {}
    return annotations.get(ANNOTATION_PLAN_HASH), annotations.get(ANNOTATION_CACHE_KEY)


def _gated(pod: Manifest) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == READINESS_GATE and c.get("status") == "True" for c in conditions)
