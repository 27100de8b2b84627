"""The drafter sweep: every step surely makes the drafter run its expected shapes.

"Surely" is checked against ``server_sim``: a simulated vLLM V1 scheduler and vllm-gaudi runner
whose drafter calls come from ``drafter_sim`` (the engine's call sequence), under adversarial
acceptance (all, none, alternating, random) and staggered arrival. The simulated server must also
never run a drafter shape the model does not list.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server_sim import ACCEPTS, accept_random, run_step

from warmgate.buckets import BucketPlan, BucketPlanError, EngineShapeConfig, plan_buckets
from warmgate.buckets.cost import estimate_sweep_step
from warmgate.buckets.drafter.graphs import engine_graph, prove_drafter
from warmgate.buckets.drafter.ramp import Ramp, RampOracle
from warmgate.buckets.drafter.sweep import REASONS, SWEEP_FORMAT, DrafterSweep, _greedy, plan_sweep
from warmgate.buckets.drafter.walk import DrafterWalk, Key
from warmgate.contract.schema import Fields
from warmgate.contract.sweepplan import SweepSpec, parse_sweep

ISSUE = EngineShapeConfig(
    max_num_seqs=8, max_model_len=4096, max_num_batched_tokens=2048, num_speculative_tokens=3
)


def _arrivals(n: int) -> list[list[int]]:
    """All at once; every other request one engine step late; only the last one late."""
    return [[0] * n, [i % 2 for i in range(n)], [0] * (n - 1) + [1]]


def _assert_sure(plan: BucketPlan, sweep: SweepSpec, runtime: set[Any]) -> None:
    accepts = [*ACCEPTS.values(), accept_random(7)]
    for step in sweep.steps:
        n = step.concurrency
        for arrivals in _arrivals(n):
            for accept in accepts:
                seen = run_step(
                    plan, n, step.prompt_tokens, step.max_tokens, accept=accept, arrivals=arrivals
                )
                assert set(step.expected) <= {engine_graph(key) for key in seen}, step.name
                assert seen <= runtime, step.name


def _planned(cfg: EngineShapeConfig, **kwargs: Any) -> tuple[BucketPlan, DrafterSweep, set[Any]]:
    plan = plan_buckets(cfg)
    report = prove_drafter(plan, "eagle3")
    return plan, plan_sweep(plan, report, **kwargs), {s.key for s in report.shapes}


def _sweep(cfg: EngineShapeConfig, **kwargs: Any) -> tuple[BucketPlan, SweepSpec, set[Any]]:
    plan, planned, runtime = _planned(cfg, **kwargs)
    return plan, planned.spec, runtime


def test_issue_config_steps_run_their_shapes_whatever_the_acceptance() -> None:
    plan, sweep, runtime = _sweep(ISSUE)
    assert sweep.driven == len(sweep.expected) == 77
    _assert_sure(plan, sweep, runtime)
    undriven = {graph for graph, _ in sweep.undriven}
    unwarmed = {s.engine_config for s in prove_drafter(plan, "eagle3").unwarmed}
    assert sweep.expected | undriven == unwarmed
    assert sweep.targets == len(unwarmed)
    assert not sweep.expected & undriven
    assert ("decode", 16, 1, 48) in sweep.expected  # the issue's call-1 shape
    assert ("decode", 4, 1, 16) in sweep.expected  # and its calls 2..3


def test_the_issue_burst_as_a_sweep_step() -> None:
    """3 requests of 300 tokens, max_tokens 200, k=3 (T = 4), budget 2048 - 3 * 4 = 2036.

    Prefill ends within F = 2 + ceil(900 / 2036) = 3 engine steps, so at the first all-3 decode
    step each request holds 300..300 + 4 * 3 tokens: S = 3 * 3 = 9 exactly. The fastest request
    needs ceil(199 / 4) = 50 decode steps, so the phase lasts while every request grows at least
    50 - 1 - 3 = 46 tokens (S >= 3 * ceil(347 / 128) = 9). S = 9 is the issue's state: the step
    surely runs (16, 1, 48) and (4, 1, 16).
    """
    plan = plan_buckets(ISSUE)
    oracle = RampOracle(plan, DrafterWalk(plan, prove_drafter(plan, "eagle3").space))
    ramp = oracle.ramp(3, 300, 200)
    assert ramp is not None
    assert (ramp.s_start, ramp.s_first, ramp.s_last, ramp.stride) == (9, 9, 9, 3)
    assert ramp.engine_steps == (51, 203)
    assert {("decode", (16, 1, 48)), ("decode", (4, 1, 16))} <= oracle.guaranteed(ramp)
    seen = run_step(plan, 3, 300, 200, accept=ACCEPTS["split"], arrivals=[0, 0, 1])
    assert {("decode", (16, 1, 48)), ("decode", (4, 1, 16))} <= seen


def test_reasons_for_what_is_not_driven() -> None:
    _, sweep, _ = _sweep(ISSUE)
    reasons = dict(sweep.undriven)
    assert reasons[("decode", 3, 1, 4)] == REASONS["partial"]  # B * T = 1 * 3: T < 1 + k only
    assert reasons[("decode", 24, 1, 32)] == REASONS["unsure"]  # S in [7, 8] for n of 5..6
    assert any(why == REASONS["prompt"] for why in reasons.values())


def test_budget_bounds_the_sweep() -> None:
    _, planned, _ = _planned(ISSUE, budget_s=60.0)
    sweep = planned.spec
    assert 0 < planned.seconds[1] <= 60.0
    assert sweep.seconds == (round(planned.seconds[0], 1), round(planned.seconds[1], 1))
    assert REASONS["budget"] in dict(sweep.undriven).values()
    _, nothing, _ = _sweep(ISSUE, budget_s=0.0)
    assert nothing.steps == ()
    assert {why for _, why in nothing.undriven} >= {REASONS["budget"]}


def test_sweep_document_is_plain_json() -> None:
    _, sweep, _ = _sweep(ISSUE)
    data = json.loads(json.dumps(sweep.to_json()))
    assert data["format"] == SWEEP_FORMAT
    assert data["request"] == {"temperature": 0.0, "ignore_eos": True, "token_pattern": "varied"}
    assert data["driven"] == 77
    step = data["steps"][0]
    assert set(step) >= {"name", "concurrency", "prompt_tokens", "max_tokens", "expected"}
    assert all(len(shape) == 4 and shape[0] == "decode" for shape in step["expected"])
    assert len(data["assumptions"]) == 5


def test_the_runner_reads_the_planned_sweep_back_as_it_is() -> None:
    """The planner builds the runner's own type: its document, read by the runner's reader, is
    the same object, so plan.json carries nothing the runner would refuse."""
    for budget in (0.0, 60.0, 1800.0):
        _, sweep, _ = _sweep(ISSUE, budget_s=budget)
        errors: list[str] = []
        text = json.dumps(sweep.to_json())
        read = parse_sweep(Fields(json.loads(text), "drafter_sweep", errors), ISSUE.max_model_len)
        assert errors == []
        assert read == sweep
        assert read is not None
        assert json.dumps(read.to_json()) == text


def test_no_sweep_for_ngram_and_contiguous_pa() -> None:
    plan = plan_buckets(ISSUE)
    assert plan_sweep(plan, prove_drafter(plan, "ngram")).spec.steps == ()
    cpa = ISSUE.model_copy(update={"contiguous_pa": True, "num_gpu_blocks": 512})
    contiguous = plan_buckets(cpa)
    sweep = plan_sweep(contiguous, prove_drafter(contiguous, "eagle")).spec
    assert sweep.steps == ()
    assert REASONS["contiguous"] in dict(sweep.undriven).values()


@st.composite
def _engines(draw: st.DrawFn) -> EngineShapeConfig:
    block = draw(st.sampled_from([16, 32, 64, 128]))
    return EngineShapeConfig(
        max_num_seqs=draw(st.integers(1, 12)),
        max_model_len=block * draw(st.integers(2, 16)) + draw(st.sampled_from([0, 1, block // 2])),
        max_num_batched_tokens=draw(st.sampled_from([128, 256, 512, 1024, 2048])),
        block_size=block,
        num_gpu_blocks=draw(st.one_of(st.none(), st.integers(8, 400))),
        num_speculative_tokens=draw(st.integers(1, 4)),
        strategy=draw(st.sampled_from(["exp", "lin", "pad"])),
    )


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cfg=_engines())
def test_random_sweeps_run_their_shapes(cfg: EngineShapeConfig) -> None:
    try:
        plan, sweep, runtime = _sweep(cfg, budget_s=300.0)
    except BucketPlanError:
        return
    _assert_sure(plan, sweep, runtime)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_config_a_like_sweeps_run_their_shapes(k: int) -> None:
    cfg = EngineShapeConfig(
        max_num_seqs=12,
        max_model_len=1984,
        max_num_batched_tokens=256,
        num_gpu_blocks=768,
        num_speculative_tokens=k,
    )
    plan, sweep, runtime = _sweep(cfg, budget_s=600.0)
    assert sweep.steps
    _assert_sure(plan, sweep, runtime)


def _recounting_greedy(
    gains: dict[Ramp, set[Key]], budget_s: float, k: int
) -> list[tuple[str, int, tuple[float, float]]]:
    """The greedy as first written: recount every step's new shapes and re-price it each round."""
    chosen: list[tuple[str, int, tuple[float, float]]] = []
    covered: set[Key] = set()
    spent = 0.0
    while True:
        best = None
        for ramp, gain in gains.items():
            new = len(gain - covered)
            if not new:
                continue
            n = ramp.concurrency
            cost = estimate_sweep_step(n * (1 + k), n * ramp.prompt_tokens, ramp.engine_steps, new)
            if spent + cost[1] > budget_s:
                continue
            order = (-new / max(cost[1], 1e-9), (n, ramp.prompt_tokens, ramp.max_tokens))
            if best is None or order < best[0]:
                best = (order, ramp, cost, new)
        if best is None:
            return chosen
        _, ramp, cost, new = best
        chosen.append((f"n{ramp.concurrency}-p{ramp.prompt_tokens}-m{ramp.max_tokens}", new, cost))
        covered |= gains[ramp]
        spent += cost[1]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 8),
            st.integers(1, 3000),
            st.integers(1, 400),
            st.frozensets(st.integers(0, 40), min_size=1, max_size=12),
        ),
        min_size=1,
        max_size=25,
        unique_by=lambda t: t[:3],
    ),
    st.floats(5.0, 400.0),
    st.integers(1, 4),
)
def test_the_greedy_picks_what_recounting_every_round_picks(
    drawn: list[tuple[int, int, int, frozenset[int]]], budget_s: float, k: int
) -> None:
    """The kept counts and split costs choose the same steps, new counts and seconds."""
    gains = {
        Ramp(n, p, m, 0, 0, 0, 1, 0, (m // 2, m + 5)): {("decode", (1, 1, c)) for c in shapes}
        for n, p, m, shapes in drawn
    }
    fast = [
        (f"n{c.ramp.concurrency}-p{c.ramp.prompt_tokens}-m{c.ramp.max_tokens}", c.new, c.seconds)
        for c in _greedy(gains, budget_s, k, None, None)
    ]
    assert fast == _recounting_greedy(gains, budget_s, k)
