"""Fail closed on the drafter (issue 33 item 3): the Warmed verdict from the runner's drafter
evidence under spec.warmup.drafter.verification (Required by default, or BestEffort)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.examples import example_sdd
from support.resource_cases import UID

from warmgate.api import DrafterWarmup, SpecDecodeDeployment
from warmgate.api.status import Condition, WarmupSummary
from warmgate.reconcile.planning.evaluate import evaluate
from warmgate.reconcile.sync.warmup_state import WarmupSeen, evaluate_warmup, remembered
from warmgate.resources import cache_key

KEY = "gaudi2-tp1-" + "b" * 40
TEMPLATE: dict[str, Any] = {"spec": {"containers": [{"name": "warmup", "image": "vllm:t"}]}}
CODES = {"verified": 0, "unwarmed_shapes": 3, "drafter_unverified": 11, "cpu_engine": 12}
CPU_ENGINE = {"kind": "cpu", "vllm": "0.32.0"}


def summary_v7(outcome: str, drafter: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The runner's version-7 summary for KEY: ``outcome``, its code, ``drafter``'s counts."""
    return {
        "v": 7,
        "outcome": outcome,
        "code": CODES[outcome],
        "key": KEY,
        **extra,
        "drafter": drafter,
    }


def ended(summary: dict[str, Any], *, ok: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A Job that completed (``ok``) or failed, and its one trusted Pod with ``summary``."""
    kind = "Complete" if ok else "Failed"
    job = {
        "metadata": {"name": "w", "uid": "job-uid"},
        "spec": {"template": TEMPLATE},
        "status": {
            "conditions": [{"type": kind, "status": "True"}],
            "succeeded" if ok else "failed": 1,
        },
    }
    terminated = {"exitCode": 0 if ok else 11, "message": json.dumps(summary)}
    pod = {
        "metadata": {
            "ownerReferences": [{"kind": "Job", "uid": "job-uid", "controller": True}],
            "labels": {"batch.kubernetes.io/controller-uid": "job-uid"},
        },
        "spec": TEMPLATE["spec"],
        "status": {
            "phase": "Succeeded" if ok else "Failed",
            "containerStatuses": [{"name": "warmup", "state": {"terminated": terminated}}],
        },
    }
    return job, [pod]


def blind(cause: str, detail: str) -> dict[str, Any]:
    """The drafter counts of a run whose hook could not see the drafter: 77 planned graphs."""
    return {
        "hook": "attached" if cause == "proposer-not-found" else "not-attached",
        "verified": False,
        "expected": 77,
        "driven": 0,
        "missing": 0,
        "probe": 0,
        "gaps": 0,
        "unverified": 77,
        "cause": cause,
        "detail": detail,
    }


CAUSES = [
    ("plugin-not-loaded", "", "the engine loaded no compile hook (vLLM did not load the plugin)"),
    (
        "proposer-not-found",
        "LookupError: hpu_eagle.HpuEagleProposer.propose missing",
        "the compile hook found no drafter proposer to attach to (class or method not found) "
        "(LookupError: hpu_eagle.HpuEagleProposer.propose missing)",
    ),
    (
        "metric-unreadable",
        "graph_compilation metric failed: RuntimeError: x",
        "Habana's graph_compilation metric could not be read (graph_compilation metric failed: "
        "RuntimeError: x)",
    ),
]


@pytest.mark.parametrize(("cause", "detail", "named"), CAUSES)
def test_a_drafter_unverified_run_is_not_warmed_and_names_what_is_missing(
    cause: str, detail: str, named: str
) -> None:
    summary = summary_v7(
        "drafter_unverified", blind(cause, detail), reason="drafter: not verified: ..."
    )
    state = evaluate_warmup(*ended(summary, ok=False), KEY)
    assert (state.verdict.status, state.verdict.reason) == ("False", "DrafterUnverified")
    assert state.verdict.message == (
        f"Job w: drafter not verified: {named}: 77 of 77 planned drafter shapes without "
        "evidence; spec.warmup.drafter.verification is Required (BestEffort would serve without "
        "it)"
    )
    assert state.stalled
    assert (state.summary.drafter_driven, state.summary.drafter_verified) == (0, False)


def test_a_verified_summary_without_drafter_evidence_is_not_warmed_either() -> None:
    """The operator applies the rule itself: a runner that let it pass (an older runner, whose
    plan did not require the hook) does not make the object Warmed under Required."""
    summary = {"v": 6, "outcome": "verified", "code": 0, "key": KEY}
    summary["drafter"] = {"hook": "not-attached", "verified": False, "expected": 77}
    state = evaluate_warmup(*ended(summary, ok=True), KEY)
    assert (state.verdict.status, state.verdict.reason) == ("False", "DrafterUnverified")
    assert "77 of 77 planned drafter shapes without evidence" in state.verdict.message
    assert "the runner's summary said verified" in state.verdict.message


def test_best_effort_is_warmed_with_the_message_and_the_counts() -> None:
    summary = summary_v7(
        "verified",
        blind("metric-unreadable", "graph_compilation metric failed: RuntimeError: x"),
        kv_blocks=9,
    )
    state = evaluate_warmup(*ended(summary, ok=True), KEY, WarmupSeen(drafter_required=False))
    assert (state.verdict.status, state.verdict.reason) == ("True", "WarmupSucceeded")
    assert (
        "; drafter not verified, accepted by spec.warmup.drafter.verification=BestEffort: "
        "Habana's graph_compilation metric could not be read (graph_compilation metric failed: "
        "RuntimeError: x): 77 of 77 planned drafter shapes without evidence"
    ) in state.verdict.message
    warmup = state.summary
    assert (warmup.drafter_driven, warmup.drafter_verified, warmup.drafter_unverified) == (
        0,
        False,
        77,
    )


def test_a_verified_drafter_counts_nothing_unverified() -> None:
    drafter = {"hook": "attached", "verified": True, "expected": 77, "driven": 77}
    summary = summary_v7("verified", drafter)
    state = evaluate_warmup(*ended(summary, ok=True), KEY)
    assert (state.verdict.status, state.summary.drafter_unverified) == ("True", 0)


def test_shapes_never_reached_fail_the_warmup_and_are_counted() -> None:
    """A planned shape never reached is an unwarmed shape of the run (named); the message
    also counts the drafter's shapes without evidence."""
    drafter = {
        "hook": "attached",
        "verified": False,
        "expected": 77,
        "driven": 76,
        "missing": 1,
        "unverified": 1,
        "cause": "shapes-missing",
    }
    graph = "Drafter graph ('decode', 8, 1, 8) planned for the sweep never ran in it"
    summary = summary_v7("unwarmed_shapes", drafter, reason=graph, unwarmed=[graph])
    state = evaluate_warmup(*ended(summary, ok=False), KEY)
    assert (state.verdict.status, state.verdict.reason) == ("False", "WarmupFailed")
    assert graph in state.verdict.message
    assert (
        "drafter not verified: planned shapes were never reached in the warmup: 1 of 77 "
        "planned drafter shapes without evidence"
    ) in state.verdict.message


def test_a_cpu_engine_counts_every_planned_drafter_shape_as_unverified() -> None:
    """acceptCPUEngine is the explicit opt-out of every Gaudi graph's verification: Required
    does not turn a CPU engine's run into a failure; it says the drafter was not verified."""
    summary = summary_v7(
        "cpu_engine",
        blind("hook-not-attached", "vllm_gaudi is not installed in this engine"),
        engine=CPU_ENGINE,
    )
    state = evaluate_warmup(*ended(summary, ok=True), KEY, WarmupSeen(accept_cpu=True))
    assert (state.verdict.status, state.verdict.reason) == ("True", "CPUEngine")
    assert "drafter: 77 planned drafter shapes not verified" in state.verdict.message
    assert state.summary.drafter_unverified == 77


def test_a_record_warmed_without_drafter_evidence_is_no_record_under_required() -> None:
    """A status an operator before issue 33 wrote (Warmed=True, the hook not attached) is not
    trusted under Required: the plan is warmed again. BestEffort keeps it."""
    warmed = Condition(
        type="Warmed",
        status="True",
        reason="WarmupSucceeded",
        message="...; drafter not verified",
        lastTransitionTime="2026-12-01T00:00:00Z",
    )
    summary = WarmupSummary(cache_key=KEY, drafter_verified=False)
    assert remembered(warmed, summary, KEY, None) is None
    assert remembered(warmed, summary, KEY, None, drafter_required=False) is not None
    good = summary.model_copy(update={"drafter_verified": True})
    assert remembered(warmed, good, KEY, None) is not None


def best_effort(sdd: SpecDecodeDeployment) -> SpecDecodeDeployment:
    warmup = sdd.spec.warmup.model_copy(
        update={"drafter": DrafterWarmup(verification="BestEffort")}
    )
    return sdd.model_copy(update={"spec": sdd.spec.model_copy(update={"warmup": warmup})})


def test_best_effort_has_its_own_cache_key_for_draft_models_only() -> None:
    """A BestEffort verdict may stand without drafter evidence: it is never a Required plan's
    record. ngram has no drafter: its key does not change."""
    seeds = example_sdd("llama31-8b-seeds", uid=UID, namespace="llm")
    plan = evaluate(seeds).to_run(kv_blocks=None)
    assert plan is not None
    assert cache_key(seeds, plan.buckets) != cache_key(best_effort(seeds), plan.buckets)
    ngram = example_sdd("minimal-ngram", uid=UID, namespace="llm")
    plan = evaluate(ngram).to_run(kv_blocks=None)
    assert plan is not None
    assert cache_key(ngram, plan.buckets) == cache_key(best_effort(ngram), plan.buckets)


def _incomplete() -> dict[str, object]:
    """The runner's counts when 1 shape of the direct warmup's set (181 with the sweep's 77)
    was neither warmed directly nor compiled in the sweep (issue 33)."""
    return {
        "hook": "attached",
        "verified": False,
        "expected": 77,
        "driven": 77,
        "missing": 0,
        "probe": 0,
        "gaps": 0,
        "planned": 181,
        "unverified": 1,
        "cause": "direct-warmup-incomplete",
        "detail": "",
    }


def test_a_direct_warmup_set_not_covered_is_not_warmed_naming_the_count() -> None:
    summary = summary_v7("drafter_unverified", _incomplete(), reason="drafter: ...")
    state = evaluate_warmup(*ended(summary, ok=False), KEY)
    assert (state.verdict.status, state.verdict.reason) == ("False", "DrafterUnverified")
    assert (
        "drafter not verified: planned shapes were neither warmed by the engine plugin's direct "
        "drafter warmup nor compiled in the sweep: 1 of 181 planned drafter shapes without "
        "evidence"
    ) in state.verdict.message
    assert state.summary.drafter_verified is False


def test_best_effort_with_the_direct_warmup_set_not_covered_is_warmed_with_the_counts() -> None:
    summary = summary_v7("verified", _incomplete(), kv_blocks=9)
    state = evaluate_warmup(*ended(summary, ok=True), KEY, WarmupSeen(drafter_required=False))
    assert (state.verdict.status, state.verdict.reason) == ("True", "WarmupSucceeded")
    assert (
        "; drafter not verified, accepted by spec.warmup.drafter.verification=BestEffort: "
        "planned shapes were neither warmed"
    ) in state.verdict.message
    assert "1 of 181 planned drafter shapes without evidence" in state.verdict.message
    assert (state.summary.drafter_verified, state.summary.drafter_unverified) == (False, 1)


def test_a_cpu_engine_counts_the_direct_warmup_set_too() -> None:
    """With a direct warmup in the plan, every planned shape (the sweep's and the direct set's,
    ``drafter.planned``) is what a CPU engine leaves unverified."""
    drafter = {**blind("hook-not-attached", "vllm_gaudi is not installed"), "planned": 181}
    summary = summary_v7("cpu_engine", drafter, engine=CPU_ENGINE)
    state = evaluate_warmup(*ended(summary, ok=True), KEY, WarmupSeen(accept_cpu=True))
    assert (state.verdict.status, state.verdict.reason) == ("True", "CPUEngine")
    assert "drafter: 181 planned drafter shapes not verified" in state.verdict.message
    assert state.summary.drafter_unverified == 181
