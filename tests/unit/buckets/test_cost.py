"""The warmup cost model: a low-high range that grows with shape, model size, dtype and count."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.engines import CONFIG_A

from warmgate.buckets import (
    BucketPlan,
    EngineShapeConfig,
    ModelProfile,
    estimate_buckets,
    plan_buckets,
)
from warmgate.buckets.cost import CostParams, estimate_plan, estimate_sweep_step, graph_seconds

_bucket = st.tuples(st.integers(1, 512), st.integers(1, 8192), st.integers(0, 100_000))


def _plan(k: int = 0) -> BucketPlan:
    return plan_buckets(
        EngineShapeConfig(**CONFIG_A, num_gpu_blocks=8192, num_speculative_tokens=k)
    )


@given(bucket=_bucket, prompt=st.booleans())
def test_low_never_exceeds_high(bucket: tuple[int, int, int], prompt: bool) -> None:
    model, params = ModelProfile(), CostParams()
    assert graph_seconds(bucket, prompt, model, params, 0) > 0
    assert graph_seconds(bucket, prompt, model, params, 0) <= graph_seconds(
        bucket, prompt, model, params, 1
    )


@given(bucket=_bucket, grow=st.sampled_from([0, 1, 2]), by=st.integers(2, 64))
def test_bigger_shapes_cost_at_least_as_much(
    bucket: tuple[int, int, int], grow: int, by: int
) -> None:
    bigger = list(bucket)
    bigger[grow] = bigger[grow] * by + 1
    model, params = ModelProfile(), CostParams()
    for bound in (0, 1):
        small = graph_seconds(bucket, True, model, params, bound)
        assert small <= graph_seconds((bigger[0], bigger[1], bigger[2]), True, model, params, bound)


def test_section_4_5_scale_for_an_8b_bf16_default_plan() -> None:
    """Config A, 8B BF16: the range brackets the docs' 49-66 s for a similar bucket count."""
    estimate = estimate_plan(_plan())
    assert estimate.graphs == 63 + 43
    assert estimate.low_s < 66 < estimate.high_s


def test_dtype_model_size_and_recipe_cache_move_the_range() -> None:
    plan = _plan()
    bf16 = estimate_plan(plan)
    fp8 = estimate_plan(plan, ModelProfile(dtype="fp8"))
    big = estimate_plan(plan, ModelProfile(params_b=70))
    cached = estimate_plan(plan, recipe_cache=True)
    assert fp8.low_s > bf16.high_s  # 504 s against 66 s in the docs
    assert big.low_s > bf16.low_s
    assert big.high_s > bf16.high_s
    assert cached.high_s < bf16.high_s


def test_spec_decode_costs_more_than_plain_decode() -> None:
    plain = estimate_plan(_plan(0))
    spec = estimate_plan(_plan(3))
    assert spec.low_s > plain.low_s
    assert spec.decode_graphs > plain.decode_graphs


def test_empty_list_costs_the_overhead_only() -> None:
    with_overhead = estimate_buckets([], [])
    assert (with_overhead.low_s, with_overhead.high_s) == CostParams().overhead_s
    assert estimate_buckets([], [], overhead=False).high_s == 0
    assert estimate_buckets([], [], overhead=False).graphs == 0


@pytest.mark.parametrize(
    ("seconds", "text"), [(45.2, "45 s"), (700.0, "12 min"), (9000.0, "2.5 h")]
)
def test_range_is_printed_coarsely(seconds: float, text: str) -> None:
    params = CostParams(overhead_s=(seconds, seconds))
    estimate = estimate_buckets([], [], params=params)
    assert str(estimate) == f"{text}-{text} for 0 graphs"
    assert estimate.to_dict()["low_s"] == round(seconds)


def test_sweep_step_estimate_worked_example() -> None:
    """8 requests, k=3 (32 tokens a step), 8000 prompt tokens, 300-700 engine steps, 10 graphs:
    low 300 * 0.02 + 8000 / 16000 + 10 * 0.2 = 8.5 s; high 700 * 0.08 + 8000 / 4000 + 10 * 0.4."""
    low, high = estimate_sweep_step(32, 8000, (300, 700), 10)
    assert low == pytest.approx(8.5)
    assert high == pytest.approx(62.0)


def test_sweep_step_estimate_scales_with_model_and_width() -> None:
    base = estimate_sweep_step(32, 0, (100, 100), 0)
    big = estimate_sweep_step(32, 0, (100, 100), 0, model=ModelProfile(params_b=70.0))
    wide = estimate_sweep_step(1024, 0, (100, 100), 0)  # 4x the reference tokens: 2x per step
    assert big[0] > base[0]
    assert big[1] > base[1]
    assert wide == pytest.approx((2 * base[0], 2 * base[1]))
