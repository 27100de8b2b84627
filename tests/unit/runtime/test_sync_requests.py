"""What one sync sends to the API server: each read once, in one gather, and the writes.

The figures of docs/benchmarks.md ("The operator at scale") rest on these counts: a new object's
first sync, and the resync of an object whose warmup waits.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from support.fake_cluster import FakeCluster
from sync_world import World


class Counting(FakeCluster):
    """The fake cluster, counting the requests that reach it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sent: Counter[str] = Counter()

    def read(self, kind: Any, namespace: str, name: str) -> Any:
        self.sent[f"read {kind}"] += 1
        return super().read(kind, namespace, name)

    def list_pods(self, namespace: str, selector: str) -> Any:
        self.sent["list Pod"] += 1
        return super().list_pods(namespace, selector)

    def list_objects(self, kind: Any, namespace: str, selector: str) -> Any:
        self.sent[f"list {kind}"] += 1
        return super().list_objects(kind, namespace, selector)

    def events(self, namespace: str, uid: str) -> Any:
        self.sent["events"] += 1
        return super().events(namespace, uid)

    def create(self, manifest: Any) -> Any:
        self.sent[f"create {manifest['kind']}"] += 1
        return super().create(manifest)

    def patch_status(
        self, namespace: str, name: str, body: Any, resource_version: str | None = None
    ) -> str | None:
        self.sent["patch status"] += 1
        return super().patch_status(namespace, name, body, resource_version)


def counting(world: World) -> Counting:
    """The world's cluster, with what it stores so far, counting from now on."""
    cluster = Counting(created=world.cluster.created)
    cluster.objects, cluster._versions = world.cluster.objects, world.cluster._versions
    world.cluster = cluster
    world.runtime = replace(world.runtime, cluster=cluster)
    return cluster


def test_a_new_objects_first_sync_sends_eight_requests_and_two_events() -> None:
    """Planning notice, the Job list, the Deployment, the warmup's three children, the status
    (kopf adds its finalizer and final patches in the operator)."""
    world = World()
    cluster = counting(world)
    world.sync()
    assert cluster.sent == {
        "patch status": 2,
        "list Job": 1,
        "read Deployment": 1,
        "create ConfigMap": 2,
        "create Job": 1,
    }
    assert world.events.reasons() == ["Created", "CoverageComplete"]


def test_a_waiting_warmups_resync_reads_each_child_once_and_writes_nothing() -> None:
    """The Jobs, the Job's Pods and Events, the Deployment, the serving Pods, the ConfigMaps."""
    world = World()
    world.sync()
    world.sync()
    cluster = counting(world)
    outcome = world.sync()
    assert cluster.sent == {
        "list Job": 1,
        "list Pod": 2,  # two selectors: the Job's Pods and the serving Pods
        "events": 1,
        "read Deployment": 1,
        "list ConfigMap": 1,
    }
    assert outcome.status_patch == {}


def test_a_verified_and_served_objects_resync_sends_no_write() -> None:
    """Steady state: the recorded verdict spares the Job's Pods and Events; the ReplicaSets
    are listed to read the runners of the operator's own serving Pods only."""
    world = World()
    world.sync()
    world.finish("verified", ok=True)
    world.sync()
    for pod in world.roll():  # the kubelet runs them
        world.cluster.get("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"])[
            "status"
        ] = {"phase": "Running", "podIP": "10.0.0.9"}
    world.sync()
    world.sync()
    cluster = counting(world)
    outcome = world.sync()
    assert cluster.sent == {
        "list Job": 1,
        "read Deployment": 1,
        "read Service": 1,
        "list Pod": 1,
        "list ReplicaSet": 1,
        "list ConfigMap": 1,
    }
    assert outcome.status_patch == {}
    assert world.conditions()["Ready"][0] == "True"
