"""One SpecDecodeDeployment, the fake cluster and the clock, for the unit tests of the sync.

The tests play the controllers: `finish` is the kubelet and the Job controller, `roll` the
Deployment and ReplicaSet controllers; `sync` is one resync, whose status becomes the object's
as kopf's patch would make it.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from support.examples import example_sdd
from support.fake_cluster import FakeCluster, RecordedEvents
from support.kube_objects import (
    job_status,
    replica_set,
    rolled_out_status,
    runner_summary,
    serving_pod,
    terminated_status,
    warmup_pod,
)

from warmgate.api import SpecDecodeDeployment
from warmgate.reconcile.planning.evaluate import evaluate
from warmgate.reconcile.planning.planning_cache import PlanningCache
from warmgate.runtime.gather import RunnerEndpoints
from warmgate.runtime.sync import Runtime, Synced, sync
from warmgate.settings import Settings

NS, NAME, UID = "llm", "served", "6f1c2d3e-0000-4000-8000-0000000000aa"
LOG = logging.getLogger("test_sync")
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
NEW_PLAN = {"speculative": {"method": "ngram", "numSpeculativeTokens": 3}}  # k 2 -> 3


class World:
    """One SpecDecodeDeployment, the fake cluster, and the status each sync writes back."""

    def __init__(
        self, stem: str = "llama31-8b-seeds", endpoints: RunnerEndpoints | None = None, **spec: Any
    ) -> None:
        self.stem = stem
        self.sdd = example_sdd(stem, namespace=NS, name=NAME, uid=UID, **spec)
        self.cluster = FakeCluster(created=T0.strftime("%Y-%m-%dT%H:%M:%SZ"))
        self.events = RecordedEvents()
        self.planned: list[int] = []
        self.now = T0
        settings = Settings(operator_image="warmgate:test")
        self.endpoints: Any = endpoints  # the runners' status ports, as the test plays them
        readers = {"endpoints": endpoints} if endpoints is not None else {}
        self.runtime = Runtime(settings, self.cluster, PlanningCache(self._plan), **readers)

    def _plan(self, sdd: SpecDecodeDeployment) -> Any:
        self.planned.append(sdd.metadata.generation or 0)
        return evaluate(sdd)

    def sync(self) -> Synced:
        """One sync; its status becomes the object's, as kopf's patch would make it."""
        outcome = sync(self.sdd, self.runtime, self.events, LOG, at=self.now)
        self.sdd = self.sdd.model_copy(update={"status": outcome.status})
        return outcome

    def later(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
        self.cluster.created = self.now.strftime("%Y-%m-%dT%H:%M:%SZ")

    def edit(self, annotations: dict[str, str] | None = None, **spec: Any) -> None:
        """A spec change: the next generation, the status kept."""
        generation = (self.sdd.metadata.generation or 0) + 1
        changed = example_sdd(
            self.stem, namespace=NS, name=NAME, uid=UID, generation=generation, **spec
        )
        if annotations is not None:
            meta = changed.metadata.model_copy(update={"annotations": annotations})
            changed = changed.model_copy(update={"metadata": meta})
        self.sdd = changed.model_copy(update={"status": self.sdd.status})

    def conditions(self) -> dict[str, tuple[str, str]]:
        status = self.sdd.status
        assert status is not None
        return {c.type: (c.status, c.reason) for c in status.conditions or []}

    def condition(self, type_: str) -> Any:
        assert self.sdd.status is not None
        return next(c for c in self.sdd.status.conditions or [] if c.type == type_)

    def message(self, type_: str) -> str:
        return str(self.condition(type_).message)

    def jobs(self) -> list[dict[str, Any]]:
        return sorted(
            self.cluster.of_kind("Job"), key=lambda j: int(j["metadata"]["resourceVersion"])
        )

    def job(self) -> dict[str, Any]:
        (job,) = self.cluster.of_kind("Job")
        return job

    def newest_job(self) -> dict[str, Any]:
        return self.jobs()[-1]

    def pod_of(self, job: dict[str, Any], suffix: str = "x") -> dict[str, Any]:
        """The Job controller's Pod of ``job`` (stored, without a status yet)."""
        meta = job["metadata"]
        template = job["spec"]["template"]
        return self.cluster.put(
            warmup_pod(NS, meta["name"], meta["uid"], suffix, template=template)
        )

    def finish(
        self, outcome: str, ok: bool, job: dict[str, Any] | None = None, **extra: Any
    ) -> None:
        """Play the kubelet and the Job controller: the runner's summary, then the Job's state."""
        job = job or self.job()
        name = job["metadata"]["name"]
        key = job["metadata"]["annotations"]["warmgate.dev/cache-key"]
        summary = runner_summary(outcome, extra.pop("key", key), **extra)
        uid, template = job["metadata"]["uid"], job["spec"]["template"]
        pod = warmup_pod(NS, name, uid, tracked=False, template=template)  # counted
        pod["status"] = terminated_status(summary, ok)
        self.cluster.put(pod)
        self.cluster.get("Job", NS, name)["status"] = job_status(ok)

    def deployment(self) -> dict[str, Any]:
        return self.cluster.get("Deployment", NS, f"{NAME}-serving")

    def roll(self, ready: int | None = None, **counts: Any) -> list[dict[str, Any]]:
        """Play the Deployment and ReplicaSet controllers for the current template: a
        ReplicaSet, one Pod per wanted replica, and the Deployment's status."""
        deployment = self.deployment()
        generation = deployment["metadata"]["generation"]
        rs_name = f"{NAME}-serving-g{generation}"
        for pod in self.cluster.of_kind("Pod"):  # the old ReplicaSets scaled down to zero
            owners = pod["metadata"].get("ownerReferences") or []
            if any(o.get("kind") == "ReplicaSet" and o.get("name") != rs_name for o in owners):
                del self.cluster.objects[("Pod", NS, pod["metadata"]["name"])]
        rs = self.cluster.put(replica_set(NS, deployment, rs_name))
        wanted = deployment["spec"]["replicas"]
        pods = [
            self.cluster.put(serving_pod(NS, rs, f"{NAME}-serving-g{generation}-{i}"))
            for i in range(wanted)
        ]
        ready = wanted if ready is None else ready
        deployment["status"] = rolled_out_status(generation, ready, **counts)
        return pods

    def running_warmup(self) -> str:
        """The warmup Pod the Job controller starts, Running with an IP."""
        job = self.job()
        meta, template = job["metadata"], job["spec"]["template"]
        pod = warmup_pod(NS, meta["name"], meta["uid"], template=template)
        pod["status"] = {"phase": "Running", "podIP": "10.0.0.7"}
        self.cluster.put(pod)
        return str(pod["metadata"]["name"])

    def key(self) -> str:
        return str(self.job()["metadata"]["annotations"]["warmgate.dev/cache-key"])

    def succeed(self) -> None:
        """The warmup Pod's runner verified the plan and the Job succeeded (no sync yet)."""
        job = self.job()
        meta, template = job["metadata"], job["spec"]["template"]
        pod = warmup_pod(NS, meta["name"], meta["uid"], template=template)
        pod["status"] = terminated_status(runner_summary("verified", self.key()), True)
        self.cluster.put(pod)
        self.cluster.get("Job", NS, job["metadata"]["name"])["status"] = job_status(True)

    def verify(self) -> None:
        """The warmup Pod's runner verified the plan and the Job succeeded; one sync."""
        self.succeed()
        self.sync()

    def deployment_deleted_while_a_new_plan_warms(self) -> dict[str, Any]:
        """Serving; the spec asks for NEW_PLAN, whose warmup starts; the Deployment is deleted
        and the next sync runs. Returns the Deployment served before."""
        serving(self)
        served = self.deployment()
        self.edit(**NEW_PLAN)
        self.sync()
        del self.cluster.objects[("Deployment", NS, f"{NAME}-serving")]
        self.sync()
        return served

    def rollout_past_deadline(self) -> None:
        """The Deployment controller gave up on the rollout: none ready, one updated, and
        Progressing False for ProgressDeadlineExceeded (no sync yet)."""
        deployment = self.deployment()
        deployment["status"] = {
            **rolled_out_status(deployment["metadata"]["generation"], ready=0, updated=1),
            "conditions": [
                {
                    "type": "Progressing",
                    "status": "False",
                    "reason": "ProgressDeadlineExceeded",
                    "message": f'ReplicaSet "{NAME}-serving-1" has timed out progressing.',
                }
            ],
        }

    def serve(self, name: str = "served-a") -> dict[str, Any]:
        """One serving Pod ``name``, Running with an IP, of a ReplicaSet the Deployment controls;
        the Deployment rolled out."""
        deployment = self.deployment()
        rs = self.cluster.put(replica_set(NS, deployment, f"{NAME}-serving-rs-{name}"))
        pod = serving_pod(NS, rs, name)
        pod["status"] = {"phase": "Running", "podIP": "10.0.0.9"}
        self.cluster.put(pod)
        deployment["status"] = rolled_out_status(deployment["metadata"]["generation"], ready=1)
        return deployment


def verified(world: World, kv_blocks: int = 4321) -> None:
    world.sync()
    world.finish("verified", ok=True, kv_blocks=kv_blocks)
    world.sync()


def serving(world: World) -> World:
    """A verified plan whose rollout completed: Ready for generation 1."""
    verified(world)
    world.roll()
    world.sync()
    assert world.conditions()["Ready"] == ("True", "ReplicasReady")
    return world


def mounted_configmaps(owner: dict[str, Any]) -> list[str]:
    """The ConfigMaps the Pod template of ``owner`` (a Job or a Deployment) mounts."""
    volumes = owner["spec"]["template"]["spec"]["volumes"]
    return [v["configMap"]["name"] for v in volumes if "configMap" in v]
