"""The plan pipeline's drafter stage (issue 16): status, runner plan and Warmed verdict."""

from __future__ import annotations

import json

import pytest
from support.examples import example_sdd
from support.resource_cases import SETTINGS, UID

from warmgate.api import DrafterWarmup
from warmgate.buckets.drafter.graphs import prove_drafter
from warmgate.buckets.drafter.sweep import SWEEP_FORMAT
from warmgate.contract.order import parse_plan
from warmgate.contract.summary import TerminationSummary
from warmgate.reconcile.planning.drafter_plan import SAMPLE_BUDGET_S, sweep_budget
from warmgate.reconcile.planning.evaluate import evaluate
from warmgate.reconcile.sync.warmup_state import WarmupSeen, evaluate_warmup
from warmgate.resources import desired_children

KEY = "gaudi2-tp1-" + "b" * 40


def test_the_sweep_budget_is_a_share_of_one_warmup_attempt() -> None:
    assert [sweep_budget(t) for t in (60, 3600, 7200, 86400)] == [9.0, 540.0, 1080.0, 1800.0]


def test_status_shows_target_and_drafter() -> None:
    result = evaluate(example_sdd("llama31-8b-seeds", uid=UID, namespace="llm"))
    assert result.evaluation is not None
    drafter = result.evaluation.drafter
    assert result.plan is not None
    report = prove_drafter(result.plan, "eagle3")  # the plan warmgate warms, same scope
    assert drafter.runtime_shapes == len(report.unwarmed) > 0
    assert 0 < drafter.swept <= drafter.runtime_shapes
    message = result.coverage.message
    assert message.startswith("target: ")
    assert (
        f"drafter: {drafter.runtime_shapes} shapes the engine compiles at runtime, "
        f"{drafter.swept} driven by the warmup sweep ("
    ) in message
    summary = result.summary
    assert summary is not None
    assert (summary.drafter_shapes, summary.drafter_swept) == (
        drafter.runtime_shapes,
        drafter.swept,
    )


def test_the_estimate_includes_the_sweep() -> None:
    result = evaluate(example_sdd("llama31-8b-seeds", uid=UID, namespace="llm"))
    assert result.evaluation is not None
    assert result.summary is not None
    target = result.evaluation.cost(result.evaluation.effective).high_s
    sweep = result.evaluation.drafter.seconds[1]
    assert sweep > 0
    assert result.summary.estimated_warmup_seconds == round(target + sweep)


def test_ngram_has_no_drafter_fields_sweep_or_hook() -> None:
    result = evaluate(example_sdd("minimal-ngram", uid=UID, namespace="llm"))
    assert result.summary is not None
    assert (result.summary.drafter_shapes, result.summary.drafter_swept) == (None, None)
    assert "drafter" not in result.coverage.message
    to_run = result.to_run(kv_blocks=None)
    assert to_run is not None
    assert to_run.drafter_sweep is None
    runner = desired_children(
        example_sdd("minimal-ngram", uid=UID, namespace="llm"), to_run, SETTINGS
    ).runner_plan
    assert runner["drafter_hook"] == {"enabled": False, "required": False}
    assert "drafter_sweep" not in runner
    assert "sweep_s" not in runner["timeouts"]


def test_the_runner_plan_carries_the_sweep_hook_replay_and_deadline() -> None:
    sdd = example_sdd("llama31-8b-seeds", uid=UID, namespace="llm")
    to_run = evaluate(sdd).to_run(kv_blocks=None)
    assert to_run is not None
    assert to_run.drafter_sweep is not None
    doc = desired_children(sdd, to_run, SETTINGS).runner_plan
    plan = parse_plan(doc)  # the runner's own validator accepts it
    assert doc["drafter_sweep"]["format"] == SWEEP_FORMAT
    assert plan.drafter_hook.enabled
    # verification Required (the default): the runner fails closed without the hook (issue 33)
    assert (plan.drafter_hook.required, plan.drafter_hook.accept_missing) == (True, False)
    sweep = plan.drafter_sweep
    assert sweep is not None
    # the direct warmup covers the set: the sweep is its sample (issue 33)
    assert sweep_budget(sdd.spec.warmup.timeout_seconds) == 540.0
    assert sweep.budget_s == SAMPLE_BUDGET_S == 120.0
    assert doc["drafter_warmup"]["shapes"]
    assert plan.timeouts.sweep_s == sweep.budget_s * 1.5
    t = plan.timeouts
    assert t.facts_s + t.startup_s + t.probe_s + t.sweep_s + t.stop_grace_s <= t.total_s + 1e-6
    replays = [s.name for s in plan.probe.steps if s.name.startswith("replay-")]
    assert replays == [f"replay-{s.name}" for s in sweep.steps]


def test_an_unmodelled_drafter_gets_no_hook_and_says_why() -> None:
    """The example opts out (BestEffort): the target's plan warms, the drafter unverified."""
    sdd = example_sdd("llama31-8b-lin-contiguous-pa", uid=UID, namespace="llm")
    assert sdd.spec.warmup.drafter.verification == "BestEffort"
    result = evaluate(sdd)
    assert "drafter: eagle: not modelled: prompt batches" in result.coverage.message
    assert result.refused is None
    to_run = result.to_run(kv_blocks=None)
    assert to_run is not None
    doc = desired_children(sdd, to_run, SETTINGS)
    assert doc.runner_plan["drafter_hook"]["enabled"] is False


def test_an_unmodelled_drafter_is_refused_when_verification_is_required() -> None:
    """Issue 33: no warmup can give evidence for a drafter the planner cannot model, so with
    verification Required (the default) the plan is refused before any Gaudi time is spent."""
    sdd = example_sdd("llama31-8b-lin-contiguous-pa", uid=UID, namespace="llm")
    warmup = sdd.spec.warmup.model_copy(update={"drafter": DrafterWarmup()})
    sdd = sdd.model_copy(update={"spec": sdd.spec.model_copy(update={"warmup": warmup})})
    result = evaluate(sdd)
    assert result.refused is not None
    assert (result.refused.status, result.refused.reason) == ("False", "DrafterUnverified")
    assert "eagle: not modelled: prompt batches" in result.refused.message
    assert "spec.warmup.drafter.verification is Required" in result.refused.message
    assert result.to_run(kv_blocks=None) is None
    # ngram has no drafter graphs: nothing to refuse
    assert evaluate(example_sdd("minimal-ngram", uid=UID, namespace="llm")).refused is None


def _job_with(summary: dict[str, object]) -> tuple[dict[str, object], list[dict[str, object]]]:
    template = {"spec": {"containers": [{"name": "warmup", "image": "vllm-gaudi:test"}]}}
    job = {
        "metadata": {"name": "w", "uid": "job-uid"},
        "spec": {"template": template},
        "status": {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1},
    }
    message = json.dumps({"v": 3, "outcome": "verified", "code": 0, "key": KEY, **summary})
    terminated = {"exitCode": 0, "message": message}
    owner = {"kind": "Job", "name": "w", "uid": "job-uid", "controller": True}
    labels = {"batch.kubernetes.io/controller-uid": "job-uid"}
    pod = {
        "metadata": {"ownerReferences": [owner], "labels": labels},
        "spec": template["spec"],
        "status": {
            "phase": "Succeeded",
            "containerStatuses": [{"name": "warmup", "state": {"terminated": terminated}}],
        },
    }
    return job, [pod]


@pytest.mark.parametrize(
    ("drafter", "seen", "fields", "text"),
    [
        (
            {"hook": "attached", "verified": True, "expected": 77, "driven": 77, "probe": 0},
            WarmupSeen(),
            (77, True, 0),
            "; drafter: 77 of 77 planned graphs driven in the sweep, none compiled in the probe",
        ),
        (
            {"hook": "attached", "verified": True, "expected": 77, "driven": 75, "missing": 2},
            WarmupSeen(holes_allowed=True),
            (75, True, 2),
            "; drafter: 75 of 77 planned graphs driven in the sweep (2 never driven: accepted by "
            "spec.buckets.coverage.complete=false), none compiled in the probe",
        ),
        (
            {"hook": "not-attached", "verified": False, "expected": 77, "driven": 0, "probe": 0},
            WarmupSeen(drafter_required=False),
            (0, False, 77),
            "; drafter not verified, accepted by spec.warmup.drafter.verification=BestEffort: "
            "the compile hook could not tell: 77 of 77 planned drafter shapes without evidence",
        ),
    ],
)
def test_warmed_reports_the_drafter_check(
    drafter: dict[str, object], seen: WarmupSeen, fields: tuple[int, bool, int], text: str
) -> None:
    job, pods = _job_with({"kv_blocks": 9, "drafter": drafter})
    state = evaluate_warmup(job, pods, KEY, seen)
    assert state.verdict.status == "True"
    assert text in state.verdict.message
    warmup = state.summary
    assert (warmup.drafter_driven, warmup.drafter_verified, warmup.drafter_unverified) == fields


def test_a_summary_without_drafter_leaves_the_fields_unset() -> None:
    job, pods = _job_with({"kv_blocks": 9})
    state = evaluate_warmup(job, pods, KEY)
    assert (state.summary.drafter_driven, state.summary.drafter_verified) == (None, None)
    assert "drafter" not in state.verdict.message
    odd = TerminationSummary.from_json(json.dumps({"outcome": "verified", "drafter": {"hook": 3}}))
    assert odd is not None
    assert odd.drafter is None
