"""The decision as data in, data out: an object, its planning, a snapshot -> writes and status.

No cluster, fake or real: each test builds the snapshot (`Observed`) by hand, as the gather
would have read it, and reads the actions and the status that `decide` returns.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from functools import cache
from typing import Any

from support.examples import example_sdd
from support.kube_objects import (
    job_status,
    replica_set,
    runner_summary,
    serving_pod,
    terminated_status,
    warmup_pod,
)

from warmgate.api import SpecDecodeDeployment
from warmgate.reconcile.planning.evaluate import PlanningResult, evaluate
from warmgate.reconcile.sync.actions import Create, Decision, Delete, OpenGate, Patch
from warmgate.reconcile.sync.decide import decide
from warmgate.reconcile.sync.observed import Observed
from warmgate.reconcile.sync.subject import warmup_target
from warmgate.resources import desired_children
from warmgate.settings import Settings

NS, NAME, UID = "llm", "served", "6f1c2d3e-0000-4000-8000-0000000000aa"
AT = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SETTINGS = Settings(operator_image="warmgate:test")


@cache
def _sdd_and_plan() -> tuple[SpecDecodeDeployment, PlanningResult]:
    sdd = example_sdd("llama31-8b-seeds", namespace=NS, name=NAME, uid=UID)
    return sdd, evaluate(sdd)


def stored(manifest: dict[str, Any], uid: str) -> dict[str, Any]:
    """A manifest as the API server stores it (a UID, a version)."""
    found = copy.deepcopy(manifest)
    found["metadata"].update(uid=uid, resourceVersion="7", generation=1)
    found["metadata"].setdefault("creationTimestamp", "2026-11-29T11:59:00Z")
    return found


def children() -> Any:
    sdd, result = _sdd_and_plan()
    target = warmup_target(sdd, result)
    assert target is not None
    return desired_children(sdd, target[0], SETTINGS)


def decided(seen: Observed, sdd: SpecDecodeDeployment | None = None) -> Decision:
    base, result = _sdd_and_plan()
    return decide(sdd or base, result, seen, SETTINGS)


def conditions(decision: Decision) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in decision.status.conditions or []}


def kinds(decision: Decision) -> list[tuple[str, str]]:
    return [
        (type(a).__name__, str(a.manifest["kind"] if isinstance(a, Create) else ""))
        for a in decision.actions
    ]


def test_nothing_yet_creates_the_warmups_children_with_the_job_last() -> None:
    decision = decided(Observed(at=AT))
    assert kinds(decision) == [("Create", "ConfigMap"), ("Create", "ConfigMap"), ("Create", "Job")]
    assert all(a.stage == "warmup" for a in decision.actions)
    assert conditions(decision)["Warmed"] == ("False", "WarmupPending")
    assert [e.reason for e in decision.events] == ["CoverageComplete"]


def verified_job() -> tuple[dict[str, Any], dict[str, Any]]:
    """The plan's Job, complete, and its Pod whose runner verified the plan's key."""
    wanted = children()
    job = stored(wanted.warmup_job, "job-uid")
    job["status"] = job_status(True)
    template = job["spec"]["template"]
    pod = stored(warmup_pod(NS, job["metadata"]["name"], "job-uid", template=template), "pod-uid")
    pod["status"] = terminated_status(runner_summary("verified", wanted.cache_key), True)
    return job, pod


def test_a_verified_job_rolls_out_the_plan_and_its_service() -> None:
    job, pod = verified_job()
    seen = Observed(at=AT, jobs=(job,), job_pods={"job-uid": (pod,)})
    decision = decided(seen)
    assert conditions(decision)["Warmed"] == ("True", "WarmupSucceeded")
    assert kinds(decision) == [("Create", "Deployment"), ("Create", "Service")]
    rolled = decision.actions[0]
    assert isinstance(rolled, Create)
    assert rolled.done is not None
    assert rolled.done.reason == "Rolled"


def test_a_verdict_from_a_pod_the_job_does_not_control_is_not_taken() -> None:
    job, pod = verified_job()
    pod["metadata"]["ownerReferences"] = []  # the labels of the Job, but no owner reference
    seen = Observed(at=AT, jobs=(job,), job_pods={"job-uid": (pod,)})
    assert conditions(decided(seen))["Warmed"][0] == "False"


def test_a_job_this_object_does_not_control_is_neither_used_nor_touched() -> None:
    """A Job of the wanted name (content-hashed, computable by anyone) made by someone else."""
    job, pod = verified_job()
    job["metadata"]["ownerReferences"] = []
    name = job["metadata"]["name"]
    seen = Observed(
        at=AT,
        jobs=(job,),
        job_pods={"job-uid": (pod,)},
        taken={("Job", name): "not controlled by this SpecDecodeDeployment"},
    )
    decision = decided(seen)
    assert conditions(decision)["Warmed"] == ("False", "NotOwned")
    assert conditions(decision)["Stalled"] == ("True", "NotOwned")
    assert decision.actions == ()
    assert name in next(c.message for c in decision.status.conditions or [] if c.type == "Stalled")


def test_a_failed_warmup_read_keeps_the_recorded_verdict_and_collects_nothing() -> None:
    job, pod = verified_job()
    first = decided(Observed(at=AT, jobs=(job,), job_pods={"job-uid": (pod,)}))
    sdd, _ = _sdd_and_plan()
    recorded = sdd.model_copy(update={"status": first.status})
    stale = stored({**job, "metadata": {**job["metadata"], "name": "old-job"}}, "old-uid")
    seen = Observed(at=AT, jobs=(stale,), configmaps=(), failed={"warmup": "Could not read"})
    decision = decided(seen, recorded)
    assert conditions(decision)["Warmed"] == ("True", "WarmupSucceeded")
    assert not [a for a in decision.actions if isinstance(a, Delete)]


def test_a_superseded_job_is_collected_once_everything_was_read() -> None:
    job, pod = verified_job()
    first = decided(Observed(at=AT, jobs=(job,), job_pods={"job-uid": (pod,)}))
    sdd, _ = _sdd_and_plan()
    recorded = sdd.model_copy(update={"status": first.status})
    old = copy.deepcopy(job)
    old["metadata"].update(name="served-warmup-old", uid="old-uid")
    old["metadata"]["annotations"]["warmgate.dev/cache-key"] = "gaudi2-tp1-0000"
    decision = decided(Observed(at=AT, jobs=(job, old), configmaps=()), recorded)
    deletes = [a for a in decision.actions if isinstance(a, Delete)]
    assert [(d.kind, d.target["metadata"]["name"]) for d in deletes] == [
        ("Job", "served-warmup-old")
    ]


def test_a_foreign_service_is_reported_and_not_patched() -> None:
    job, pod = verified_job()
    wanted = children()
    deployment = stored(wanted.serving_deployment, "deploy-uid")
    service = stored(wanted.service, "svc-uid")
    service["metadata"]["ownerReferences"] = []
    service["spec"]["type"] = "LoadBalancer"
    seen = Observed(
        at=AT, jobs=(job,), job_pods={"job-uid": (pod,)}, deployment=deployment, service=service
    )
    decision = decided(seen)
    assert not [a for a in decision.actions if isinstance(a, Patch)]
    assert conditions(decision)["Ready"] == ("False", "NotOwned")


def test_the_gate_opens_only_for_pods_of_a_trusted_replicaset() -> None:
    job, pod = verified_job()
    deployment = stored(children().serving_deployment, "deploy-uid")
    trusted = stored(replica_set(NS, deployment, "served-serving-a"), "rs-a")
    stranger = copy.deepcopy(trusted)
    stranger["metadata"].update(name="served-serving-b", uid="rs-b", ownerReferences=[])
    pods = (
        stored(serving_pod(NS, trusted, "served-serving-a-0"), "pod-a"),
        stored(serving_pod(NS, stranger, "served-serving-b-0"), "pod-b"),
    )
    seen = Observed(
        at=AT,
        jobs=(job,),
        job_pods={"job-uid": (pod,)},
        deployment=deployment,
        service=stored(children().service, "svc-uid"),
        serving_pods=pods,
        replica_sets=(trusted, stranger),
    )
    gates = [a for a in decided(seen).actions if isinstance(a, OpenGate)]
    assert [g.pod["metadata"]["name"] for g in gates] == ["served-serving-a-0"]


def test_the_same_snapshot_gives_the_same_decision() -> None:
    """Pure: no clock, no I/O, nothing kept between calls."""
    job, pod = verified_job()
    seen = Observed(at=AT, jobs=(job,), job_pods={"job-uid": (pod,)})
    one, two = decided(seen), decided(seen)
    assert one.actions == two.actions
    dump = lambda d: json.dumps(d.status.model_dump(mode="json"), sort_keys=True)  # noqa: E731
    assert dump(one) == dump(two)
