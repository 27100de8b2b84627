"""The interval prover agrees exactly with enumerating every state through the plan's lookups.

The brute force counts a state warmed when its shape is one the engine's warmup compiles, as
``warmup_sim`` simulates the warmup's dummies (not warmgate's ``warmup_shapes``).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from support.engines import engine_fields
from support.warmup_sim import simulated_decode_warmup, simulated_prompt_warmup

from warmgate.buckets import (
    BucketPlan,
    EngineShapeConfig,
    brute_force_coverage,
    plan_buckets,
    prove_coverage,
)
from warmgate.buckets.coverage.states import StateSpace

# Small enough to enumerate (a few 10k states), shaped like the doc's configs.
SMALL: dict[str, dict[str, Any]] = {
    "a-like": engine_fields(16, 1024, 512, 64),
    "long-ctx": engine_fields(8, 8192, 1024, 512),
    "tight-kv": engine_fields(12, 2048, 256, 128, num_gpu_blocks=40),
    "odd": engine_fields(7, 1000, 300, 32),
}


def _assert_same(plan: BucketPlan, **kwargs: Any) -> None:
    fast = prove_coverage(plan, **kwargs)
    warmed = (simulated_decode_warmup(plan), simulated_prompt_warmup(plan))
    slow = brute_force_coverage(plan, **kwargs, warmed=warmed)
    assert (fast.decode_states, fast.prompt_states) == (slow.decode_states, slow.prompt_states)
    assert fast.uncovered == slow.uncovered
    assert fast.covered == slow.covered


@pytest.mark.parametrize("name", sorted(SMALL))
@pytest.mark.parametrize("k", [0, 1, 2, 3])
@pytest.mark.parametrize("strategy", ["exp", "lin", "pad"])
@pytest.mark.parametrize("method", [None, "ngram", "eagle3"])
def test_prover_matches_brute_force(name: str, k: int, strategy: str, method: str | None) -> None:
    base = {"num_gpu_blocks": 600, **SMALL[name]}
    cfg = EngineShapeConfig(
        **base, num_speculative_tokens=k, strategy=strategy, speculative_method=method
    )
    _assert_same(plan_buckets(cfg), partial_drafts=True)


@pytest.mark.parametrize("name", sorted(SMALL))
@pytest.mark.parametrize("prefix_caching", [True, False])
@pytest.mark.parametrize("partial_drafts", [True, False])
def test_prover_matches_with_sharing_and_drafts(
    name: str, prefix_caching: bool, partial_drafts: bool
) -> None:
    base = {"num_gpu_blocks": 50, **SMALL[name]}
    plan = plan_buckets(EngineShapeConfig(**base, num_speculative_tokens=2, profile="main-2026-08"))
    _assert_same(plan, partial_drafts=partial_drafts, prefix_caching=prefix_caching)


@pytest.mark.parametrize("name", sorted(SMALL))
@pytest.mark.parametrize("k", [0, 2])
def test_prover_matches_contiguous_pa(name: str, k: int) -> None:
    base = {"num_gpu_blocks": 300, **SMALL[name]}
    cfg = EngineShapeConfig(**base, num_speculative_tokens=k, contiguous_pa=True)
    _assert_same(plan_buckets(cfg))


@pytest.mark.parametrize("blocks", [None, 700])
def test_prover_matches_prompt_batches(blocks: int | None) -> None:
    """Prompt batches of up to 4 (VLLM_PROMPT_BS_BUCKET_MAX) only form when their bucket fits."""
    cfg = EngineShapeConfig(**{**SMALL["odd"], "num_gpu_blocks": blocks}, prompt_bs_max=4)
    _assert_same(plan_buckets(cfg))


def test_state_counts_match_the_space() -> None:
    plan = plan_buckets(EngineShapeConfig(**SMALL["tight-kv"], num_speculative_tokens=3))
    report = prove_coverage(plan, prefix_caching=False)
    space = StateSpace.of(plan.config, partial_drafts=True, prefix_caching=False)
    assert report.decode_states == space.decode_count() == sum(1 for _ in space.decode_states())
    assert report.states == report.decode_states + report.prompt_states


# -- property-based: random engines and random (sparse) seed files, which exercise fallbacks ----

_bucket_rows = st.lists(
    st.tuples(st.integers(1, 24), st.integers(1, 300)), min_size=1, max_size=8
).map(lambda rows: "\n".join(f"({b}, 1, {c})" for b, c in rows))
_prompt_rows = st.lists(
    st.tuples(st.integers(1, 3), st.integers(2, 260), st.integers(0, 40)), max_size=6
).map(lambda rows: "\n".join(f"({b}, {q}, {c})" for b, q, c in rows))


@st.composite
def _configs(draw: st.DrawFn) -> EngineShapeConfig:
    block = draw(st.sampled_from([8, 16, 32, 64, 128]))
    mns = draw(st.integers(1, 12))
    mml = draw(st.integers(2 * block, 24 * block))
    contiguous = draw(st.booleans())
    blocks = draw(st.integers(1, 400)) if contiguous else draw(st.none() | st.integers(1, 400))
    mbt = draw(st.integers(block, max(block, 300)))
    file = None
    if draw(st.booleans()):  # a sparse file; one prompt row that passes every filter
        file = f"{draw(_bucket_rows)}\n{draw(_prompt_rows)}\n(1, {min(mbt, mml)}, 0)"
    return EngineShapeConfig(
        max_num_seqs=mns,
        max_model_len=mml,
        max_num_batched_tokens=mbt,
        block_size=block,
        num_gpu_blocks=blocks,
        num_speculative_tokens=draw(st.integers(0, 3)),
        strategy=draw(st.sampled_from(["exp", "lin", "pad"])),
        contiguous_pa=contiguous,
        prompt_bs_max=draw(st.none() | st.integers(1, 3)),
        merged_prefill=draw(st.booleans()),
        profile=draw(st.sampled_from(["v0.26.0", "main-2026-08"])),
        bucket_file=file,
        speculative_method=draw(st.sampled_from([None, "ngram", "eagle", "mtp"])),
    )


@given(cfg=_configs(), partial=st.booleans(), sharing=st.none() | st.booleans())
def test_prover_matches_brute_force_on_random_engines(
    cfg: EngineShapeConfig, partial: bool, sharing: bool | None
) -> None:
    try:
        plan = plan_buckets(cfg)
    except (ValueError, RuntimeError):
        assume(False)  # the engine refuses this configuration (e.g. a file left no buckets)
        raise
    _assert_same(plan, partial_drafts=partial, prefix_caching=sharing)
