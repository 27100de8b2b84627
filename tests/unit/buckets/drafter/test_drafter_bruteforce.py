"""The drafter model agrees exactly with enumerating every realisation of every reachable step.

The reference is ``drafter_sim``: per-sequence token counts, draft counts and acceptances run
through the engine's own call sequence, written from vllm-gaudi's code and sharing nothing with
``warmgate.buckets.drafter.walk``. Non-contiguous PA (the default): with contiguous PA a call's
block bucket follows block ids, which the simulator does not model.
"""

from __future__ import annotations

from typing import Any

import pytest
from drafter_sim import EngineCalls, brute_force_drafter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.engines import engine_fields

from warmgate.buckets import BucketPlan, BucketPlanError, EngineShapeConfig, plan_buckets
from warmgate.buckets.drafter.graphs import prove_drafter


def _assert_same(plan: BucketPlan, **kwargs: Any) -> None:
    report = prove_drafter(plan, "eagle3", **kwargs)
    model = {s.key: (set(s.calls), s.full_drafts) for s in report.shapes}
    assert model == brute_force_drafter(plan, report.space)
    assert set(report.warmup) == EngineCalls(plan).warmup()
    assert {s.key for s in report.shapes if s.warmed} == set(report.warmup) & set(model)


# Small enough to enumerate every sequence's tokens, drafts and acceptances.
SMALL: dict[str, dict[str, Any]] = {
    "exp": engine_fields(4, 64, 32, 8),
    "odd-len": engine_fields(3, 70, 64, 16),
    "tight-kv": engine_fields(5, 40, 32, 8, num_gpu_blocks=9),
}


@pytest.mark.parametrize("name", sorted(SMALL))
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("strategy", ["exp", "lin", "pad"])
def test_drafter_matches_brute_force(name: str, k: int, strategy: str) -> None:
    cfg = EngineShapeConfig(**SMALL[name], num_speculative_tokens=k, strategy=strategy)
    _assert_same(plan_buckets(cfg), partial_drafts=True)


@pytest.mark.parametrize("partial_drafts", [True, False])
@pytest.mark.parametrize("prefix_caching", [True, False])
def test_drafter_matches_with_policies(partial_drafts: bool, prefix_caching: bool) -> None:
    cfg = EngineShapeConfig(**SMALL["tight-kv"], num_speculative_tokens=3, profile="main-2026-08")
    _assert_same(plan_buckets(cfg), partial_drafts=partial_drafts, prefix_caching=prefix_caching)


def test_drafter_matches_blocks_smaller_than_k() -> None:
    """Block of 2 tokens, k=4: calls past the first cross several blocks, some past the table."""
    cfg = EngineShapeConfig(
        max_num_seqs=3,
        max_model_len=13,
        max_num_batched_tokens=16,
        block_size=2,
        num_gpu_blocks=7,
        num_speculative_tokens=4,
    )
    _assert_same(plan_buckets(cfg), partial_drafts=True, prefix_caching=False)


@st.composite
def _configs(draw: st.DrawFn) -> dict[str, Any]:
    """Small engines: up to 5 sequences of up to 5 blocks, any block size from 1 to 16."""
    block = draw(st.sampled_from([1, 2, 4, 8, 16]))
    mml = max(2, (draw(st.integers(1, 5)) - 1) * block + 1 + draw(st.integers(0, 15)) % block)
    return engine_fields(
        draw(st.integers(1, 5)),
        mml,
        draw(st.sampled_from([8, 16, 32, 64, 128])),
        block,
        num_gpu_blocks=draw(st.one_of(st.none(), st.integers(1, 30))),
        num_speculative_tokens=draw(st.integers(1, 4)),
        strategy=draw(st.sampled_from(["exp", "lin", "pad"])),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(engine=_configs(), partial=st.booleans(), sharing=st.booleans())
def test_drafter_matches_brute_force_random(
    engine: dict[str, Any], partial: bool, sharing: bool
) -> None:
    try:
        plan = plan_buckets(EngineShapeConfig(**engine))
    except BucketPlanError:
        return  # the engine refuses this configuration: nothing to compare
    _assert_same(plan, partial_drafts=partial, prefix_caching=sharing)
