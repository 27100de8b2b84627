"""Issue 11 at the level of one sync: truthful Ready and kstatus, last known state, Pending
reasons and the deadline, retries of a failed warmup, garbage, trust, drift repair.

The real controllers run these paths in tests/e2e; here the test plays them (sync_world).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from sync_world import LOG, NAME, NEW_PLAN, NS, World, mounted_configmaps, serving, verified

from warmgate.api.constants import ANNOTATION_REWARM
from warmgate.kube.cluster import ClusterError
from warmgate.runtime.sync import keep_serving

UNSCHEDULABLE = {
    "phase": "Pending",
    "conditions": [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/1 nodes are available: 1 Insufficient habana.ai/gaudi.",
        }
    ],
}


def test_ready_stays_on_the_old_generation_until_the_new_plan_is_rolled_out(world: World) -> None:
    """Item 1: Ready and status.serving.planHash claim the new plan only once every replica
    runs it; until then Ready's observedGeneration stays where the served plan was realised
    (kubectl wait keeps waiting) and Reconciling says what happens."""
    serving(world)
    old = world.sdd.status.serving.plan_hash  # type: ignore[union-attr]
    world.edit(**NEW_PLAN)
    world.sync()
    world.finish("verified", ok=True, job=world.newest_job())
    world.sync()  # verified: the Deployment points at the new plan
    ready = world.condition("Ready")
    assert (ready.status, ready.observed_generation) == ("True", 1)
    assert world.sdd.status.observed_generation == 2  # type: ignore[union-attr]
    assert world.sdd.status.serving.plan_hash == old  # type: ignore[union-attr]
    # The new ReplicaSet's Pod is up but not ready: one old Pod serves, one new is updated.
    world.roll(ready=1, updated=1, replicas=2)
    world.sync()
    assert world.conditions()["Ready"] == ("True", "RollingOut")
    assert world.condition("Ready").observed_generation == 1
    assert world.conditions()["Reconciling"] == ("True", "RollingOut")
    assert world.sdd.status.serving.plan_hash == old  # type: ignore[union-attr]
    world.roll()  # complete
    world.sync()
    new = world.sdd.status.plan.hash  # type: ignore[union-attr]
    assert world.conditions()["Ready"] == ("True", "ReplicasReady")
    assert world.condition("Ready").observed_generation == 2
    assert world.sdd.status.serving.plan_hash == new  # type: ignore[union-attr]
    assert "Reconciling" not in world.conditions()


def test_a_rollout_past_its_progress_deadline_stalls(world: World) -> None:
    verified(world)
    world.rollout_past_deadline()
    world.sync()
    assert world.conditions()["Ready"] == ("False", "ProgressDeadlineExceeded")
    assert world.conditions()["Stalled"] == ("True", "ProgressDeadlineExceeded")
    assert "Reconciling" not in world.conditions()


def test_the_status_says_planning_before_planning(world: World) -> None:
    """Item 5: BucketsPlanned=Unknown (Planning) is written before the plan is computed."""
    written: list[Any] = []
    plan = world.runtime.plans._planner

    def spy(sdd: Any) -> Any:
        written.extend(world.cluster.status_writes)
        return plan(sdd)

    world.runtime.plans._planner = spy
    world.sync()
    (notice,) = written
    conditions = {c["type"]: (c["status"], c["reason"]) for c in notice["conditions"]}
    assert conditions["BucketsPlanned"] == ("Unknown", "Planning")
    assert conditions["Reconciling"] == ("True", "Planning")
    assert notice["observedGeneration"] == 1
    world.sync()
    notices = [w for w in world.cluster.status_writes if _planning(w)]
    assert len(notices) == 1  # only once per generation


def _planning(written: Any) -> bool:
    """A status write that says Planning (the notice)."""
    return any(c["reason"] == "Planning" for c in written.get("conditions") or [])


def test_a_known_plan_needs_no_planning_notice(world: World) -> None:
    """A second object of the same inputs finds the plan at hand: one status write, the final."""
    world.sync()
    other = World()
    other.runtime = replace(other.runtime, plans=world.runtime.plans)
    other.sdd = other.sdd.model_copy(
        update={"metadata": other.sdd.metadata.model_copy(update={"uid": "another-uid"})}
    )
    outcome = other.sync()
    assert [w for w in other.cluster.status_writes if _planning(w)] == []
    assert other.cluster.status_writes == [outcome.status_patch]  # the final status, once
    assert outcome.status_patch["conditions"]
    assert other.conditions()["BucketsPlanned"] == ("True", "Planned")


def test_a_plan_too_large_to_compute_is_refused_at_once() -> None:
    """Item 5: millions of buckets are refused from a count, with the size and the time."""
    engine = {"maxModelLen": 131072, "maxNumSeqs": 1024, "maxNumBatchedTokens": 8192}
    world = World("minimal-ngram", engine=engine, buckets={"strategy": "lin"})
    world.sync()
    assert world.conditions()["BucketsPlanned"] == ("False", "PlanTooLarge")
    assert world.conditions()["Stalled"] == ("True", "PlanTooLarge")
    message = world.message("BucketsPlanned")
    assert "200,868 to 471,532 buckets" in message
    assert "would take at least 21.9 h" in message
    assert world.cluster.writes == []


def test_a_plan_too_long_to_warm_is_refused_before_any_job() -> None:
    # The engine's own lin plan (9,081 buckets). Its holes are allowed: the prompt rows whose
    # warmup dummies are cut at maxModelLen need about 5,900 extra buckets, over the 4,096
    # maxExtraBuckets allows (docs/coverage.md, "Buckets the warmup never compiles").
    engine = {"maxModelLen": 16384, "maxNumSeqs": 128, "maxNumBatchedTokens": 8192}
    buckets = {"strategy": "lin", "coverage": {"complete": False}}
    world = World("minimal-ngram", engine=engine, buckets=buckets)
    world.sync()
    assert world.conditions()["BucketsPlanned"] == ("True", "Planned")
    assert world.conditions()["Warmed"] == ("False", "WarmupTooLong")
    assert world.conditions()["Stalled"] == ("True", "WarmupTooLong")
    assert "more than spec.warmup.timeoutSeconds=3600" in world.message("Warmed")
    assert world.cluster.of_kind("Job") == []


def test_a_build_error_is_stalled_not_retried(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 2: plan files over a ConfigMap's 1 MiB fail the same way every time."""
    monkeypatch.setattr("warmgate.resources.warmup_children.CONFIGMAP_LIMIT", 64)
    outcome = world.sync()
    assert world.conditions()["Warmed"] == ("False", "BuildFailed")
    assert world.conditions()["Stalled"] == ("True", "BuildFailed")
    assert "over a ConfigMap's 1 MiB" in world.message("Warmed")
    assert outcome.retry_after is None
    assert world.cluster.writes == []


@pytest.mark.parametrize(
    "failure",
    [
        ClusterError("Too many requests", status=429, retry_after=7),
        ClusterError("the server was unable to return a response in the time allotted", 504),
        ClusterError("Connection reset by peer"),
    ],
    ids=["429", "504", "timeout"],
)
def test_a_transient_error_keeps_ready_and_serving(world: World, failure: ClusterError) -> None:
    """Item 3: one 429 or timeout flips nothing; the sync asks to retry with backoff."""
    serving(world)
    before = world.sdd.status
    for operation in ("read:Deployment", "list:Job"):
        world.cluster.fail[operation] = failure
    first = world.sync()
    second = world.sync()
    assert world.conditions()["Ready"] == ("True", "ReplicasReady")
    assert world.conditions()["Warmed"] == ("True", "WarmupSucceeded")
    assert world.sdd.status.serving == before.serving  # type: ignore[union-attr]
    assert first.status_patch == {} or "serving" not in first.status_patch
    assert first.retry_after == max(2.0, failure.retry_after or 0)
    assert second.retry_after == max(4.0, failure.retry_after or 0)
    world.cluster.fail.clear()
    assert world.sync().retry_after is None


def test_an_unschedulable_warmup_says_so_then_fails_at_the_deadline(world: World) -> None:
    """Item 4: the scheduler's message within one sync; past pendingTimeoutSeconds (1800 s by
    default) the warmup fails with that reason, the Job is stopped, and nothing retries it."""
    world.sync()
    pod = world.pod_of(world.job())
    pod["status"] = UNSCHEDULABLE
    world.later(60)
    world.sync()
    assert world.conditions()["Warmed"] == ("False", "Unschedulable")
    assert "Insufficient habana.ai/gaudi" in world.message("Warmed")
    assert "warming" not in world.message("Warmed")
    assert world.conditions()["Reconciling"] == ("True", "Unschedulable")
    world.later(1800)
    world.sync()
    assert world.conditions()["Stalled"] == ("True", "Unschedulable")
    job = world.job()
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["annotations"]["warmgate.dev/warmup-failed"].startswith("Unschedulable")
    writes = len(world.cluster.writes)
    world.sync()
    assert world.conditions()["Stalled"] == ("True", "Unschedulable")
    assert "Insufficient habana.ai/gaudi" in world.message("Warmed")  # its own words, kept
    assert world.cluster.writes[writes:] == []  # no new Job: the spec must change first


def test_fixing_the_spec_of_a_failed_warmup_replaces_its_job(world: World) -> None:
    """Item 6: the stopped Job is deleted and a Job with the new content is created."""
    world.sync()
    world.pod_of(world.job())["status"] = UNSCHEDULABLE
    world.later(3600)
    world.sync()
    stopped = world.job()["metadata"]["name"]
    world.edit(warmup={"placement": {"nodeSelector": {"habana.ai/gaudi.generation": "gaudi2"}}})
    world.sync()
    (job,) = world.jobs()
    assert job["metadata"]["name"] != stopped
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {
        "habana.ai/gaudi.generation": "gaudi2"
    }
    assert "Replaced" in world.events.reasons()
    assert "Stalled" not in world.conditions()
    volume = job["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"]
    assert world.cluster.get("ConfigMap", NS, volume)  # its own plan.json, never the old one


def test_a_rewarm_annotation_warms_a_verified_plan_again(world: World) -> None:
    serving(world)
    first = world.job()["metadata"]["name"]
    world.edit(annotations={ANNOTATION_REWARM: "2026-12-01T10:00:00Z"})
    world.sync()
    assert world.conditions()["Warmed"] == ("False", "WarmupPending")
    assert world.conditions()["Ready"] == ("True", "ReplicasReady")  # the old entry serves
    assert next(j["metadata"]["name"] for j in world.jobs()) == first
    assert len(world.jobs()) == 2


def test_a_replaced_cache_claim_warms_the_plan_again() -> None:
    """Item 7: the record of a verified plan does not outlive the claim it vouches for."""
    world = World(warmup={"cache": {"claimTemplate": {"size": "100Gi"}}})
    verified(world)
    (claim,) = world.cluster.of_kind("PersistentVolumeClaim")
    status = world.sdd.status
    assert status.warmup.cache_claim_uid == claim["metadata"]["uid"]  # type: ignore[union-attr]
    del world.cluster.objects[("PersistentVolumeClaim", NS, claim["metadata"]["name"])]
    world.sync()  # the operator creates the claim again: a new, empty volume
    (again,) = world.cluster.of_kind("PersistentVolumeClaim")
    assert again["metadata"]["uid"] != claim["metadata"]["uid"]
    assert world.conditions()["Warmed"] == ("False", "WarmupPending")
    new_job = world.newest_job()
    annotations = new_job["metadata"]["annotations"]
    assert annotations["warmgate.dev/cache-claim-uid"] == again["metadata"]["uid"]


def test_superseded_jobs_and_configmaps_are_collected(world: World) -> None:
    """Item 8: a running Job of a superseded plan is stopped; once the new plan serves, the
    old plan's Job and ConfigMaps go; only what the current and served plans use stays."""
    serving(world)
    first = world.job()["metadata"]["name"]
    world.edit(**NEW_PLAN)
    world.sync()
    second = world.newest_job()["metadata"]["name"]
    assert {j["metadata"]["name"] for j in world.jobs()} == {first, second}  # old one serves
    world.edit(speculative={"method": "ngram", "numSpeculativeTokens": 4})
    world.sync()
    names = {j["metadata"]["name"] for j in world.jobs()}
    assert second not in names  # the running superseded Job is stopped (deleted)
    assert first in names
    world.finish("verified", ok=True, job=world.newest_job())
    world.sync()
    world.roll()
    world.sync()
    (job,) = world.jobs()
    assert job["metadata"]["name"] not in (first, second)
    mounted = {
        v["configMap"]["name"]
        for owner in (job, world.deployment())
        for v in owner["spec"]["template"]["spec"]["volumes"]
        if "configMap" in v
    }
    kept = {c["metadata"]["name"] for c in world.cluster.of_kind("ConfigMap")}
    assert kept == mounted | {f"{NAME}-served"}  # and the record of the plan serving now
    assert "Deleted" in world.events.reasons()


def test_only_pods_of_the_operators_deployment_are_gated(world: World) -> None:
    """Item 9: a Pod with the right labels and annotations but no trusted ReplicaSet stays
    gated; so does one of a ReplicaSet the Deployment does not own."""
    verified(world)
    (pod,) = world.roll(ready=0)

    def renamed(obj: dict[str, Any], name: str, **meta: Any) -> dict[str, Any]:
        fresh = {k: v for k, v in obj["metadata"].items() if k != "uid"}
        return {**obj, "metadata": {**fresh, "name": name, **meta}}

    world.cluster.put(renamed(pod, "rogue", ownerReferences=[]))
    rs = world.cluster.get("ReplicaSet", NS, f"{NAME}-serving-g1")
    foreign = world.cluster.put(renamed(rs, "foreign", ownerReferences=[]))
    orphan_pod = renamed(pod, "orphan-pod")
    orphan_pod["metadata"]["ownerReferences"] = [
        {
            "kind": "ReplicaSet",
            "name": "foreign",
            "uid": foreign["metadata"]["uid"],
            "controller": True,
        }
    ]
    world.cluster.put(orphan_pod)
    world.sync()
    assert "status" in world.cluster.get("Pod", NS, pod["metadata"]["name"])
    for name in ("rogue", "orphan-pod"):
        assert "status" not in world.cluster.get("Pod", NS, name)


def test_a_deployment_it_does_not_own_is_left_alone(world: World) -> None:
    world.sync()
    world.finish("verified", ok=True)
    world.cluster.put(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": f"{NAME}-serving", "namespace": NS},
            "spec": {"replicas": 1},
        }
    )
    writes = len(world.cluster.writes)
    world.sync()
    assert world.conditions()["Ready"] == ("False", "NotOwned")
    assert world.conditions()["Stalled"] == ("True", "NotOwned")
    assert [w for w in world.cluster.writes[writes:] if w[1] == "Deployment"] == []


def test_hand_edits_of_the_deployment_and_the_service_are_repaired(world: World) -> None:
    """Item 12: drift is repaired, and a repaired object is not written again."""
    serving(world)
    container = world.deployment()["spec"]["template"]["spec"]["containers"][0]
    image = container["image"]
    container["image"] = "registry.example.com/other:1"
    del world.deployment()["spec"]["template"]["spec"]["readinessGates"]
    service = world.cluster.get("Service", NS, f"{NAME}-serving")
    service["spec"].update(type="NodePort", ports=[{"name": "http", "port": 9000}])
    service["spec"]["selector"]["extra"] = "x"
    world.sync()
    repaired = world.deployment()["spec"]["template"]["spec"]
    assert repaired["containers"][0]["image"] == image
    assert repaired["readinessGates"] == [{"conditionType": "warmgate.dev/warmed"}]
    service = world.cluster.get("Service", NS, f"{NAME}-serving")
    assert service["spec"]["type"] == "ClusterIP"
    assert [p["port"] for p in service["spec"]["ports"]] == [8000]
    assert "extra" not in service["spec"]["selector"]
    assert world.events.reasons().count("DriftRepaired") == 2
    writes = len(world.cluster.writes)
    world.sync()
    assert world.cluster.writes[writes:] == []


def test_server_defaults_are_no_drift() -> None:
    """What the API server adds or rewrites (defaults, dropped zero values, canonical
    quantities) is not a hand edit."""
    world = World(serving={"resources": {"requests": {"cpu": "1000m"}}})
    verified(world)
    spec = world.deployment()["spec"]
    container = spec["template"]["spec"]["containers"][0]
    container["resources"]["requests"]["cpu"] = "1"
    container["imagePullPolicy"] = "IfNotPresent"
    for mount in container["volumeMounts"]:
        if mount.get("readOnly") is False:
            del mount["readOnly"]
    writes = len(world.cluster.writes)
    world.sync()
    assert [w for w in world.cluster.writes[writes:] if w[1] == "Deployment"] == []


def test_deleting_a_stopped_job_retries_it(world: World) -> None:
    """Item 6: `kubectl delete job` is a retry with the same content (docs/operator.md)."""
    world.sync()
    world.pod_of(world.job())["status"] = UNSCHEDULABLE
    world.later(3600)
    world.sync()
    stopped = world.job()["metadata"]["name"]
    del world.cluster.objects[("Job", NS, stopped)]
    world.sync()
    assert world.job()["metadata"]["name"] == stopped
    assert "suspend" not in world.job()["spec"]
    assert world.conditions()["Warmed"] == ("False", "WarmupPending")
    assert "Stalled" not in world.conditions()


def test_a_lost_verdict_warms_again(world: World) -> None:
    """The Job completed but its only Pod was deleted with the runner's summary in it."""
    world.sync()
    name = world.job()["metadata"]["name"]
    world.cluster.get("Job", NS, name)["status"] = {
        "succeeded": 1,
        "conditions": [{"type": "Complete", "status": "True"}],
    }
    world.sync()
    assert world.cluster.of_kind("Job") == []
    assert "VerdictLost" in world.events.reasons()
    assert "Stalled" not in world.conditions()
    world.sync()
    assert world.job()["metadata"]["name"] == name  # the same warmup, once more


def test_a_deleted_plan_configmap_comes_back_while_serving(world: World) -> None:
    """Issue 23 item 5: new serving Pods would wait for the seed file forever."""
    serving(world)
    mounted = mounted_configmaps(world.deployment())
    for name in mounted:
        del world.cluster.objects[("ConfigMap", NS, name)]
    world.sync()
    assert all(("ConfigMap", NS, name) in world.cluster.objects for name in mounted)


def test_a_seed_configmap_made_again_by_someone_else_is_reported_not_mounted(
    world: World,
) -> None:
    """Issue 23 item 1: the served seed file deleted and made again, without this object as
    its controller, while a new plan warms: the Deployment deleted meanwhile is not restored
    to mount it, and the status names it."""
    serving(world)
    (seed,) = mounted_configmaps(world.deployment())
    mine = world.cluster.get("ConfigMap", NS, seed)
    impostor = {**mine, "metadata": {**mine["metadata"], "ownerReferences": []}}
    impostor["metadata"].pop("uid")
    impostor["data"] = dict.fromkeys(mine["data"], "someone else's\n")
    del world.cluster.objects[("ConfigMap", NS, seed)]
    world.cluster.put(impostor)
    world.edit(**NEW_PLAN)
    world.sync()
    del world.cluster.objects[("Deployment", NS, f"{NAME}-serving")]
    world.sync()
    assert world.conditions()["Stalled"] == ("True", "NotOwned")
    assert f"ConfigMap {seed}" in world.message("Stalled")
    assert ("Deployment", NS, f"{NAME}-serving") not in world.cluster.objects
    assert world.cluster.get("ConfigMap", NS, seed)["data"] == impostor["data"]


def test_a_deleted_warmup_configmap_comes_back_while_its_job_runs(world: World) -> None:
    world.sync()
    world.sync()
    names = mounted_configmaps(world.job())
    for name in names:
        del world.cluster.objects[("ConfigMap", NS, name)]
    world.sync()
    assert all(("ConfigMap", NS, name) in world.cluster.objects for name in names)


def test_a_deployment_deleted_while_a_new_plan_warms_serves_the_old_plan_again(
    world: World,
) -> None:
    """Issue 23 item 6: the last verified plan keeps serving until the new one is verified."""
    served = world.deployment_deleted_while_a_new_plan_warms()
    back = world.deployment()
    assert back["spec"]["template"] == served["spec"]["template"]
    assert "Restored" in world.events.reasons()
    assert world.conditions()["Warmed"][0] == "False"  # the new plan still warms


def test_going_back_to_the_served_plan_after_its_pods_are_gone_does_not_warm_it_again(
    world: World,
) -> None:
    """Issue 23 item 7: the served plan's verdict record stays alongside the current one."""
    serving(world)
    jobs_before = {j["metadata"]["name"] for j in world.jobs()}
    for pod in world.cluster.of_kind("Pod"):  # the warmup Pod was cleaned up
        if "warmgate.dev/component" not in (pod["metadata"].get("labels") or {}):
            del world.cluster.objects[("Pod", NS, pod["metadata"]["name"])]
    world.edit(**NEW_PLAN)
    world.sync()
    warming = {j["metadata"]["name"] for j in world.jobs()} - jobs_before  # the new plan's
    world.edit()  # back to the spec that serves
    world.sync()
    assert world.conditions()["Warmed"] == ("True", "WarmupSucceeded")
    world.sync()
    assert {j["metadata"]["name"] for j in world.jobs()} <= jobs_before | warming
    assert "VerdictLost" not in world.events.reasons()


def test_a_child_name_held_by_another_object_is_reported_never_adopted() -> None:
    """Issue 23 item 1: the Job of the wanted (content-hashed) name was made by someone else;
    once it is gone (e.g. the garbage collector removes an old object's), the warmup goes on."""
    world = World()
    world.sync()
    job = world.job()
    impostor = {**job, "metadata": {**job["metadata"], "ownerReferences": []}}
    impostor["metadata"].pop("uid")
    world.cluster.objects.clear()
    world.cluster.put(impostor)
    world.sdd = world.sdd.model_copy(update={"status": None})
    outcome = world.sync()
    assert world.conditions()["Stalled"] == ("True", "NotOwned")
    assert job["metadata"]["name"] in world.message("Stalled")
    assert outcome.retry_after is not None
    assert (
        world.cluster.get("Job", NS, job["metadata"]["name"])["metadata"]["ownerReferences"] == []
    )
    del world.cluster.objects[("Job", NS, job["metadata"]["name"])]
    world.sync()
    assert world.job()["metadata"]["ownerReferences"][0]["uid"] == world.sdd.metadata.uid
    assert "Stalled" not in world.conditions()


def test_configmaps_of_the_wanted_names_made_by_someone_else_are_never_mounted() -> None:
    """Issue 23 item 1: the plan ConfigMaps (names anyone can compute) were made beforehand.
    The Job that would mount them is not created in the sync whose creates found them (the
    rest of the warmup waits, as after a failed write), nor in a later sync, which lists them:
    NotOwned stays until they are gone, then the warmup goes on with the operator's own."""
    world = World()
    world.sync()
    configmaps = world.cluster.of_kind("ConfigMap")
    world.cluster.objects.clear()
    for cm in configmaps:  # the user's copies: the same names and labels, no owner
        impostor = {**cm, "metadata": {**cm["metadata"], "ownerReferences": []}}
        impostor["metadata"].pop("uid")
        world.cluster.put(impostor)
    world.sdd = world.sdd.model_copy(update={"status": None})
    for _ in range(2):  # the first sync creates; the second lists the ConfigMaps
        outcome = world.sync()
        assert world.cluster.of_kind("Job") == []
        assert world.conditions()["Stalled"] == ("True", "NotOwned")
        assert outcome.retry_after is not None
    assert "ConfigMap" in world.message("Stalled")
    for cm in configmaps:
        del world.cluster.objects[("ConfigMap", NS, cm["metadata"]["name"])]
    world.sync()
    assert world.job()["metadata"]["ownerReferences"][0]["uid"] == world.sdd.metadata.uid
    owners = [c["metadata"]["ownerReferences"] for c in world.cluster.of_kind("ConfigMap")]
    assert owners
    assert all(o[0]["uid"] == world.sdd.metadata.uid for o in owners)
    assert "Stalled" not in world.conditions()


def _running_on(node_answers: bool) -> dict[str, Any]:
    """A running warmup Pod's status once it is deleted: its kubelet stopped its containers
    (a node that answers), or the node controller marked it not ready and nothing else did
    (kube-controller-manager v1.37 MarkPodsNotReady: Ready False, its reason kept, as e2e
    scenario o read it on the local node)."""
    if node_answers:
        ready = {"status": "False", "reason": "ContainersNotReady"}
        containers = {"status": "False", "reason": "ContainersNotReady"}
    else:
        ready, containers = {"status": "False"}, {"status": "True"}
    return {
        "phase": "Running",
        "podIP": "10.0.0.7",
        "conditions": [{"type": "Ready", **ready}, {"type": "ContainersReady", **containers}],
    }


def test_a_warmup_pod_on_a_lost_node_is_warmed_again_not_warming_for_hours(world: World) -> None:
    """Issue 23 item 10: a Pod deleted on a node that stopped answering stays Running for ever
    (no kubelet ends it, the Job controller does not replace it): warm again. The node
    controller writes no reason of its own (this test used to give it `NodeNotReady`, which
    the real one never writes: the Pod read as warming until the kubelet came back)."""
    world.sync()
    job = world.job()
    pod = world.pod_of(job)
    pod["metadata"]["deletionTimestamp"] = "2026-11-29T12:10:00Z"
    pod["status"] = _running_on(node_answers=False)
    world.later(60)
    world.sync()
    assert world.conditions()["Warmed"] == ("False", "WarmupPending")
    assert "stopped answering" in world.message("Warmed")
    assert ("delete", "Job", job["metadata"]["name"]) in world.cluster.writes
    world.sync()
    assert world.job()["metadata"]["uid"] != job["metadata"]["uid"]  # a new attempt


def test_a_warmup_pod_deleted_on_a_node_that_answers_is_left_to_its_kubelet(world: World) -> None:
    world.sync()
    job = world.job()
    pod = world.pod_of(job)
    pod["metadata"]["deletionTimestamp"] = "2026-11-29T12:10:00Z"
    pod["status"] = _running_on(node_answers=True)
    world.later(60)
    world.sync()
    assert world.conditions()["Warmed"] == ("False", "WarmupRunning")
    assert ("delete", "Job", job["metadata"]["name"]) not in world.cluster.writes


def test_the_pending_deadline_runs_on_the_operators_clock_not_the_servers() -> None:
    """Issue 23 item 12: a Pod whose creationTimestamp an API server with a skewed clock wrote
    two hours back is not stopped at once; the deadline counts from when the operator saw it."""
    world = World()
    world.sync()
    pod = world.pod_of(world.job())
    pod["metadata"]["creationTimestamp"] = "2026-11-29T10:00:00Z"  # the server's clock: -2 h
    pod["status"] = UNSCHEDULABLE
    world.later(60)
    world.sync()
    assert "Stalled" not in world.conditions()
    world.later(1800)
    world.sync()
    assert world.conditions()["Stalled"] == ("True", "Unschedulable")


def test_an_object_the_operator_cannot_read_says_so_and_keeps_serving(world: World) -> None:
    """Issue 23 item 11: a spec stored under other validation rules: Stalled names the field,
    Ready stays, and a replaced serving Pod of the verified plan still gets its gate."""
    serving(world)
    for pod in world.roll():  # the ReplicaSet controller replaced the Pods: gates closed
        assert "conditions" not in (pod.get("status") or {})
    body = world.sdd.model_dump(by_alias=True, exclude_none=True, mode="json")
    body["spec"]["engine"]["maxNumSeqs"] = "many"
    writes = len(world.cluster.status_writes)
    keep_serving(body, "spec.engine.maxNumSeqs: not an integer", world.runtime, world.events, LOG)
    (status,) = world.cluster.status_writes[writes:]
    conditions = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert conditions["Stalled"] == ("True", "InvalidSpec")
    assert conditions["Ready"] == ("True", "ReplicasReady")
    assert "spec.engine.maxNumSeqs" in next(
        c["message"] for c in status["conditions"] if c["type"] == "Stalled"
    )
    gated = [w for w in world.cluster.writes if w[0] == "set_pod_condition"]
    assert gated  # the new Pods of the verified plan were gated open
