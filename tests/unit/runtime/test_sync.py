"""The whole sync against the fake cluster: children, verdicts, serving, events and the status.

The integration tests run the same path in the operator process against a real API server;
these run it in-process, one sync at a time, with the test playing the controllers
(`sync_world.World`). The lifecycle fixes of issue 11 are in test_sync_lifecycle.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.kube_objects import rolled_out_status, serving_pod
from sync_world import NAME, NS, World, verified

from warmgate.kube.cluster import ClusterError
from warmgate.reconcile.planning.evaluate import evaluate
from warmgate.reconcile.planning.proven_plan import total_buckets


def test_a_proven_plan_creates_its_warmup_children_once(world: World) -> None:
    first = world.sync()
    kinds = sorted(kind for _, kind, _ in world.cluster.writes)
    assert kinds == ["ConfigMap", "ConfigMap", "Job"]  # seed file, plan.json, the Job
    assert world.events.reasons() == ["Created", "CoverageComplete"]  # one Event names all three
    message = world.events.posted[0][2]
    assert all(f"{kind} {name}" in message for _, kind, name in world.cluster.writes)
    assert world.conditions() == {
        "BucketsPlanned": ("True", "Planned"),
        "CoverageProven": ("True", "CoverageComplete"),
        "Warmed": ("False", "WarmupPending"),
        "Ready": ("False", "WarmupPending"),
        "Reconciling": ("True", "WarmupPending"),
    }
    assert "has not created its Pod yet" in world.message("Warmed")
    assert first.status_patch["warmup"]["jobName"] == world.job()["metadata"]["name"]
    world.events.clear()
    again = world.sync()
    assert len(world.cluster.writes) == 3  # nothing created twice
    assert world.events.posted == []  # neither the verdict nor the plan changed
    assert again.status_patch == {}  # an unchanged object causes no status write
    assert again.retry_after is None


def test_the_plan_is_computed_once_per_planner_input(world: World) -> None:
    world.sync()
    world.sync()
    assert world.planned == [1]
    world.edit(serving={"replicas": 2})  # a new generation, the same planner inputs
    world.sync()
    assert world.planned == [1]
    world.edit(warmup={"timeoutSeconds": 7200})  # the warmup deadline is one of them
    world.sync()
    assert world.planned == [1, 3]


def test_the_runners_verdict_warms_the_plan_and_rolls_out_serving(world: World) -> None:
    verified(world)
    assert world.conditions()["Warmed"] == ("True", "WarmupSucceeded")
    assert world.conditions()["Ready"] == ("False", "ServingProgressing")
    status = world.sdd.status
    assert status is not None
    assert status.warmup is not None
    assert status.plan is not None
    assert status.warmup.kv_blocks == 4321
    assert status.warmup.warmed_buckets == status.plan.total_buckets
    assert "Rolled" in world.events.reasons()
    deployment = world.deployment()
    argv = deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    assert argv[argv.index("--num-gpu-blocks-override") + 1] == "4321"  # the measured KV pin
    service = world.cluster.get("Service", NS, f"{NAME}-serving")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def test_the_gate_opens_for_the_served_plan_and_ready_follows_the_rollout(world: World) -> None:
    verified(world)
    (pod,) = world.roll(ready=0, updated=1, replicas=1)
    rs = world.cluster.get("ReplicaSet", NS, f"{NAME}-serving-g1")
    stranger = serving_pod(NS, rs, "served-old")
    stranger["metadata"]["labels"] = {
        **stranger["metadata"]["labels"],
        "warmgate.dev/plan-hash": "0" * 16,
    }
    world.cluster.put(stranger)
    world.sync()
    gated = world.cluster.get("Pod", NS, pod["metadata"]["name"])["status"]["conditions"]
    assert [(c["type"], c["status"]) for c in gated] == [("warmgate.dev/warmed", "True")]
    assert "status" not in world.cluster.get("Pod", NS, "served-old")
    assert world.conditions()["Ready"] == ("False", "ServingProgressing")
    deployment = world.deployment()
    deployment["status"] = rolled_out_status(deployment["metadata"]["generation"], ready=1)
    world.sync()
    assert world.conditions()["Ready"] == ("True", "ReplicasReady")
    assert world.sdd.status is not None
    assert world.sdd.status.phase == "Ready"
    assert "Reconciling" not in world.conditions()


def test_the_record_in_status_outlives_the_job_and_the_pods(world: World) -> None:
    verified(world)
    for kind in ("Job", "Pod"):
        for obj in world.cluster.of_kind(kind):
            del world.cluster.objects[(kind, NS, obj["metadata"]["name"])]
    world.edit(serving={"replicas": 3})
    world.sync()
    assert world.conditions()["Warmed"] == ("True", "WarmupSucceeded")
    assert world.cluster.of_kind("Job") == []  # nothing warms again
    assert world.deployment()["spec"]["replicas"] == 3


def test_a_lost_status_changes_nothing_that_is_applied(world: World) -> None:
    """The builders read no status: the same spec and plan give the same Deployment."""
    verified(world)
    applied = world.deployment()["metadata"]["annotations"]["warmgate.dev/applied-hash"]
    writes = len(world.cluster.writes)
    world.sdd = world.sdd.model_copy(update={"status": None})
    world.sync()  # the Job still says verified: the record is rebuilt from it
    assert world.conditions()["Warmed"] == ("True", "WarmupSucceeded")
    assert world.deployment()["metadata"]["annotations"]["warmgate.dev/applied-hash"] == applied
    assert world.cluster.writes[writes:] == []


def test_a_new_plan_warms_while_the_last_verified_one_keeps_serving(world: World) -> None:
    verified(world)
    world.roll()
    world.sync()
    old_plan = world.deployment()["metadata"]["annotations"]["warmgate.dev/plan-hash"]
    world.edit(speculative={"method": "ngram", "numSpeculativeTokens": 3}, serving={"replicas": 2})
    world.sync()
    assert world.conditions()["Ready"] == ("True", "ReplicasReady")
    assert "last verified plan" in world.message("Ready")
    assert world.conditions()["Reconciling"] == ("True", "WarmupPending")
    served = world.deployment()
    assert served["metadata"]["annotations"]["warmgate.dev/plan-hash"] == old_plan
    assert served["spec"]["replicas"] == 2  # only the replica count follows, by the scale call
    assert ("scale", "Deployment", f"{NAME}-serving") in world.cluster.writes
    world.finish("verified", ok=True, job=world.newest_job())
    world.sync()
    rolled = world.deployment()["metadata"]["annotations"]["warmgate.dev/plan-hash"]
    assert rolled != old_plan
    assert world.sdd.status is not None
    assert world.sdd.status.plan is not None
    assert rolled == world.sdd.status.plan.hash


def test_unwarmed_shapes_fail_the_warmup_and_stall(world: World) -> None:
    world.sync()
    shape = "('decode', 24, 1, 768)"
    world.finish("unwarmed_shapes", ok=False, unwarmed=[shape], reason="1 shape not warmed")
    world.sync()
    assert world.conditions()["Warmed"] == ("False", "WarmupFailed")
    assert world.conditions()["Stalled"] == ("True", "WarmupFailed")
    assert "Reconciling" not in world.conditions()
    assert shape in world.message("Warmed")
    assert world.cluster.of_kind("Deployment") == []


def test_a_completed_job_without_this_keys_verdict_is_not_trusted(world: World) -> None:
    world.sync()
    world.finish("verified", ok=True, key="gaudi2-tp1-" + "0" * 40)
    world.sync()
    assert world.conditions()["Warmed"] == ("False", "WarmupFailed")
    assert "did not verify key" in world.message("Warmed")
    assert world.cluster.of_kind("Deployment") == []


def test_an_api_failure_is_reported_and_retried_without_losing_the_status(world: World) -> None:
    world.cluster.fail["create"] = ClusterError("etcdserver: request timed out", status=504)
    first = world.sync()
    assert world.conditions()["Warmed"] == ("Unknown", "WarmupPending")
    assert "retrying: etcdserver: request timed out" in world.message("Warmed")
    assert world.conditions()["CoverageProven"] == ("True", "CoverageComplete")
    assert first.retry_after == 2.0
    del world.cluster.fail["create"]
    again = world.sync()
    assert world.conditions()["Warmed"] == ("False", "WarmupPending")
    assert again.retry_after is None


def test_a_serving_failure_keeps_the_last_known_ready(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    world.sync()
    world.finish("verified", ok=True)
    world.cluster.fail["read:Deployment"] = ClusterError("Forbidden", status=403)
    outcome = world.sync()
    assert world.conditions()["Warmed"] == ("True", "WarmupSucceeded")
    assert world.conditions()["Ready"] == ("False", "WarmupPending")  # as it was
    assert world.cluster.of_kind("Deployment") == []
    assert "Could not read the serving Deployment served-serving, retrying: Forbidden" in (
        caplog.text
    )
    assert outcome.retry_after is not None


def test_a_lost_race_for_the_deployment_is_read_again_and_won_in_the_same_sync(
    world: World,
) -> None:
    """A replace that loses to another writer (409) reads the Deployment again and decides
    again on it, within the sync: the next replace carries the new resourceVersion."""
    verified(world)
    world.edit(serving={"replicas": 2})
    stored = world.deployment()
    real_replace = world.cluster.replace
    answers: list[bool] = []

    def racing(manifest: dict[str, Any]) -> Any:
        if manifest["kind"] != "Deployment":
            return real_replace(manifest)
        if not answers:
            stored["metadata"]["resourceVersion"] = "999"  # another writer got there first
        found = real_replace(manifest)
        answers.append(found is not None)
        return found

    world.cluster.replace = racing  # type: ignore[method-assign]
    world.events.clear()
    world.sync()
    assert answers == [False, True]
    assert world.deployment()["spec"]["replicas"] == 2
    assert world.events.reasons().count("Rolled") == 1


def test_an_unplannable_spec_creates_nothing_and_warns_once() -> None:
    world = World(buckets={"seeds": {"prompt": [[1, 128, 0]], "decode": [[16, 1, 8]]}})
    world.sync()
    world.sync()
    assert world.cluster.writes == []
    assert world.conditions()["BucketsPlanned"] == ("False", "PlanFailed")
    assert world.conditions()["Stalled"] == ("True", "PlanFailed")
    assert [(kind, reason) for kind, reason, _ in world.events.posted] == [
        ("Warning", "PlanFailed")
    ]


def test_a_plan_its_children_cannot_carry_stalls_with_the_reason() -> None:
    """Prompt buckets of query 1 have no seed-file form (§2.6): nothing is created, and the
    object is Stalled with the reason instead of retrying forever (issue 11 item 2)."""
    buckets = {"prompt": {"query": {"min": 1}}, "coverage": {"complete": False}}
    world = World(buckets=buckets)
    outcome = world.sync()
    assert world.cluster.writes == []
    assert world.conditions()["Warmed"] == ("False", "BuildFailed")
    assert world.conditions()["Stalled"] == ("True", "BuildFailed")
    assert "Reconciling" not in world.conditions()
    assert "query 1" in world.message("Warmed")
    assert outcome.retry_after is None


def test_warmed_buckets_count_the_plan_the_runner_checked(world: World) -> None:
    verified(world)
    result = evaluate(world.sdd)
    assert result.plan is not None
    assert world.sdd.status is not None
    assert world.sdd.status.warmup is not None
    assert world.sdd.status.warmup.warmed_buckets == total_buckets(result.plan)


def test_a_reachable_drafter_crash_is_a_warning_event_with_its_fix() -> None:
    """Issue 25 item 5: eagle3 with k = 3 and maxModelLen a multiple of the block size crashes
    vllm-gaudi's drafter in reachable states; the plan says so once, naming the change."""
    spec = {
        "method": "eagle3",
        "numSpeculativeTokens": 3,
        "draftModel": {"name": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"},
    }
    world = World(speculative=spec)
    world.sync()
    warnings = [(r, m) for kind, r, m in world.events.posted if kind == "Warning"]
    assert [r for r, _ in warnings] == ["DrafterCrashReachable"]
    message = warnings[0][1]
    assert "last accepted token is at position 4094" in message
    assert "a prefill ending at 4095 tokens" in message
    assert "maxModelLen 4094 or less" in message
    world.events.clear()
    world.sync()
    assert world.events.posted == []  # once per plan
    fixed = World(speculative=spec, engine={**world.sdd.spec.engine.model_dump(by_alias=True,
                  exclude_none=True), "maxModelLen": 4094})  # fmt: skip
    fixed.sync()
    assert "DrafterCrashReachable" not in fixed.events.reasons()
