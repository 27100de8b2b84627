"""The planning stage maps a spec to a plan, a proof and a status, following the spec's policy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from support.examples import example_sdd

from warmgate.api import ManifestError, get_condition
from warmgate.buckets import plan_buckets
from warmgate.buckets.coverage.prove import prove_coverage
from warmgate.reconcile.planning.evaluate import evaluate
from warmgate.reconcile.planning.model_size import model_size
from warmgate.reconcile.sync.status_builder import build_status

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("model", "parameters", "params_b", "source"),
    [
        ("meta-llama/Llama-3.3-70B-Instruct", None, 70.6, "known model"),
        ("mistralai/Mixtral-8x7B-v0.1", None, 46.7, "known model"),  # not 7B: every expert
        ("deepseek-ai/DeepSeek-V3", None, 671.0, "known model"),  # no size in the name
        ("org/Some-70B-Finetune", None, 8.0, "assumed; set spec.model.parameters"),  # no regex
        ("org/Some-70B-Finetune", "70B", 70.0, "spec.model.parameters"),
        ("deepseek-ai/DeepSeek-V3", "685B", 685.0, "spec.model.parameters"),  # the spec wins
        ("org/tiny", "500M", 0.5, "spec.model.parameters"),
    ],
)
def test_the_model_size_comes_from_the_spec_or_a_known_model_never_the_name(
    model: str, parameters: str | None, params_b: float, source: str
) -> None:
    sdd = example_sdd("minimal-ngram", model={"name": model, "parameters": parameters})
    size = model_size(sdd)
    assert (size.params_b, size.source) == (params_b, source)


def test_the_estimate_says_what_it_assumed() -> None:
    known = evaluate(example_sdd("minimal-ngram"))
    assert known.coverage.message.endswith("7.62B parameters (known model)")
    unknown = evaluate(example_sdd("minimal-ngram", model={"name": "org/private-model"}))
    assert "8B parameters (assumed; set spec.model.parameters)" in unknown.coverage.message
    large = evaluate(example_sdd("minimal-ngram", model={"name": "x/y", "parameters": "671B"}))
    assert unknown.summary is not None
    assert large.summary is not None
    assert (large.summary.estimated_warmup_seconds or 0) > (
        unknown.summary.estimated_warmup_seconds or 0
    )


@pytest.mark.parametrize("parameters", ["0B", "8", "8b", "-1B", "1.2345B", "12345678B"])
def test_a_bad_parameter_count_is_refused_naming_the_field(parameters: str) -> None:
    with pytest.raises(ManifestError, match=r"spec\.model\.parameters"):
        example_sdd("minimal-ngram", model={"name": "x/y", "parameters": parameters})


def test_holes_are_closed_and_the_completed_plan_is_proven() -> None:
    sdd = example_sdd("minimal-ngram")
    result = evaluate(sdd)
    assert result.plan is not None
    assert result.coverage.status == "True"
    assert result.summary is not None
    assert (result.summary.extra_buckets or 0) > 0
    assert prove_coverage(result.plan, partial_drafts=True).covered
    engine_plan = plan_buckets(result.plan.config.model_copy(update={"bucket_file": None}))
    assert set(engine_plan.decode_buckets) <= set(result.plan.decode_buckets)
    assert result.summary.hash == result.plan.digest
    assert result.plan.digest != engine_plan.digest


def test_the_status_says_how_completion_chose_and_what_decode_padding_costs() -> None:
    """Issue 25 items 6, 7: completedBy, the padding figures of both plans, and the refinement's
    buckets, which the maxExtraBuckets cap does not count (serving speed is the default)."""
    served = evaluate(example_sdd("minimal-ngram"))
    summary = served.summary
    assert summary is not None
    assert summary.completed_by == "Greedy"  # mns 256: too large for the exact optimum
    assert summary.decode_padding_engine == pytest.approx(1.152, abs=1e-3)
    assert summary.decode_padding is not None
    assert summary.decode_padding <= 1.05 * summary.decode_padding_engine + 1e-3
    assert (summary.padding_buckets or 0) > 0
    assert (summary.extra_buckets or 0) > 64 >= summary.extra_buckets - summary.padding_buckets
    assert "mean decode KV padding 1.21x (engine plan 1.15x, coverage alone 2.58x)" in (
        served.coverage.message
    )
    coverage = {"partialDrafts": True, "optimizeFor": "WarmupTime"}
    cheap = evaluate(example_sdd("minimal-ngram", buckets={"coverage": coverage}))
    assert cheap.summary is not None
    assert (cheap.summary.decode_padding, cheap.summary.padding_buckets) == (2.576, 0)
    assert "optimizeFor WarmupTime keeps the cheapest plan" in cheap.coverage.message


def test_states_no_warmup_can_compile_are_reported_and_the_rest_is_warmed() -> None:
    """eagle3 k=2, mml = mbt = 8192: a 8190-token chunk after one cached block pads to
    (1, 8192, 1), whose warmup dummy is cut to 0 context blocks; completion's plan covers every
    other state, so it is warmed and CoverageProven says why the one state is left."""
    sdd = example_sdd("llama31-8b-eagle3-gaudi2")
    result = evaluate(sdd)
    assert (result.coverage.status, result.coverage.reason) == ("False", "UnwarmableShapes")
    assert not result.stalled
    assert result.may_warm
    assert result.evaluation is not None
    assert result.plan is result.evaluation.completed
    assert result.summary is not None
    assert (result.summary.extra_buckets or 0) > 0
    assert result.summary.uncovered_count == 1
    assert result.summary.uncovered_shapes == ["('prompt', 1, 8192, 1)"]
    message = result.coverage.message
    assert message.startswith("target: Completed the plan with ")
    assert (
        "1 of 1,835,072 reachable states in 1 shape(s) compile at runtime whatever the plan, e.g. "
        "('prompt', 1, 8192, 1) for prompt state (1, 8190, 1): the engine's warmup dummy of any "
        "bucket serving it runs another bucket (its context is cut to 0 blocks to fit "
        "maxModelLen and its requests are 2 tokens short, left for the draft model)"
    ) in message
    assert "numSpeculativeTokens=1 leaves none at the top query row" in message
    assert "warmup " in message  # the estimate: the plan is warmed
    to_run = result.to_run(kv_blocks=None)
    assert to_run is not None
    assert to_run.known_unwarmable == (("prompt", 1, 8192, 1),)
    status = build_status(sdd, result, at=T0)
    stalled = get_condition(status.conditions, "Stalled")
    assert stalled is None or stalled.status == "False"
    assert status.phase != "Failed"


def test_unwarmable_states_over_the_cap_stall_as_any_completion() -> None:
    sdd = example_sdd("llama31-8b-eagle3-gaudi2", buckets={"coverage": {"maxExtraBuckets": 1}})
    result = evaluate(sdd)
    assert result.coverage.reason == "ExtraBucketsCapped"
    assert result.stalled
    assert result.to_run(kv_blocks=None) is None


def test_complete_false_reports_holes_and_keeps_the_engine_plan() -> None:
    sdd = example_sdd("llama31-8b-eagle3-gaudi2", buckets={"coverage": {"complete": False}})
    result = evaluate(sdd)
    assert (result.coverage.status, result.coverage.reason) == ("False", "UncoveredShapesAllowed")
    assert not result.stalled
    assert result.summary.extra_buckets == 0
    assert result.summary is not None
    assert len(result.summary.uncovered_shapes or []) == 20  # listed: the status stays small
    assert (result.summary.uncovered_count or 0) > 20


def test_completion_beyond_the_cap_stalls() -> None:
    sdd = example_sdd("llama31-8b-eagle3-gaudi2", buckets={"coverage": {"maxExtraBuckets": 1}})
    result = evaluate(sdd)
    assert result.coverage.reason == "ExtraBucketsCapped"
    assert result.stalled
    status = build_status(sdd, result, at=T0)
    stalled = get_condition(status.conditions, "Stalled")
    assert stalled is not None
    assert stalled.status == "True"
    assert status.phase == "Failed"


def test_transition_time_moves_only_when_a_status_changes() -> None:
    sdd = example_sdd("llama31-8b-seeds")
    first = build_status(sdd, evaluate(sdd), at=T0)
    again = build_status(
        sdd.model_copy(update={"status": first}), evaluate(sdd), at=T0 + timedelta(hours=1)
    )
    assert first == again  # a re-reconcile of an unchanged object writes nothing new
    broken = example_sdd(
        "llama31-8b-seeds", buckets={"seeds": {"prompt": [[1, 128, 0]], "decode": [[16, 1, 8]]}}
    )
    failed = build_status(
        broken.model_copy(update={"status": first}), evaluate(broken), at=T0 + timedelta(hours=2)
    )
    planned = get_condition(failed.conditions, "BucketsPlanned")
    ready = get_condition(failed.conditions, "Ready")
    assert planned is not None
    assert planned.reason == "PlanFailed"
    assert planned.last_transition_time == T0 + timedelta(hours=2)
    assert ready is not None
    assert ready.last_transition_time == T0  # still False: unchanged
    assert first.plan is not None
    assert failed.plan is None  # status.plan describes this generation, which has no plan


def test_prefix_caching_off_tightens_the_proof_and_reaches_the_engine() -> None:
    from warmgate.resources.vllm_engine import engine_args

    engine = {
        "maxModelLen": 32768,
        "maxNumSeqs": 128,
        "maxNumBatchedTokens": 8192,
        "numGpuBlocks": 4000,
    }
    shared = example_sdd("llama31-8b-eagle3-gaudi2", engine=engine)
    private = example_sdd(
        "llama31-8b-eagle3-gaudi2", engine={**engine, "enablePrefixCaching": False}
    )
    on, off = evaluate(shared), evaluate(private)
    assert on.plan is not None
    assert off.plan is not None
    # Without shared blocks a step holds at most numGpuBlocks blocks: fewer reachable states,
    # so completion never adds buckets for block counts the cache cannot hold.
    assert max(b[2] for b in off.plan.decode_buckets) < max(b[2] for b in on.plan.decode_buckets)
    assert "--no-enable-prefix-caching" in engine_args(private)
    assert not any("prefix-caching" in a for a in engine_args(shared))
