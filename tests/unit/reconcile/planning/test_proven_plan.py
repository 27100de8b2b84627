"""One plan pipeline: the operator, `warmgate plan` and `warmgate demo` reach the same verdict."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.examples import example_doc, example_sdd

from warmgate.api import engine_shape_config
from warmgate.cli import main
from warmgate.cli.demo import _print_plan
from warmgate.reconcile.planning.evaluate import evaluate
from warmgate.reconcile.planning.model_size import model_size
from warmgate.reconcile.planning.proven_plan import PlanPolicy, evaluate_plan, total_buckets

EAGLE3 = "llama31-8b-eagle3-gaudi2"


def _manifest(tmp_path: Path, **spec: object) -> Path:
    path = tmp_path / "sdd.yaml"
    path.write_text(yaml.safe_dump(example_doc(EAGLE3, **spec)))
    return path


def _cli(capsys: pytest.CaptureFixture[str], path: Path) -> dict[str, object]:
    main(["plan", str(path), "--output", "json"])
    data: dict[str, object] = json.loads(capsys.readouterr().out)
    return data


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"buckets": {"coverage": {"maxExtraBuckets": 1}}},
        {"buckets": {"coverage": {"complete": False}}},
        {
            "engine": {
                "maxModelLen": 32768,
                "maxNumSeqs": 128,
                "maxNumBatchedTokens": 8192,
                "numGpuBlocks": 4000,
                "enablePrefixCaching": False,
            }
        },
    ],
    ids=["completed", "capped", "allowed", "no-prefix-caching"],
)
def test_the_operator_and_the_cli_warm_the_same_plan(
    spec: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = evaluate(example_sdd(EAGLE3, **spec))
    data = _cli(capsys, _manifest(tmp_path, **spec))
    effective = data["effective"]
    assert isinstance(effective, dict)
    assert result.summary is not None
    assert effective["digest"] == result.summary.hash
    assert effective["covered"] == result.coverage.holds


def test_the_demo_prints_the_operators_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo once re-planned without the cap and printed a completion the operator refused."""
    sdd = example_sdd(EAGLE3, buckets={"coverage": {"maxExtraBuckets": 1}})
    _print_plan(sdd)
    out = capsys.readouterr().out
    assert "completed plan" not in out
    assert "CoverageProven=False ExtraBucketsCapped" in out


def test_extra_buckets_are_what_completion_added() -> None:
    sdd = example_sdd("minimal-ngram")
    evaluation = evaluate_plan(
        engine_shape_config(sdd), PlanPolicy.of(sdd), model_size(sdd).profile
    )
    assert evaluation.completed is not None
    added = total_buckets(evaluation.completed) - total_buckets(evaluation.engine_plan)
    assert evaluation.extra_buckets == added > 0
    assert evaluation.completion_applies
    assert evaluation.effective is evaluation.completed
    assert evaluation.effective_report.covered
    assert evaluation.covered
    assert evaluation.unwarmable is None
    assert evaluation.known_unwarmable == []


def test_an_unwarmable_completion_is_the_plan_warmed_with_its_gaps_known() -> None:
    """UnwarmableError: its plan is the completion (within the cap), its proof names the left
    states, and the pipeline proves nothing else uncovered."""
    sdd = example_sdd(EAGLE3)
    config, model = engine_shape_config(sdd), model_size(sdd).profile
    evaluation = evaluate_plan(config, PlanPolicy.of(sdd), model)
    assert evaluation.completion_error is None
    assert evaluation.unwarmable is not None
    assert evaluation.completion_applies
    assert evaluation.effective is evaluation.completed
    assert not evaluation.covered
    report = evaluation.effective_report
    assert report is evaluation.unwarmable
    assert [g.engine_config for g in evaluation.known_unwarmable] == [("prompt", 1, 8192, 1)]
    assert report.uncovered_states == 1 < evaluation.report.uncovered_states
    capped = evaluate_plan(config, replace(PlanPolicy.of(sdd), max_extra_buckets=1), model)
    assert capped.capped
    assert capped.known_unwarmable == []
    assert capped.effective is capped.engine_plan


def test_the_policy_is_the_spec_s() -> None:
    coverage = {
        "partialDrafts": False,
        "complete": False,
        "maxExtraBuckets": 5,
        "optimizeFor": "WarmupTime",
    }
    sdd = example_sdd(EAGLE3, buckets={"coverage": coverage})
    engine = {**sdd.spec.engine.model_dump(by_alias=True, exclude_none=True)}
    assert PlanPolicy.of(sdd) == PlanPolicy(
        partial_drafts=True,  # structured outputs are served by default (issue 25)
        prefix_caching=None,
        complete=False,
        max_extra_buckets=5,
        method="eagle3",
        sweep_budget_s=540.0,  # 15 % of the default warmup.timeoutSeconds 3600
        optimize_for="WarmupTime",
        structured_outputs=True,
    )
    plain = example_sdd(
        EAGLE3, buckets={"coverage": coverage}, engine={**engine, "structuredOutputs": False}
    )
    assert PlanPolicy.of(plain).partial_drafts is False


@pytest.mark.parametrize(
    "spec",
    [
        {"engine": {"maxModelLen": 16384, "maxNumSeqs": 128, "maxNumBatchedTokens": 8192}},
        {"engine": {"maxModelLen": 8192, "maxNumSeqs": 64}, "buckets": {"strategy": "pad"}},
        {"engine": {"maxModelLen": 32768, "maxNumSeqs": 256, "maxNumBatchedTokens": 8192}},
    ],
    ids=["lin16k", "pad8k", "lin32k"],
)
def test_the_size_estimate_brackets_the_plan(spec: dict[str, Any]) -> None:
    """Issue 11 item 5: the count that refuses huge plans, without generating them, is close
    to what generating them gives (the long-context edge rule moves a few prompt buckets)."""
    from support.examples import example_sdd

    from warmgate.api import engine_shape_config
    from warmgate.buckets import plan_buckets
    from warmgate.reconcile.planning.proven_plan import plan_size, total_buckets

    spec = {"buckets": {"strategy": "lin"}, **spec}
    config = engine_shape_config(example_sdd("minimal-ngram", **spec))
    size, plan = plan_size(config), plan_buckets(config)
    assert size.decode_seeds == len(plan.seed_decode_buckets)
    assert 0.97 * size.low <= total_buckets(plan) <= 1.03 * size.high
