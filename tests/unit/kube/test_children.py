"""The watch of the children maps events to parents and ignores the operator's own echo."""

from __future__ import annotations

import random
from typing import Any

import pytest
from support.examples import example_sdd
from support.fake_cluster import FakeCluster

from warmgate.api import SpecDecodeDeploymentStatus
from warmgate.api.conditions import set_condition
from warmgate.api.constants import LABEL_NAME
from warmgate.kube.children import (
    OwnWrites,
    child_parent,
    child_version,
    parent_key,
)
from warmgate.reconcile.planning.evaluate import evaluate
from warmgate.reconcile.planning.planning_cache import PlanningCache
from warmgate.runtime import follower
from warmgate.runtime.follower import REMEMBER_SECONDS, Operator, StatusMemory
from warmgate.settings import Settings


def job(version: str, name: str = "p-warmup-1") -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "resourceVersion": version}
    return {"kind": "Job", "metadata": meta}


def test_a_childs_label_names_its_parent() -> None:
    long_name = "a" * 70  # the label value is shortened with a hash, as the children's labels
    assert child_parent("ns", {LABEL_NAME: parent_key("ns", long_name)[1]}) == parent_key(
        "ns", long_name
    )
    assert child_parent("ns", {}) is None


def test_only_the_version_the_operator_wrote_is_its_echo() -> None:
    writes = OwnWrites()
    writes.add("Job", job("7"))
    writes.add("Job", None)  # a 404 / 409 answer: nothing written
    assert not writes.echoes([child_version("MODIFIED", job("8"))])  # someone else's change
    assert not writes.echoes([child_version("DELETED", job("7"))])  # a deletion is news
    assert not writes.echoes([child_version("ADDED", job("7")), None])  # one of them is news
    writes.add("Job", job("7"))
    assert writes.echoes([child_version("ADDED", job("7"))])
    assert not writes.echoes([child_version("ADDED", job("7"))])  # consumed once


def test_the_own_writes_are_bounded() -> None:
    writes = OwnWrites(kept=2)
    for version in ("1", "2", "3"):
        writes.add("Job", job(version))
    assert not writes.consume("Job", "ns", "p-warmup-1", "1")
    assert writes.consume("Job", "ns", "p-warmup-1", "3")


def test_the_written_status_stands_in_until_the_watch_brings_it_back() -> None:
    memory = StatusMemory()
    sdd = example_sdd("minimal-ngram", namespace="ns", name="p", uid="u")
    written = SpecDecodeDeploymentStatus(observed_generation=1)
    memory.remember("u", written)
    assert memory.latest(sdd)[0].status == written  # the body is older than the write
    caught_up = sdd.model_copy(update={"status": written})
    assert memory.latest(caught_up)[0] is caught_up
    assert memory.latest(sdd)[0] is sdd  # forgotten once the body caught up


def test_with_versions_only_a_body_the_write_replaced_takes_the_written_status() -> None:
    """Issue 23 item 9: the write was made at version 7 (after the sync's own notice at 6);
    the watch still shows 6 or 7: the write stands in, with its version 8 to write at next.
    A body at any other version is someone else's newer write: it is taken as it is."""
    memory = StatusMemory()
    sdd = example_sdd("minimal-ngram", namespace="ns", name="p", uid="u")
    written = SpecDecodeDeploymentStatus(observed_generation=1)
    memory.remember("u", written, "8", frozenset({"6", "7"}))
    body, version = memory.latest(sdd, "7")
    assert (body.status, version) == (written, "8")
    body, version = memory.latest(sdd, "6")
    assert (body.status, version) == (written, "8")
    newer = sdd.model_copy(update={"status": SpecDecodeDeploymentStatus(observed_generation=2)})
    assert memory.latest(newer, "9") == (newer, "9")  # another writer's: never overwritten
    assert memory.latest(sdd, "7") == (sdd, "7")  # and the memory is gone


def test_an_expired_status_is_dropped_at_the_next_write_of_any_object(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(follower.time, "monotonic", lambda: clock[0])
    memory = StatusMemory()
    memory.remember("u1", SpecDecodeDeploymentStatus(observed_generation=1))
    clock[0] += REMEMBER_SECONDS / 2
    memory.remember("u2", SpecDecodeDeploymentStatus(observed_generation=1))
    assert len(memory) == 2  # neither expired yet
    clock[0] += REMEMBER_SECONDS / 2 + 1
    memory.remember("u3", SpecDecodeDeploymentStatus(observed_generation=1))
    assert len(memory) == 2  # u1's expired; u1 is never synced again to drop it itself


def test_the_resync_is_jittered_and_shorter_while_a_runner_runs() -> None:
    random.seed(1)
    op = Operator(Settings(resync_seconds=300), FakeCluster(), PlanningCache(evaluate))
    delays = [op.resync_delay() for _ in range(50)]
    assert 240 <= min(delays) < max(delays) <= 360
    running = set_condition(None, "Warmed", "False", "WarmupRunning", "the runner runs")
    status = SpecDecodeDeploymentStatus(conditions=running)
    assert op.resync_delay(status) <= 18


def test_the_first_resync_spreads_over_a_whole_interval() -> None:
    random.seed(2)
    op = Operator(Settings(resync_seconds=100), FakeCluster(), PlanningCache(evaluate))
    firsts = [op.first_delay() for _ in range(200)]
    assert 20 <= min(firsts) < 40
    assert 100 < max(firsts) <= 120
