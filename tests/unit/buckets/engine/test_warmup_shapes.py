"""What the engine's warmup compiles: warmgate's model against a step-by-step simulation."""

from __future__ import annotations

from typing import Any

import pytest
from bucket_golden import config
from hypothesis import assume, given
from hypothesis import strategies as st
from support.warmup_sim import simulated_decode_warmup, simulated_prompt_warmup

from warmgate.buckets import EngineShapeConfig, plan_buckets
from warmgate.buckets.engine.warmup_shapes import (
    dummy_shapes,
    warmed_decode_shapes,
    warmed_prompt_shapes,
)

METHODS = [None, "ngram", "eagle3"]


def test_config_a_never_compiles_its_2048_by_31_prompt_bucket() -> None:
    """The dummy of (1, 2048, 31) runs 16 context blocks: (1, 2048, 16) is compiled instead."""
    plan = plan_buckets(config("A", num_speculative_tokens=2))
    assert (1, 2048, 31) in plan.prompt_buckets
    assert dummy_shapes(plan, (1, 2048, 31), 0) == ((1, 2048, 16),)
    assert dummy_shapes(plan, (1, 2048, 16), 2) == ((1, 2048, 16),)  # eagle: 2046 pads back
    warmed = warmed_prompt_shapes(plan)
    assert set(plan.prompt_buckets) - warmed == {(1, 2048, 31)}
    # Below the edge the dummy is the bucket: (1, 1664, 31) runs (1664 + 31*128 > 4096) with
    # 19 blocks, and the first bucket of row 1664 at or above 19 is 31 itself.
    assert dummy_shapes(plan, (1, 1664, 31), 0) == ((1, 1664, 31),)


def test_a_draft_model_shortens_the_dummy_into_a_lower_row() -> None:
    """eagle's dummy of (1, 130, 0) has 128 new tokens: it runs (1, 128, 0) when that is planned."""
    cfg = config(
        "A", num_speculative_tokens=2, bucket_file="(1, 128, 0)\n(1, 130, 0)\n(4, 1, 64)\n"
    )
    plan = plan_buckets(cfg)
    assert warmed_prompt_shapes(plan, (0,)) == {(1, 128, 0), (1, 130, 0)}
    assert warmed_prompt_shapes(plan, (2,)) == {(1, 128, 0)}
    assert warmed_prompt_shapes(plan) == {(1, 128, 0)}  # method unknown: both must compile it
    ngram = plan_buckets(cfg.model_copy(update={"speculative_method": "ngram"}))
    assert warmed_prompt_shapes(ngram) == {(1, 128, 0), (1, 130, 0)}


def test_batched_dummies_with_context_run_alone() -> None:
    """A request with context starts its own batch, so (2, q, c > 0) compiles (1, q, c')."""
    file = "(1, 256, 4)\n(2, 256, 4)\n(2, 256, 0)\n(4, 1, 64)\n"
    cfg = config("A", prompt_bs_max=2, bucket_file=file)
    plan = plan_buckets(cfg)
    assert dummy_shapes(plan, (2, 256, 4), 0) == ((1, 256, 4), (1, 256, 4))
    assert dummy_shapes(plan, (2, 256, 0), 0) == ((2, 256, 0),)
    assert warmed_prompt_shapes(plan) == {(1, 256, 4), (2, 256, 0)}


def test_contiguous_pa_dummies_above_the_kv_blocks() -> None:
    """Block ids stop at num_blocks - 1: main compiles (9, 1, 2001) for (9, 1, 3000)."""
    files = "(1, 128, 0)\n(1, 1, 1000)\n(3, 1, 1000)\n"
    for profile, capped in (("main-2026-08", (9, 1, 2001)), ("v0.26.0", (9, 1, 3000))):
        cfg = config(
            "D",
            contiguous_pa=True,
            num_speculative_tokens=2,
            profile=profile,
            bucket_file=files,
        )
        plan = plan_buckets(cfg)
        assert (9, 1, 3000) in plan.decode_buckets
        warmed = warmed_decode_shapes(plan)
        assert capped in warmed
        assert warmed == simulated_decode_warmup(plan)


@pytest.mark.parametrize("name", ["A", "B", "C", "D"])
@pytest.mark.parametrize("strategy", ["exp", "lin", "pad"])
@pytest.mark.parametrize("method", METHODS)
def test_model_matches_the_simulation_on_the_doc_configs(
    name: str, strategy: str, method: str | None
) -> None:
    cfg = config(name, strategy=strategy, num_speculative_tokens=2, speculative_method=method)
    plan = plan_buckets(cfg)
    assert warmed_prompt_shapes(plan) == simulated_prompt_warmup(plan)
    assert warmed_decode_shapes(plan) == simulated_decode_warmup(plan)


def test_lin_plans_leave_many_buckets_uncompiled() -> None:
    """Every lin row holds its C0 and the buckets above it: those never compile (config A: 120)."""
    plan = plan_buckets(config("A", strategy="lin"))
    missing = set(plan.prompt_buckets) - warmed_prompt_shapes(plan)
    assert len(missing) == 120
    assert (1, 512, 29) in missing  # 512 + 29 * 128 > 4096: its dummy runs (1, 512, 28)


_prompt_rows = st.lists(
    st.tuples(st.integers(1, 3), st.integers(2, 260), st.integers(0, 40)), min_size=1, max_size=8
).map(lambda rows: "\n".join(f"({b}, {q}, {c})" for b, q, c in rows))


@st.composite
def _configs(draw: st.DrawFn) -> EngineShapeConfig:
    block = draw(st.sampled_from([8, 16, 32, 64, 128]))
    mml = draw(st.integers(2 * block, 24 * block))
    contiguous = draw(st.booleans())
    extra: dict[str, Any] = {}
    if draw(st.booleans()):
        extra["bucket_file"] = f"(2, 1, 64)\n(5, 1, {draw(st.integers(1, 500))})\n" + draw(
            _prompt_rows
        )
    k = draw(st.integers(0, 3))
    return EngineShapeConfig(
        max_num_seqs=draw(st.integers(1, 12)),
        max_model_len=mml,
        max_num_batched_tokens=draw(st.integers(block, max(block, 300))),
        block_size=block,
        num_gpu_blocks=draw(st.integers(1, 400)) if contiguous else None,
        num_speculative_tokens=k,
        speculative_method=draw(st.sampled_from(METHODS)),
        strategy=draw(st.sampled_from(["exp", "lin", "pad"])),
        contiguous_pa=contiguous,
        prompt_bs_max=draw(st.none() | st.integers(1, 3)),
        profile=draw(st.sampled_from(["v0.26.0", "main-2026-08"])),
        **extra,
    )


@given(cfg=_configs())
def test_model_matches_the_simulation_on_random_engines(cfg: EngineShapeConfig) -> None:
    try:
        plan = plan_buckets(cfg)
    except (ValueError, RuntimeError):
        assume(False)  # the engine refuses this configuration
        raise
    assert warmed_prompt_shapes(plan) == simulated_prompt_warmup(plan)
    assert warmed_decode_shapes(plan) == simulated_decode_warmup(plan)
