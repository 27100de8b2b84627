"""The whole sync against the fake cluster: children, verdicts, serving, events and the status.

The integration tests run the same path in the operator process against a real API server;
these run it in-process, one sync at a time, with the test playing the controllers.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from support.examples import example_sdd
from support.fake_cluster import FakeCluster, RecordedEvents
from support.kube_objects import (
    job_status,
    rolled_out_status,
    runner_summary,
    serving_pod,
    terminated_status,
    warmup_pod,
)

from warmgate.api import SpecDecodeDeployment
from warmgate.reconcile.cluster import ClusterError
from warmgate.reconcile.plan_cache import PlanCache
from warmgate.reconcile.plan_evaluation import total_buckets
from warmgate.reconcile.planning import evaluate
from warmgate.reconcile.sync import Outcome, Runtime, sync
from warmgate.settings import Settings

NS, NAME, UID = "llm", "served", "6f1c2d3e-0000-4000-8000-0000000000aa"
LOG = logging.getLogger("test_sync")


class World:
    """One SpecDecodeDeployment, the fake cluster, and the status each sync writes back."""

    def __init__(self, **spec: Any) -> None:
        self.sdd = example_sdd("llama31-8b-seeds", namespace=NS, name=NAME, uid=UID, **spec)
        self.cluster = FakeCluster()
        self.events = RecordedEvents()
        self.planned: list[int] = []
        settings = Settings(operator_image="warmgate:test")
        self.runtime = Runtime(settings, self.cluster, PlanCache(self._plan))

    def _plan(self, sdd: SpecDecodeDeployment) -> Any:
        self.planned.append(sdd.metadata.generation or 0)
        return evaluate(sdd)

    def sync(self) -> Outcome:
        """One sync; its status becomes the object's, as kopf's patch would make it."""
        outcome = sync(self.sdd, self.runtime, self.events, LOG)
        self.sdd = self.sdd.model_copy(update={"status": outcome.status})
        return outcome

    def edit(self, **spec: Any) -> None:
        """A spec change: the next generation, the status kept."""
        generation = (self.sdd.metadata.generation or 0) + 1
        changed = example_sdd(
            "llama31-8b-seeds", namespace=NS, name=NAME, uid=UID, generation=generation, **spec
        )
        self.sdd = changed.model_copy(update={"status": self.sdd.status})

    def conditions(self) -> dict[str, tuple[str, str]]:
        status = self.sdd.status
        assert status is not None
        return {c.type: (c.status, c.reason) for c in status.conditions or []}

    def message(self, type_: str) -> str:
        assert self.sdd.status is not None
        return next(c.message for c in self.sdd.status.conditions or [] if c.type == type_)

    def job(self) -> dict[str, Any]:
        (job,) = self.cluster.of_kind("Job")
        return job

    def finish(
        self, outcome: str, ok: bool, job: dict[str, Any] | None = None, **extra: Any
    ) -> None:
        """Play the kubelet and the Job controller: the runner's summary, then the Job's state."""
        job = job or self.job()
        name = job["metadata"]["name"]
        key = job["metadata"]["annotations"]["warmgate.dev/cache-key"]
        summary = runner_summary(outcome, extra.pop("key", key), **extra)
        pod = warmup_pod(NS, name)
        pod["status"] = terminated_status(summary, ok)
        self.cluster.put(pod)
        self.cluster.get("Job", NS, name)["status"] = job_status(ok)

    def deployment(self) -> dict[str, Any]:
        return self.cluster.get("Deployment", NS, f"{NAME}-serving")


@pytest.fixture
def world() -> World:
    return World()


def verified(world: World, kv_blocks: int = 4321) -> None:
    world.sync()
    world.finish("verified", ok=True, kv_blocks=kv_blocks)
    world.sync()


def test_a_proven_plan_creates_its_warmup_children_once(world: World) -> None:
    first = world.sync()
    kinds = sorted(kind for _, kind, _ in world.cluster.writes)
    assert kinds == ["ConfigMap", "Job"]
    assert world.events.reasons() == ["Created", "Created", "CoverageComplete"]
    assert world.conditions() == {
        "BucketsPlanned": ("True", "Planned"),
        "CoverageProven": ("True", "CoverageComplete"),
        "Warmed": ("False", "WarmupRunning"),
        "Ready": ("False", "WarmupPending"),
        "Reconciling": ("True", "WarmupRunning"),
    }
    assert first.status_patch["warmup"]["jobName"] == world.job()["metadata"]["name"]
    world.events.clear()
    again = world.sync()
    assert len(world.cluster.writes) == 2  # nothing created twice
    assert world.events.posted == []  # neither the verdict nor the plan changed
    assert again.status_patch == {}  # an unchanged object causes no status write


def test_the_plan_is_computed_once_per_generation(world: World) -> None:
    world.sync()
    world.sync()
    assert world.planned == [1]
    world.edit(serving={"replicas": 2})
    world.sync()
    assert world.planned == [1, 2]


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
    deployment = world.deployment()
    world.cluster.put(serving_pod(NS, deployment, "served-a"))
    stranger = serving_pod(NS, deployment, "served-old")
    stranger["metadata"]["labels"] = {
        **stranger["metadata"]["labels"],
        "warmgate.dev/plan-hash": "0" * 16,
    }
    world.cluster.put(stranger)
    world.sync()
    gated = world.cluster.get("Pod", NS, "served-a")["status"]["conditions"]
    assert [(c["type"], c["status"]) for c in gated] == [("warmgate.dev/warmed", "True")]
    assert "status" not in world.cluster.get("Pod", NS, "served-old")
    deployment["status"] = rolled_out_status(deployment["metadata"]["generation"], ready=1)
    world.sync()
    assert world.conditions()["Ready"] == ("True", "ReplicasReady")
    assert world.sdd.status is not None
    assert world.sdd.status.phase == "Ready"


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
    deployment = world.deployment()
    deployment["status"] = rolled_out_status(deployment["metadata"]["generation"], ready=1)
    old_plan = deployment["metadata"]["annotations"]["warmgate.dev/plan-hash"]
    world.edit(speculative={"method": "ngram", "numSpeculativeTokens": 3}, serving={"replicas": 2})
    world.sync()
    assert world.conditions()["Ready"] == ("True", "ReplicasReady")
    assert "last verified plan" in world.message("Ready")
    assert world.conditions()["Reconciling"] == ("True", "WarmupRunning")
    served = world.deployment()
    assert served["metadata"]["annotations"]["warmgate.dev/plan-hash"] == old_plan
    assert served["spec"]["replicas"] == 2  # only the replica count follows, by the scale call
    assert ("scale", "Deployment", f"{NAME}-serving") in world.cluster.writes
    new_job = max(world.cluster.of_kind("Job"), key=lambda j: j["metadata"]["resourceVersion"])
    world.finish("verified", ok=True, job=new_job)
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
    world.sync()
    assert world.conditions()["Warmed"] == ("Unknown", "WarmupPending")
    assert "retrying: etcdserver: request timed out" in world.message("Warmed")
    assert world.conditions()["CoverageProven"] == ("True", "CoverageComplete")
    del world.cluster.fail["create"]
    world.sync()
    assert world.conditions()["Warmed"] == ("False", "WarmupRunning")


def test_a_serving_failure_leaves_ready_to_the_warmup(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    world.sync()
    world.finish("verified", ok=True)
    world.cluster.fail["read:Deployment"] = ClusterError("Forbidden", status=403)
    world.sync()
    assert world.conditions()["Warmed"] == ("True", "WarmupSucceeded")
    assert world.conditions()["Ready"] == ("False", "ServingProgressing")
    assert world.cluster.of_kind("Deployment") == []
    assert "Could not reconcile the serving Deployment, retrying: Forbidden" in caplog.text


def test_a_lost_race_for_the_deployment_converges_on_the_next_sync(world: World) -> None:
    verified(world)
    world.edit(serving={"replicas": 2})
    stored = world.deployment()
    real_replace = world.cluster.replace

    def racing(manifest: dict[str, Any]) -> bool:
        stored["metadata"]["resourceVersion"] = "999"  # another writer got there first
        return real_replace(manifest)

    world.cluster.replace = racing  # type: ignore[method-assign]
    world.events.clear()
    world.sync()
    assert "Rolled" not in world.events.reasons()
    world.cluster.replace = real_replace  # type: ignore[method-assign]
    world.sync()
    assert world.deployment()["spec"]["replicas"] == 2
    assert "Rolled" in world.events.reasons()


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


def test_a_plan_its_children_cannot_carry_is_reported_not_warmed() -> None:
    """Prompt buckets of query 1 have no seed-file form (§2.6): nothing is created."""
    buckets = {"prompt": {"query": {"min": 1}}, "coverage": {"complete": False}}
    world = World(buckets=buckets)
    world.sync()
    assert world.cluster.writes == []
    assert world.conditions()["Warmed"] == ("Unknown", "WarmupPending")
    assert "query 1" in world.message("Warmed")


def test_warmed_buckets_count_the_plan_the_runner_checked(world: World) -> None:
    verified(world)
    result = evaluate(world.sdd)
    assert result.plan is not None
    assert world.sdd.status is not None
    assert world.sdd.status.warmup is not None
    assert world.sdd.status.warmup.warmed_buckets == total_buckets(result.plan)
