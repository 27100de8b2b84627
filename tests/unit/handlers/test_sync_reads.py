"""One sync sends each read of a child once, until it writes (`handlers/sync_reads.py`)."""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from support.fake_cluster import FakeCluster

from warmgate.handlers.sync_reads import SyncReads

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reconcile"))
from sync_world import World


class Counting(FakeCluster):
    """The fake cluster, counting the reads that reach it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reads: Counter[str] = Counter()

    def read(self, kind: Any, namespace: str, name: str) -> Any:
        self.reads[f"read {kind}"] += 1
        return super().read(kind, namespace, name)

    def list_pods(self, namespace: str, selector: str) -> Any:
        self.reads["list Pod"] += 1
        return super().list_pods(namespace, selector)

    def list_objects(self, kind: Any, namespace: str, selector: str) -> Any:
        self.reads[f"list {kind}"] += 1
        return super().list_objects(kind, namespace, selector)

    def events(self, namespace: str, uid: str) -> Any:
        self.reads["events"] += 1
        return super().events(namespace, uid)


def config_map(name: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "labels": {"a": "b"}}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def test_a_repeated_read_is_answered_once() -> None:
    base = Counting()
    base.put(config_map("one"))
    reads = SyncReads(base)
    first = reads.list_objects("ConfigMap", "ns", "a=b")
    first[0]["metadata"]["name"] = "edited"  # a stage edits what it read
    again = reads.list_objects("ConfigMap", "ns", "a=b")
    assert [m["metadata"]["name"] for m in again] == ["one"]
    assert base.reads["list ConfigMap"] == 1


def test_the_syncs_own_creates_and_deletes_are_applied_to_what_it_listed() -> None:
    """What the API would answer, without asking it again."""
    base = Counting()
    base.put(config_map("one"))
    reads = SyncReads(base)
    for selector in ("a=b", "a=c", "a"):  # matching, not matching, not key=value
        reads.list_objects("ConfigMap", "ns", selector)
    created = reads.create(config_map("two"))
    assert created is not None
    assert reads.read("Job", "ns", "x") is None  # another kind is still known
    uid = created["metadata"]["uid"]
    for selector in ("a=b", "a=c", "a"):
        assert reads.list_objects("ConfigMap", "ns", selector) == base.list_objects(
            "ConfigMap", "ns", selector
        )
    assert base.reads["list ConfigMap"] == 3 + 3 + 1  # the "a" list was asked again
    assert reads.delete("ConfigMap", "ns", "two", uid)
    assert [m["metadata"]["name"] for m in reads.list_objects("ConfigMap", "ns", "a=b")] == ["one"]
    assert base.reads["list ConfigMap"] == 7
    assert base.reads["read Job"] == 1


def test_editing_a_creates_answer_changes_no_later_read() -> None:
    reads = SyncReads(Counting())
    reads.list_objects("ConfigMap", "ns", "a=b")
    created = reads.create(config_map("two"))
    assert created is not None
    created["metadata"]["name"] = "edited"  # a stage edits what the create answered
    assert [m["metadata"]["name"] for m in reads.list_objects("ConfigMap", "ns", "a=b")] == ["two"]
    read = reads.read("ConfigMap", "ns", "two")  # type: ignore[arg-type]
    assert read is not None
    assert read["metadata"]["name"] == "two"


def test_a_name_someone_else_took_forgets_the_kind() -> None:
    base = Counting()
    reads = SyncReads(base)
    assert reads.list_objects("ConfigMap", "ns", "a=b") == []
    base.put(config_map("one"))  # another client, between the list and the create
    assert reads.create(config_map("one")) is None
    assert [m["metadata"]["name"] for m in reads.list_objects("ConfigMap", "ns", "a=b")] == ["one"]
    assert base.reads["list ConfigMap"] == 2


def test_a_steady_sync_reads_each_child_once() -> None:
    """A pending warmup's resync: 8 reads, of which the Job list and the Deployment twice."""
    plain, cached = World(), World()
    for world in (plain, cached):
        world.cluster = Counting(created=world.cluster.created)
        world.runtime = replace(world.runtime, cluster=world.cluster)
        world.sync()
        world.sync()
        world.cluster.reads.clear()
    plain.sync()
    cached.runtime = replace(cached.runtime, cluster=SyncReads(cached.cluster))
    outcome = cached.sync()
    assert sum(plain.cluster.reads.values()) == 8
    assert plain.cluster.reads["list Job"] == plain.cluster.reads["read Deployment"] == 2
    assert cached.cluster.reads == {k: 1 for k in plain.cluster.reads if k != "list Pod"} | {
        "list Pod": 2  # two selectors: the Job's Pods and the serving Pods
    }
    assert outcome.status_patch == {}
    assert cached.conditions() == plain.conditions()


class CountingAll(Counting):
    """Counting the writes too."""

    def create(self, manifest: Any) -> Any:
        self.reads[f"create {manifest['kind']}"] += 1
        return super().create(manifest)

    def patch_status(self, namespace: str, name: str, body: Any) -> None:
        self.reads["patch status"] += 1
        super().patch_status(namespace, name, body)


def test_a_new_objects_first_sync_sends_six_requests_and_two_events() -> None:
    """Planning notice, the Job list, the warmup's three children, the Deployment (docs/
    benchmarks.md, "Operator at scale": kopf adds its finalizer and final patches)."""
    world = World()
    world.cluster = CountingAll(created=world.cluster.created)
    world.runtime = replace(world.runtime, cluster=SyncReads(world.cluster))
    world.sync()
    assert world.cluster.reads == {
        "patch status": 1,
        "list Job": 1,
        "create ConfigMap": 2,
        "create Job": 1,
        "read Deployment": 1,
    }
    assert world.events.reasons() == ["Created", "CoverageComplete"]
