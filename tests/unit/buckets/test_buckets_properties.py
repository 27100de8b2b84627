"""Property-based checks over wide configuration ranges: lists, filters, lookups, bucket files."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from warmgate.buckets import (
    BucketOverrides,
    BucketPlan,
    BucketPlanError,
    EngineShapeConfig,
    first_fit,
    parse_bucket_file,
    plan_buckets,
)


@st.composite
def configs(draw: st.DrawFn) -> EngineShapeConfig:
    strategy = draw(st.sampled_from(["exp", "exp", "lin", "pad"]))
    # lin/pad walk every block_size step up to max_model_len * max_num_seqs / block_size:
    # keep those products small so that examples stay fast.
    small = strategy != "exp"
    block = draw(st.sampled_from([64, 128, 256] if small else [16, 64, 128, 256]))
    fields: dict[str, Any] = {
        "max_num_seqs": draw(st.integers(1, 64 if small else 300)),
        "max_model_len": draw(st.integers(block, 4096 if small else 40_000)),
        "max_num_batched_tokens": draw(st.sampled_from([256, 512, 2048, 4096, 8192, 16384])),
        "block_size": block,
        "num_gpu_blocks": draw(st.integers(64, 20_000)),
        "num_speculative_tokens": draw(st.integers(0, 4)),
        "strategy": strategy,
        "contiguous_pa": draw(st.booleans()),
        "merged_prefill": draw(st.booleans()),
        "prompt_bs_max": draw(st.sampled_from([None, 2, 8])),
        "profile": draw(st.sampled_from(["v0.26.0", "main-2026-08"])),
    }
    if small and draw(st.booleans()):
        fields["overrides"] = draw(overrides())
    return EngineShapeConfig(**fields)


@st.composite
def overrides(draw: st.DrawFn) -> BucketOverrides:
    """A few per-dimension lin/pad variables with small values."""
    names = draw(
        st.lists(st.sampled_from(sorted(BucketOverrides.model_fields)), max_size=4, unique=True)
    )
    values: dict[str, int] = {}
    for name in names:
        if name.endswith("percent"):
            values[name] = draw(st.integers(0, 50))
        elif name.endswith("step"):
            values[name] = draw(st.integers(1, 256))
        else:
            values[name] = draw(st.integers(0, 4096))
    return BucketOverrides(**values)


def _plan(cfg: EngineShapeConfig) -> BucketPlan:
    try:
        plan = plan_buckets(cfg)
    except BucketPlanError:
        assume(False)
        raise
    # lin with long models makes tens of thousands of buckets; keep examples fast.
    assume(len(plan.prompt_buckets) + len(plan.decode_buckets) < 30_000)
    return plan


@given(configs())
def test_lists_are_sorted_and_deduplicated(cfg: EngineShapeConfig) -> None:
    plan = _plan(cfg)
    for buckets in (plan.prompt_buckets, plan.seed_decode_buckets, plan.decode_buckets):
        assert buckets == sorted(set(buckets))
        assert buckets
    assert set(plan.seed_decode_buckets) <= set(plan.decode_buckets)
    if cfg.num_speculative_tokens == 0:
        assert plan.decode_buckets == plan.seed_decode_buckets


@given(configs())
def test_filters_and_corrector_hold(cfg: EngineShapeConfig) -> None:
    plan = _plan(cfg)
    mml, block, mnps = cfg.max_model_len, cfg.block_size, cfg.max_num_prefill_seqs
    for bs, q, c in plan.prompt_buckets:
        if cfg.merged_prefill:
            assert c <= mnps * ((mml - q // mnps) // block)
        else:
            assert c <= -(-(mml - 1) // block)
            assert q <= mml
            assert bs * q <= cfg.max_num_batched_tokens
    for bs, q, c in plan.seed_decode_buckets:
        assert q == 1
        if not cfg.contiguous_pa:
            assert bs <= c <= bs * cfg.max_blocks_per_seq
    assert plan.fallback_max_ctx == max(c for _, _, c in plan.decode_buckets)


@given(configs())
def test_spec_rows_come_from_seeds(cfg: EngineShapeConfig) -> None:
    plan = _plan(cfg)
    t = cfg.tokens_per_step
    seeds = set(plan.seed_decode_buckets)
    for b, _, c in set(plan.decode_buckets) - seeds:
        assert b % t == 0
        assert any(sb * t == b and (c in (sc, sc * t) or c < sc * t) for sb, _, sc in seeds)


@given(configs(), st.data())
def test_decode_lookups_cover_the_target_or_fall_back(
    cfg: EngineShapeConfig, data: st.DataObject
) -> None:
    plan = _plan(cfg)
    bs = data.draw(st.integers(1, 2 * cfg.max_num_seqs * cfg.tokens_per_step))
    blocks = data.draw(st.integers(0, 2 * plan.fallback_max_ctx))
    seed = data.draw(st.booleans())
    got = plan.find_decode_bucket(bs, blocks, seed)
    target = min(blocks, plan.fallback_max_ctx)
    if got.fallback:
        assert first_fit(plan.decode_buckets, (bs, 1, target)) is None
        assert got.bucket[0] <= cfg.max_num_seqs
        assert got.bucket[2] <= plan.fallback_max_ctx
    else:
        assert got.bucket[0] >= bs
        assert got.bucket[2] >= target
        seed_hit = first_fit(plan.seed_decode_buckets, (bs, 1, target)) if seed else None
        assert got.bucket == (seed_hit or first_fit(plan.decode_buckets, (bs, 1, target)))


@given(configs(), st.data())
def test_prompt_lookups_cover_the_target_or_fall_back(
    cfg: EngineShapeConfig, data: st.DataObject
) -> None:
    plan = _plan(cfg)
    bs = data.draw(st.integers(1, 2 * cfg.max_num_prefill_seqs))
    query = data.draw(st.integers(1, cfg.max_num_batched_tokens))
    ctx = data.draw(st.integers(0, cfg.max_blocks_per_seq))
    got = plan.find_prompt_bucket(bs, query, ctx)
    if got.fallback:
        assert first_fit(plan.prompt_buckets, (bs, query, ctx)) is None
    else:
        assert got.bucket == first_fit(plan.prompt_buckets, (bs, query, ctx))
        assert got.bucket[0] >= bs
        assert got.bucket[1] >= query
        assert got.bucket[2] >= ctx


@given(configs(), st.data())
def test_full_draft_steps_run_planned_shapes(cfg: EngineShapeConfig, data: st.DataObject) -> None:
    plan = _plan(cfg)
    assume(not cfg.contiguous_pa)
    n = data.draw(st.integers(1, cfg.max_num_seqs))
    s = data.draw(st.integers(n, n * cfg.max_blocks_per_seq))
    step = plan.decode_step(n, s, cfg.tokens_per_step)
    if step.batch.bucket in plan.seed_decode_buckets and not step.batch.fallback:
        # Section 3.6: the seed (B, 1, c >= S) implies the spec row (B*T, 1, >= T*S). The claim
        # needs a seed hit: when no seed row is wide enough (e.g. 3 * num_gpu_blocks below
        # max_num_seqs), the batch pads to a spec row and B*T has no bucket at all.
        assert step.warmed
    assert step.shape[0] == step.padded_batch * cfg.tokens_per_step


@given(configs())
def test_bucket_file_round_trips(cfg: EngineShapeConfig) -> None:
    plan = _plan(cfg)
    assume(all(q != 1 for _, q, _ in plan.prompt_buckets))
    again = plan_buckets(cfg.model_copy(update={"bucket_file": plan.to_bucket_file()}))
    assert again.prompt_buckets == plan.prompt_buckets
    assert again.decode_buckets == plan.decode_buckets
    assert again.digest == plan.digest


@given(configs(), st.data())
def test_decode_shape_fast_path_matches_decode_step(
    cfg: EngineShapeConfig, data: st.DataObject
) -> None:
    plan = _plan(cfg)
    n = data.draw(st.integers(1, 2 * cfg.max_num_seqs))
    s = data.draw(st.integers(0, 2 * n * cfg.max_blocks_per_seq))
    t = data.draw(st.integers(1, cfg.tokens_per_step))
    assert plan.decode_shape(n, s, t) == plan.decode_step(n, s, t).shape


# The assumptions keep about a fifth of the configs; Hypothesis' filter health check then fails
# on some seeds (about one run in five), although enough examples pass.
@settings(suppress_health_check=[HealthCheck.filter_too_much])
@given(configs())
def test_profiles_agree_unless_the_3x_clamp_binds(cfg: EngineShapeConfig) -> None:
    # Reference 2.4: v0.26.0 and main differ only where ceil(mml/block) * mns > 3 * blocks.
    assume(cfg.strategy == "exp" and not cfg.contiguous_pa and cfg.num_gpu_blocks is not None)
    assume(cfg.max_blocks_per_seq * cfg.max_num_seqs <= 3 * cfg.num_gpu_blocks)
    release = _plan(cfg.model_copy(update={"profile": "v0.26.0"}))
    main = _plan(cfg.model_copy(update={"profile": "main-2026-08"}))
    assert release.decode_buckets == main.decode_buckets
    assert release.prompt_buckets == main.prompt_buckets


@given(st.text(alphabet="()[], 0123456789range#\n-x'", max_size=200))
def test_parse_bucket_file_never_raises(text: str) -> None:
    parsed = parse_bucket_file(text)
    assert all(b[1] == 1 for b in parsed.decode)
    assert all(b[1] != 1 for b in parsed.prompt)


def test_empty_decode_block_range_is_refused_not_crashed() -> None:
    # Found by hypothesis: lin decode blocks (min 65, step 64, max 65) hold no value at all.
    cfg = EngineShapeConfig(
        max_num_seqs=1,
        max_model_len=64,
        max_num_batched_tokens=256,
        block_size=64,
        num_gpu_blocks=65,
        strategy="lin",
        contiguous_pa=True,
        overrides=BucketOverrides(decode_block_min=65),
    )
    with pytest.raises(BucketPlanError, match="decode block range is empty"):
        plan_buckets(cfg)
