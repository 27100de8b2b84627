"""Per-strategy range configs (exp, lin, pad) for the prompt and decode phases, as in vllm-gaudi."""

from __future__ import annotations

import math
from typing import NamedTuple

from warmgate.buckets.engine.config import BucketOverrides, EngineShapeConfig
from warmgate.buckets.engine.ranges import exp_range, lin_range, pad_range

__all__ = ["PhaseRanges", "decode_ranges", "prompt_ranges"]

# Contexts of at least this many tokens take the "long context" path of exp prompt ctx and of the
# prompt edge rule in generate.py (vllm-gaudi common.py / exponential.py).
LONG_CONTEXT = 8192


class PhaseRanges(NamedTuple):
    """The three sorted one-dimensional ranges whose product makes a phase's buckets."""

    bs: list[int]
    query: list[int]
    ctx: list[int]


def prompt_ranges(cfg: EngineShapeConfig) -> PhaseRanges:
    """The prompt (bs, query, ctx-blocks) ranges of ``cfg.strategy``."""
    if cfg.strategy == "exp":
        return _exp_prompt(cfg)
    if cfg.strategy == "lin":
        return _lin_prompt(cfg)
    return _pad_prompt(cfg)


def decode_ranges(cfg: EngineShapeConfig) -> PhaseRanges:
    """The decode (bs, 1, blocks) ranges of ``cfg.strategy``, before the contiguous-PA column."""
    if cfg.strategy == "exp":
        return _exp_decode(cfg)
    if cfg.strategy == "lin":
        return _lin_decode(cfg)
    return _pad_decode(cfg)


def _log2_limit(n: int) -> int:
    """ceil(log2 n) + 1: the number of exponential points for a max of n (1 -> 1, 64 -> 7)."""
    return math.ceil(math.log2(n)) + 1


def _exp_prompt(cfg: EngineShapeConfig) -> PhaseRanges:
    """exponential.get_prompt_cfgs. Config A (mml 4096, mbt 2048): query 9 values, ctx 0..31.

    ctx max is (mml - mbt) // block with long contexts: a chunk never has more context than that
    before its query; config C (32768, 8192) -> 192 with 9 points, the edge rule adds the rest.
    """
    mnps, block, mbt, mml = (
        cfg.max_num_prefill_seqs,
        cfg.block_size,
        cfg.max_num_batched_tokens,
        cfg.max_model_len,
    )
    qmin = 1 if cfg.query_min_env == 1 else block
    reserved = mbt if mml >= LONG_CONTEXT else qmin
    max_ctx = max(1, (mml - reserved) // block)
    ctx_limit = 2 if max_ctx == 1 else _log2_limit(max_ctx)
    query_limit = math.ceil(math.log2(mbt))
    cpa = cfg.contiguous_pa
    if cfg.merged_prefill:
        return PhaseRanges(
            exp_range(1, 1, 1, 1, contiguous_pa=cpa),
            exp_range(qmin, 4 * block, mbt, query_limit, contiguous_pa=cpa),
            exp_range(0, 4, max_ctx * mnps, ctx_limit, contiguous_pa=cpa),
        )
    return PhaseRanges(
        exp_range(1, 2, mnps, _log2_limit(mnps), contiguous_pa=cpa),
        exp_range(qmin, block, mbt, query_limit, contiguous_pa=cpa),
        exp_range(0, 1, max_ctx, ctx_limit, contiguous_pa=cpa),
    )


def exp_decode_block_max(cfg: EngineShapeConfig) -> tuple[int, int]:
    """(max decode blocks, number of points) of the exp decode block range.

    Worst case is every sequence at max_model_len: config A 32 * 64 = 2048 blocks, 12 points.
    main-2026-08 clamps it to 3x the physical blocks (config D: 32768 -> 6000, 14 points);
    v0.26.0 instead adds points when it is that far above (config D: 16 + 4 = 20 points).
    """
    nhb = cfg.num_gpu_blocks
    mdb = cfg.max_blocks_per_seq * cfg.max_num_seqs
    if cfg.contiguous_pa and nhb is not None:
        mdb = min(nhb, mdb)
    clamps = cfg.profile != "v0.26.0" and not cfg.skip_decode_block_clamp
    if clamps and not cfg.contiguous_pa and nhb is not None:
        mdb = min(mdb, 3 * nhb)
    limit = _log2_limit(mdb)
    if not cfg.contiguous_pa and nhb is not None and mdb > 3 * nhb:
        limit += math.ceil(math.log2(mdb / (3 * nhb))) + 1
    return mdb, limit


def _exp_decode(cfg: EngineShapeConfig) -> PhaseRanges:
    """exponential.get_decode_cfgs. Config A: bs [1, 2, 4, 8, 12, 22, 36, 64], blocks 1..2048."""
    mns = cfg.max_num_seqs
    mdb, limit = exp_decode_block_max(cfg)
    cpa = cfg.contiguous_pa
    return PhaseRanges(
        exp_range(1, 2, mns, _log2_limit(mns), contiguous_pa=cpa),
        [1],
        exp_range(1, mns, mdb, limit, contiguous_pa=cpa),
    )


def _ov(cfg: EngineShapeConfig) -> BucketOverrides:
    """The overrides, or an all-default instance."""
    return cfg.overrides if cfg.overrides is not None else BucketOverrides()


def _pick(value: int | None, default: int) -> int:
    """An env override when set, else the strategy default."""
    return default if value is None else value


def _lin_prompt(cfg: EngineShapeConfig) -> PhaseRanges:
    """linear.get_prompt_cfgs. Config A: bs [1], query 128..2048 step 128, ctx 0..31 -> 512."""
    ov, block, mnps = _ov(cfg), cfg.block_size, cfg.max_num_prefill_seqs
    qmin = _pick(cfg.query_min_env, block)
    qstep = _pick(ov.prompt_query_step, block)
    # The engine writes math.ceil((mml - qmin) // block): the floor division wins.
    max_ctx = (cfg.max_model_len - qmin) // block
    if cfg.merged_prefill:
        return PhaseRanges(
            lin_range(1, 1, 1),
            lin_range(qmin, 4 * qstep, cfg.max_num_batched_tokens),
            lin_range(*_prompt_ctx(cfg, ov, 4, max_ctx * mnps)),
        )
    return PhaseRanges(
        lin_range(_pick(ov.prompt_bs_min, 1), _pick(ov.prompt_bs_step, 1), mnps),
        lin_range(qmin, qstep, _pick(ov.prompt_query_max, cfg.max_num_batched_tokens)),
        lin_range(*_prompt_ctx(cfg, ov, 1, max_ctx)),
    )


def _prompt_ctx(
    cfg: EngineShapeConfig, ov: BucketOverrides, step: int, cmax: int
) -> tuple[int, int, int]:
    """(min, step, max) of the lin/pad prompt ctx dimension with the env overrides applied."""
    return (
        _pick(ov.prompt_ctx_min, 0),
        _pick(ov.prompt_ctx_step, step),
        _pick(cfg.prompt_ctx_bucket_max, cmax),
    )


def _lin_decode(cfg: EngineShapeConfig) -> PhaseRanges:
    """linear.get_decode_cfgs. A: bs [1, 2, 4, .., 64], blocks [1, 2, .., 64, 128, .., 2048]."""
    ov, block, nhb = _ov(cfg), cfg.block_size, cfg.num_gpu_blocks
    mdb = max((cfg.max_model_len * cfg.max_num_seqs) // block, block)
    if cfg.contiguous_pa and nhb is not None:
        mdb = nhb
    bmin, bstep, bmax = (
        _pick(ov.decode_block_min, 1),
        _pick(ov.decode_block_step, block),
        _pick(ov.decode_block_max, mdb),
    )
    if cfg.contiguous_pa and nhb is not None and bmax > nhb:
        bmax = nhb
    if bmin > bmax:
        bmin = max(1, bmax - bstep)
    return PhaseRanges(
        lin_range(
            _pick(ov.decode_bs_min, 1),
            _pick(ov.decode_bs_step, 32),
            _pick(ov.decode_bs_max, cfg.max_num_seqs),
        ),
        [1],
        lin_range(bmin, bstep, bmax),
    )


def _pad_prompt(cfg: EngineShapeConfig) -> PhaseRanges:
    """padding_aware.get_prompt_cfgs. Config A: query 10 values, ctx 11 values -> 110 buckets."""
    ov, block, mnps, mbt = (
        _ov(cfg),
        cfg.block_size,
        cfg.max_num_prefill_seqs,
        cfg.max_num_batched_tokens,
    )
    qmin = _pick(cfg.query_min_env, block)
    qstep = _pick(ov.prompt_query_step, block)
    q_pad = (
        _pick(ov.prompt_query_pad_max, math.ceil(mbt / 4)),
        _pick(ov.prompt_query_pad_percent, 25),
    )
    bs_pad = (_pick(ov.prompt_bs_pad_max, math.ceil(mnps / 4)), _pick(ov.prompt_bs_pad_percent, 25))
    ctx_pad = (
        _pick(ov.prompt_ctx_pad_max, math.ceil(mbt / block)),
        _pick(ov.prompt_ctx_pad_percent, 25),
    )
    # A true ceil here, unlike lin: (4096 - 128) / 128 = 31.0 -> 31; 4000 -> 31.25 -> 32.
    max_ctx = math.ceil((cfg.max_model_len - qmin) / block)
    if cfg.merged_prefill:
        return PhaseRanges(
            pad_range(1, 1, 1, *bs_pad),
            pad_range(qmin, 4 * qstep, mbt, *q_pad),
            pad_range(*_prompt_ctx(cfg, ov, 4, max_ctx * mnps), *ctx_pad),
        )
    return PhaseRanges(
        pad_range(_pick(ov.prompt_bs_min, 1), _pick(ov.prompt_bs_step, 1), mnps, *bs_pad),
        pad_range(qmin, qstep, _pick(ov.prompt_query_max, mbt), *q_pad),
        pad_range(*_prompt_ctx(cfg, ov, 2, max_ctx), *ctx_pad),
    )


def _pad_decode(cfg: EngineShapeConfig) -> PhaseRanges:
    """padding_aware.get_decode_cfgs. Config A: bs 1..64 (13 values), blocks 128..2048."""
    ov, block, mns, nhb = _ov(cfg), cfg.block_size, cfg.max_num_seqs, cfg.num_gpu_blocks
    mdb = max(math.ceil(cfg.max_model_len * mns / block), block)
    if cfg.contiguous_pa and nhb is not None:
        mdb = nhb
    bmin, bstep, bmax = (
        _pick(ov.decode_block_min, block),
        _pick(ov.decode_block_step, block),
        _pick(ov.decode_block_max, mdb),
    )
    if cfg.contiguous_pa and nhb is not None and bmax > nhb:
        bmax = nhb
    if nhb is not None and bmin > nhb:
        bmin = max(1, nhb - bstep)
    bs_pad = (_pick(ov.decode_bs_pad_max, math.ceil(mns / 4)), _pick(ov.decode_bs_pad_percent, 25))
    blk_pad = (
        _pick(ov.decode_block_pad_max, math.ceil(mdb / 4)),
        _pick(ov.decode_block_pad_percent, 25),
    )
    return PhaseRanges(
        pad_range(
            _pick(ov.decode_bs_min, 1),
            _pick(ov.decode_bs_step, 2),
            _pick(ov.decode_bs_max, mns),
            *bs_pad,
        ),
        [1],
        pad_range(bmin, bstep, bmax, *blk_pad),
    )
