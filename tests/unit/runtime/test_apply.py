"""The apply enforces the ownership rule whatever the decision asks (the in-memory cluster)."""

from __future__ import annotations

import copy
import logging
from typing import Any

from support.fake_cluster import FakeCluster, RecordedEvents
from support.kube_objects import owner

from warmgate.reconcile.sync.actions import Create, Delete, Event, OpenGate, Patch
from warmgate.runtime.apply import apply

NS, OWNER = "llm", "sdd-uid"
LOG = logging.getLogger("test_apply")


def child(kind: str, name: str, controller: str | None = OWNER) -> dict[str, Any]:
    refs = [owner("SpecDecodeDeployment", "x", controller, "warmgate.dev/v1alpha1")]
    meta = {"name": name, "namespace": NS, "ownerReferences": refs if controller else []}
    return {"apiVersion": "v1", "kind": kind, "metadata": meta, "spec": {"type": "ClusterIP"}}


def test_a_create_that_finds_a_foreign_object_reports_the_name_taken() -> None:
    cluster, events = FakeCluster(), RecordedEvents()
    foreign = cluster.put(child("ConfigMap", "plan", controller="someone-else"))
    applied = apply([Create("warmup", child("ConfigMap", "plan"))], cluster, events, OWNER, LOG)
    assert applied.stored == ()
    assert ("ConfigMap", "plan") in applied.taken
    assert "someone-else" in applied.taken[("ConfigMap", "plan")]
    assert cluster.get("ConfigMap", NS, "plan") == foreign  # untouched
    assert events.reasons() == []


def test_a_taken_name_stops_the_rest_of_its_part_not_the_others() -> None:
    """Issue 23 item 1: the Job that mounts a ConfigMap someone else made under its name is
    not created after the ConfigMap's 409 (it was, in the same apply, before)."""
    cluster = FakeCluster()
    cluster.put(child("ConfigMap", "plan", controller="someone-else"))
    old = cluster.put(child("Job", "old"))
    actions = [
        Create("warmup", child("ConfigMap", "plan")),
        Create("warmup", child("Job", "j")),
        Create("serving", child("Service", "svc")),
        Delete("collect", "Job", old),
    ]
    applied = apply(actions, cluster, RecordedEvents(), OWNER, LOG)
    assert set(applied.taken) == {("ConfigMap", "plan")}
    assert ("Job", NS, "j") not in cluster.objects
    assert ("Service", NS, "svc") in cluster.objects
    assert ("Job", NS, "old") in cluster.objects  # no garbage collected after it
    assert applied.again


def test_a_create_that_finds_its_own_object_uses_it() -> None:
    cluster = FakeCluster()
    mine = cluster.put(child("ConfigMap", "plan"))
    applied = apply(
        [Create("warmup", child("ConfigMap", "plan"))], cluster, RecordedEvents(), OWNER, LOG
    )
    assert applied.stored == (mine,)
    assert applied.taken == {}


def test_writes_to_objects_this_owner_does_not_control_are_refused() -> None:
    cluster, events = FakeCluster(), RecordedEvents()
    service = cluster.put(child("Service", "svc", controller=None))
    job = cluster.put(child("Job", "job", controller="someone-else"))
    before = copy.deepcopy(cluster.objects)
    body = {"spec": {"type": "LoadBalancer"}}
    actions = [
        Patch("serving", "Service", service, body, Event("Warning", "DriftRepaired", "x")),
        Delete("collect", "Job", job, Event("Normal", "Deleted", "x")),
    ]
    applied = apply(actions, cluster, events, OWNER, LOG)
    assert cluster.objects == before
    assert cluster.writes == []
    assert events.reasons() == []
    assert set(applied.taken) == {("Service", "svc"), ("Job", "job")}


def test_a_gate_opens_only_down_the_whole_chain_of_controllers() -> None:
    cluster = FakeCluster()
    deployment = cluster.put(child("Deployment", "d"))
    rs = cluster.put(child("ReplicaSet", "rs", controller=deployment["metadata"]["uid"]))
    stray = cluster.put(child("ReplicaSet", "stray", controller="someone-else"))
    pod = cluster.put(child("Pod", "p", controller=rs["metadata"]["uid"]))
    forged = cluster.put(child("Pod", "f", controller=stray["metadata"]["uid"]))
    condition = {"type": "warmgate.dev/warmed", "status": "True"}
    actions = [
        OpenGate("serving", pod, rs, deployment, condition),
        OpenGate("serving", forged, stray, deployment, condition),
    ]
    apply(actions, cluster, RecordedEvents(), OWNER, LOG)
    assert cluster.writes == [("set_pod_condition", "Pod", "p")]


def test_a_failed_write_stops_its_part_and_the_collection() -> None:
    from warmgate.kube.cluster import ClusterError

    cluster = FakeCluster()
    cluster.fail["create"] = ClusterError("boom", status=500)
    old = cluster.put(child("Job", "old"))
    actions = [
        Create("warmup", child("ConfigMap", "a")),
        Create("warmup", child("Job", "j")),
        Delete("collect", "Job", old),
    ]
    applied = apply(actions, cluster, RecordedEvents(), OWNER, LOG)
    assert set(applied.failed) == {"warmup"}
    assert cluster.writes == []
    assert applied.again
