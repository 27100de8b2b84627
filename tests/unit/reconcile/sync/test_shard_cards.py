"""How many shards a sharded warmup's Job runs (issue 38): the free cards, kept with the Job."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from support.examples import example_path
from support.resource_cases import SETTINGS, make_case, planned

from warmgate.api import SpecDecodeDeployment
from warmgate.api.constants import ANNOTATION_SHARDS_ASKED
from warmgate.api.kube import Toleration
from warmgate.buckets.shard import max_shards
from warmgate.reconcile.sync.actions import Create
from warmgate.reconcile.sync.decide_warmup import decide_shards, kept_shards, warmup_jobs
from warmgate.reconcile.sync.observed import Observed
from warmgate.reconcile.sync.shard_cards import FreeCards, choose_shards, free_cards, pod_cards
from warmgate.reconcile.sync.subject import subject
from warmgate.resources import desired_children
from warmgate.resources.warmup_shards import planned_shards, shard_cap

EAGLE3 = "llama31-8b-eagle3-gaudi2"  # TP 1, a claim, nodeSelector gaudi2
GEN = "habana.ai/gaudi.generation"
NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def _sdd(shards: int | str = 4, tp: int = 1, **placement: Any) -> SpecDecodeDeployment:
    base = make_case(example_path(EAGLE3)).sdd
    warmup = base.spec.warmup.model_copy(update={"shards": shards})
    if placement:
        old = warmup.placement
        assert old is not None
        warmup = warmup.model_copy(update={"placement": old.model_copy(update=placement)})
    engine = base.spec.engine.model_copy(update={"tensor_parallel_size": tp})
    spec = base.spec.model_copy(update={"warmup": warmup, "engine": engine})
    return base.model_copy(update={"spec": spec})


def node(
    name: str,
    cards: int | None = 8,
    *,
    ready: bool = True,
    gen: str = "gaudi2",
    unschedulable: bool = False,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    allocatable = {"cpu": "64"} | ({"habana.ai/gaudi": str(cards)} if cards is not None else {})
    return {
        "metadata": {"name": name, "labels": {GEN: gen}},
        "spec": {"unschedulable": unschedulable, "taints": taints or []},
        "status": {
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    node_name: str | None, cards: int, phase: str = "Running", *, init: int = 0, limits: bool = True
) -> dict[str, Any]:
    part = "limits" if limits else "requests"
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {part: {"habana.ai/gaudi": str(cards)}}}]
    }
    if init:
        spec["initContainers"] = [{"name": "i", "resources": {"limits": {"habana.ai/gaudi": init}}}]
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": {"name": "p"}, "spec": spec, "status": {"phase": phase}}


def test_free_cards_count_what_pods_bound_to_each_node_hold() -> None:
    nodes = [
        node("a"),
        node("b", 4),
        node("cordoned", unschedulable=True),
        node("not-ready", ready=False),
        node("gaudi3", gen="gaudi3"),  # the warmup's nodeSelector asks for gaudi2
        node("tainted", taints=[{"key": "team", "value": "x", "effect": "NoSchedule"}]),
        node("soft", 2, taints=[{"key": "team", "effect": "PreferNoSchedule"}]),
        node("cpu-only", None),
    ]
    pods = [
        pod("a", 1),  # serving, say: its cards are never free
        pod("a", 1, "Pending"),  # bound, starting: holds its card
        pod("a", 1, limits=False),  # a request without a limit
        pod("a", 8, "Succeeded"),  # ended: holds nothing
        pod("b", 0, init=3),  # an init container's request counts when larger
        pod(None, 8, "Pending"),  # not bound: holds nothing yet
    ]
    assert free_cards(nodes, pods, _sdd()).nodes == (("a", 5), ("soft", 2), ("b", 1))


def test_a_tolerated_taint_counts_and_the_busiest_node_never_goes_negative() -> None:
    taint = {"key": "team", "value": "x", "effect": "NoSchedule"}
    toleration = Toleration.model_validate(
        {"key": "team", "operator": "Equal", "value": "x", "effect": "NoSchedule"}
    )
    nodes = [node("t", 4, taints=[taint]), node("full", 2)]
    pods = [pod("full", 3)]
    assert free_cards(nodes, pods, _sdd(tolerations=[toleration])).nodes == (("t", 4), ("full", 0))
    assert free_cards(nodes, pods, _sdd()).nodes == (("full", 0),)


def test_pod_cards_reads_requests_or_limits() -> None:
    assert pod_cards(pod("a", 2)) == 2
    assert pod_cards(pod("a", 2, limits=False)) == 2
    assert pod_cards({"spec": {"containers": [{"name": "c"}]}}) == 0


@pytest.mark.parametrize(
    ("ask", "free", "expect"),
    [
        # auto: what the best node fits, at most 8 (and what the plan allows)
        (("auto", 1), (("a", 5), ("b", 3)), (5, "spec.warmup.shards auto: 5 of at most 8 "
         "shards (5 free habana.ai/gaudi cards on a, 1 per shard)", False)),
        (("auto", 2), (("a", 5),), (2, "auto: 2 of at most 8", False)),
        (("auto", 1), (("a", 0),), (1, "auto: 1 of at most 8", False)),
        (("auto", 1), (), (1, "auto: 1 shard, no node the warmup may use has habana.ai/gaudi "
         "cards", True)),
        ((4, 1), (), (4, None, False)),  # no Gaudi node (yet): as asked, as before
        # explicit: as asked when it fits, else what fits (a Warning)
        ((4, 1), (("a", 8),), (4, None, False)),
        ((4, 1), (("a", 2),), (2, "spec.warmup.shards 4: 2 of 4 shards, the most that fit "
         "(2 free habana.ai/gaudi cards on a, 1 per shard)", True)),
        ((4, 2), (("a", 5),), (2, "2 of 4 shards", True)),
        # not read (RBAC off, or the read failed): explicit as asked, auto one process
        ((4, 1), None, (4, None, False)),
        (("auto", 1), None, (1, "auto: 1 shard, the free habana.ai/gaudi cards could not be "
         "read", True)),
    ],
)  # fmt: skip
def test_choose_shards(
    ask: tuple[int | str, int],
    free: tuple[tuple[str, int], ...] | None,
    expect: tuple[int, str | None, bool],
) -> None:
    (shards, tp), (count, note, warning) = ask, expect
    sdd = _sdd(shards, tp)
    plan = planned(sdd).buckets
    assert max_shards(plan) >= 8
    choice = choose_shards(sdd, shard_cap(sdd, plan), FreeCards(free) if free is not None else None)
    assert choice.count == count
    if note is None:
        assert choice.note is None
    else:
        assert choice.note is not None
        assert note in choice.note
    assert choice.warning == warning


def test_one_shard_asked_or_no_claim_reads_no_cards() -> None:
    plan = planned(_sdd()).buckets
    assert shard_cap(_sdd(1), plan) == 1
    base = _sdd("auto")
    cache = base.spec.warmup.cache.model_copy(update={"claim_template": None})
    warmup = base.spec.warmup.model_copy(update={"cache": cache})
    no_claim = base.model_copy(update={"spec": base.spec.model_copy(update={"warmup": warmup})})
    assert shard_cap(no_claim, plan) == 1
    assert choose_shards(no_claim, shard_cap(no_claim, plan), FreeCards((("a", 8),))).count == 1


def test_without_a_decision_explicit_counts_are_capped_and_auto_is_one() -> None:
    plan = planned(_sdd()).buckets
    assert planned_shards(_sdd(4), plan) == 4
    assert planned_shards(_sdd("auto"), plan) == 1
    assert planned_shards(_sdd("auto"), plan, 6) == 6
    assert planned_shards(_sdd(4), plan, 6) == 4  # never above what is asked


def _job_of(sdd: SpecDecodeDeployment, shards: int | None) -> dict[str, Any]:
    bundle = planned(sdd)
    if shards is not None:
        bundle = replace(bundle, shards=shards)
    job = desired_children(sdd, bundle, SETTINGS).warmup_job
    job["metadata"]["uid"] = "job-uid"
    job["metadata"]["creationTimestamp"] = "2026-12-05T11:00:00Z"
    return job


def _jobs(sdd: SpecDecodeDeployment, seen: Observed) -> list[dict[str, Any]]:
    return warmup_jobs(sdd.metadata.uid or "", seen)


def test_the_count_is_kept_with_the_job_while_the_ask_is_the_same() -> None:
    sdd = _sdd("auto")
    bundle = planned(sdd)
    key = desired_children(sdd, bundle, SETTINGS).cache_key
    job = _job_of(sdd, 3)
    assert job["spec"]["template"]["metadata"]["annotations"][ANNOTATION_SHARDS_ASKED] == "auto"
    seen = Observed(at=NOW, jobs=(job,))
    assert kept_shards(sdd, _jobs(sdd, seen), key) == 3
    # More cards free now: the Job keeps its 3 (the same name), nothing is read.
    to_run, event = decide_shards(sdd, seen, _jobs(sdd, seen), key, bundle)
    assert (to_run.shards, event) == (3, None)
    assert (
        desired_children(sdd, to_run, SETTINGS).warmup_job["metadata"]["name"]
        == (job["metadata"]["name"])
    )
    # What is asked changed (auto -> 4): decided again from the cards read for the new Job.
    asked_four = _sdd(4)
    assert kept_shards(asked_four, _jobs(asked_four, seen), key) is None
    read = Observed(at=NOW, jobs=(job,), free_cards=FreeCards((("a", 2),)), cards_read=True)
    to_run, event = decide_shards(asked_four, read, _jobs(asked_four, read), key, bundle)
    assert to_run.shards == 2
    assert event is not None
    assert (event.type, event.reason) == ("Warning", "ShardsReduced")
    assert "spec.warmup.shards 4: 2 of 4 shards" in event.message


def test_unsharded_jobs_keep_their_names() -> None:
    """shards 1 adds no annotation: every unsharded Job keeps its name."""
    job = _job_of(_sdd(1), None)
    annotations = job["spec"]["template"]["metadata"]["annotations"]
    assert ANNOTATION_SHARDS_ASKED not in annotations


def test_the_decision_event_is_posted_with_the_jobs_create() -> None:
    from warmgate.reconcile.planning.evaluate import evaluate
    from warmgate.reconcile.sync.decide_warmup import decide_warmup

    sdd = _sdd("auto")
    result = evaluate(sdd)
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "llama31-8b-eagle3-recipe-cache",
            "uid": "claim-uid",
            "ownerReferences": [{"controller": True, "uid": sdd.metadata.uid}],
        },
    }
    seen = Observed(
        at=NOW, claim=claim, configmaps=(), free_cards=FreeCards((("a", 3),)), cards_read=True
    )
    decision = decide_warmup(sdd, seen, SETTINGS, subject(sdd, result, seen))
    (create,) = [
        a for a in decision.actions if isinstance(a, Create) and a.manifest["kind"] == "Job"
    ]
    assert create.manifest["spec"]["completions"] == 3
    assert create.done is not None
    assert create.done.reason == "ShardsChosen"
    assert "auto: 3 of at most 8 shards (3 free habana.ai/gaudi cards on a" in create.done.message
