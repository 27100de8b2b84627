"""Runtime lookups: first fit, seed-first padding, fallbacks, and the step-to-shape mapping."""

from __future__ import annotations

import math
from typing import Any

import pytest
from bucket_golden import Bucket, config, tables

from warmgate.buckets import (
    BucketIndex,
    EngineShapeConfig,
    Lookup,
    fallback_value,
    first_fit,
    plan_buckets,
    prove_coverage,
)
from warmgate.buckets.engine.lookup import DecodeRows


def _blocks(n: int, tokens: int) -> int:
    """S for n sequences with ``tokens`` computed tokens each: n * ceil((tokens + 1) / 128)."""
    return n * math.ceil((tokens + 1) / 128)


@pytest.mark.parametrize(("n", "base", "expected"), tables()["fallback_values"])
def test_fallback_values(n: int, base: int, expected: int) -> None:
    assert fallback_value(n, base) == expected


@pytest.mark.parametrize(("target", "expected"), tables()["first_fit"])
def test_first_fit_inflates_to_a_higher_row(target: list[int], expected: list[int]) -> None:
    plan = plan_buckets(config("A"))
    bs, _, blocks = target
    assert plan.find_decode_bucket(bs, blocks) == Lookup(tuple(expected), False, True)  # type: ignore[arg-type]
    assert first_fit(plan.decode_buckets, (bs, 1, blocks)) == tuple(expected)


@pytest.mark.parametrize(("target", "expected"), tables()["decode_fallbacks"])
def test_decode_fallback_can_shrink_the_batch(target: list[int], expected: list[int]) -> None:
    plan = plan_buckets(config("A"))
    got = plan.find_decode_bucket(target[0], target[2])
    assert got.bucket == tuple(expected)
    assert got.fallback
    assert not got.planned


@pytest.mark.parametrize(("target", "expected"), tables()["prompt_fallbacks"])
def test_prompt_fallback(target: list[int], expected: list[int]) -> None:
    plan = plan_buckets(config("A"))
    got = plan.find_prompt_bucket(*target)
    assert got.bucket == tuple(expected)
    assert got.fallback
    assert plan.prompt_shape(*target) == tuple(expected)


def test_lookups_do_not_mutate_the_plan() -> None:
    plan = plan_buckets(config("A"))
    before = (plan.prompt_buckets, plan.decode_buckets, plan.digest)
    plan.find_decode_bucket(65, 10)
    plan.find_prompt_bucket(2, 128, 0)
    plan.decode_shape(200, 5000, 1)
    assert (plan.prompt_buckets, plan.decode_buckets, plan.digest) == before
    plan.decode_buckets.append((999, 1, 999))  # a copy: the plan is unaffected
    assert plan.decode_buckets == before[1]


def test_decode_lookup_caps_blocks_at_fallback_max_ctx() -> None:
    plan = plan_buckets(config("A"))
    assert plan.fallback_max_ctx == 2048
    assert plan.find_decode_bucket(64, 100_000).bucket == (64, 1, 2048)
    assert not plan.find_decode_bucket(64, 100_000).fallback


def test_prompt_first_fit() -> None:
    plan = plan_buckets(config("A"))
    assert plan.prompt_shape(1, 300, 3) == (1, 384, 4)
    assert plan.prompt_shape(1, 2048, 31) == (1, 2048, 31)


@pytest.mark.parametrize("row", tables()["lookups"])
def test_section6_lookup_table(row: list[Any]) -> None:
    k, n, tokens, s, t, b, bt, c, warmed = row
    plan = plan_buckets(config("A", num_speculative_tokens=k))
    assert _blocks(n, tokens) == s
    step = plan.decode_step(n, s, t)
    assert (step.padded_batch, step.shape) == (b, (bt, 1, c))
    assert plan.decode_shape(n, s, t) == (bt, 1, c)
    assert step.warmed is warmed
    assert not step.fallback


@pytest.mark.parametrize(("n", "tokens", "t", "shape", "warmed"), tables()["partial_drafts"])
def test_section5_3_partial_drafts(
    n: int, tokens: int, t: int, shape: list[int], warmed: bool
) -> None:
    plan = plan_buckets(config("A", num_speculative_tokens=3))
    step = plan.decode_step(n, _blocks(n, tokens), t)
    assert step.shape == tuple(shape)
    assert step.warmed is warmed


def test_full_drafts_always_land_on_a_generated_bucket() -> None:
    # Section 3.6 coverage claim: with T = 1 + k, (B*T, C) is always a generated bucket.
    for k in (1, 2, 3):
        plan = plan_buckets(config("A", num_speculative_tokens=k))
        for n in range(1, 65):
            for s in range(n, n * 32 + 1, 7):
                step = plan.decode_step(n, s, 1 + k)
                assert step.warmed, (k, n, s, step)


def test_contiguous_pa_block_lookup_uses_the_highest_block_id() -> None:
    plan = plan_buckets(config("A", contiguous_pa=True, num_speculative_tokens=1))
    # 5 sequences, highest block id 299 -> lookup (8 * 2, 300) -> (16, 1, 320) is planned.
    step = plan.decode_step(5, 300, 2)
    assert step.shape == (16, 1, 320)
    assert step.warmed
    # Capped at num_gpu_blocks + 1, and never below the highest block id + 1.
    assert plan.decode_shape(64, 8192, 1) == (64, 1, 8192)


@pytest.mark.parametrize(
    ("profile", "shape"), [("main-2026-08", (9, 1, 2001)), ("v0.26.0", (9, 1, 3000))]
)
def test_only_main_caps_the_contiguous_block_bucket(profile: str, shape: tuple[int, ...]) -> None:
    """get_habana_paged_attn_buffers caps max(C, maxid + 1) at the KV blocks + 1 on main
    (hpu_model_runner.py 2455-2471 at 091bbadd); v0.26.0 has no cap (2426-2433 at b059f9c9).
    Either way the warmup compiles the shape: the dummy of (9, 1, 3000) has block ids up to
    1999 and runs it."""
    cfg = config(
        "D",
        contiguous_pa=True,
        num_speculative_tokens=2,
        profile=profile,
        bucket_file="(1, 128, 0)\n(1, 1, 1000)\n(3, 1, 1000)\n",
    )
    plan = plan_buckets(cfg)
    # 1 sequence, highest block id 1499: row 1 stops at 1000, row 3 holds 3000 -> B = 3, and
    # row 9 first fits 3000.
    assert plan.decode_step(1, 1500, 3).shape == shape
    assert shape not in {g.shape for g in prove_coverage(plan).uncovered}


def test_second_lookup_sees_the_first_lookups_fallback() -> None:
    # The engine appends the batch fallback before the block lookup of the same step.
    plan = plan_buckets(config("A"))
    # 65 sequences miss every row: fallback (min(70, 64), 1, cf(449, 32) = 512).
    step = plan.decode_step(65, 449, 1)
    assert step.batch.bucket == (64, 1, 512)
    # The block lookup (64, 449) would pick the planned (64, 1, 640), but the appended
    # fallback (64, 1, 512) sorts first.
    assert plan.find_decode_bucket(64, 449).bucket == (64, 1, 640)
    assert step.blocks.bucket == (64, 1, 512)
    assert step.shape == (64, 1, 512)
    assert step.fallback
    assert not step.warmed
    # When the planned bucket sorts first it wins: (64, 10) -> (64, 1, 64), planned but the
    # step is still unwarmed because its batch lookup fell back.
    small = plan.decode_step(65, 10, 1)
    assert small.shape == (64, 1, 64)
    assert not small.blocks.fallback
    assert small.shape_planned
    assert not small.warmed


def test_step_arguments_are_checked() -> None:
    plan = plan_buckets(config("A", num_speculative_tokens=1))
    with pytest.raises(ValueError, match="tokens_per_seq"):
        plan.decode_shape(1, 1, 3)
    with pytest.raises(ValueError, match="num_seqs"):
        plan.decode_shape(0, 1, 1)
    with pytest.raises(ValueError, match="total_blocks"):
        plan.decode_shape(1, -1, 1)


def test_unknown_block_count_gives_zero_ctx_fallbacks() -> None:
    # The engine builds fallback ctx 0 while num_hpu_blocks is unknown.
    plan = plan_buckets(config("A", num_gpu_blocks=None))
    assert plan.find_decode_bucket(65, 10).bucket == (64, 1, 0)


def test_a_prompt_fallback_rounds_its_ctx_whether_or_not_blocks_are_pinned() -> None:
    """The engine knows num_hpu_blocks before any lookup (initialize_kv_cache), so a prompt
    fallback never drops its context onto a planned ctx-0 bucket (the eagle3 example's 8192)."""
    for blocks in (None, 8192):
        cfg = EngineShapeConfig(
            max_num_seqs=128,
            max_model_len=8192,
            max_num_batched_tokens=8192,
            num_gpu_blocks=blocks,
            num_speculative_tokens=2,
            speculative_method="eagle3",
        )
        plan = plan_buckets(cfg)
        assert (1, 8192, 0) in plan.prompt_buckets
        assert not any(q >= 8160 and c >= 1 for _, q, c in plan.prompt_buckets)
        lookup = plan.find_prompt_bucket(1, 8160, 1)
        assert (lookup.bucket, lookup.fallback, lookup.planned) == ((1, 8192, 1), True, False)
        gaps = {g.shape: g for g in prove_coverage(plan).uncovered if g.phase == "prompt"}
        example = gaps[(1, 8192, 1)].example
        assert example[2] == 1
        assert plan.find_prompt_bucket(*example).bucket == (1, 8192, 1)


def test_bucket_index_matches_first_fit_exhaustively() -> None:
    plan = plan_buckets(config("D", num_speculative_tokens=2))
    buckets: list[Bucket] = plan.decode_buckets
    index = BucketIndex(buckets)
    rows = DecodeRows(buckets)
    for bs in range(1, 520, 3):
        for blocks in range(0, 25000, 97):
            expected = first_fit(buckets, (bs, 1, blocks))
            assert index.find(bs, 1, blocks) == expected
            assert rows.find(bs, blocks) == expected


def test_prompt_index_matches_first_fit_exhaustively() -> None:
    plan = plan_buckets(config("C", prompt_bs_max=8))
    buckets = plan.prompt_buckets
    index = BucketIndex(buckets)
    for bs in range(1, 10):
        for query in range(1, 8300, 61):
            for ctx in range(0, 260, 23):
                assert index.find(bs, query, ctx) == first_fit(buckets, (bs, query, ctx))


def test_decode_rows_refuse_prompt_buckets() -> None:
    with pytest.raises(ValueError, match="query 1"):
        DecodeRows([(1, 128, 0)])
