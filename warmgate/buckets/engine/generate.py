"""vllm-gaudi's ``generate_buckets``: product of ranges, long-context edge, filters, corrector."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from warmgate.buckets.engine.config import BucketPlanError, EngineShapeConfig
from warmgate.buckets.engine.strategies import (
    LONG_CONTEXT,
    PhaseRanges,
    decode_ranges,
    prompt_ranges,
)

__all__ = [
    "Bucket",
    "BucketPlanError",
    "correct_decode",
    "decode_corrector",
    "decode_filter",
    "generate_decode",
    "generate_from_ranges",
    "generate_prompt",
    "prompt_filter",
    "select_file_buckets",
]

Bucket = tuple[int, int, int]
"""(batch_size, query_len, num_blocks): prompt (bs, q, ctx_blocks), decode (bs, 1, blocks)."""


def prompt_filter(cfg: EngineShapeConfig) -> Callable[[int, int, int], bool]:
    """The prompt bucket filter of the configuration (common.py, after vllm-gaudi PR #1362).

    Not merged, config A (mml 4096, mbt 2048, block 128): ctx <= 32, query <= 4096 and
    bs * query <= 2048.
    Merged, mnps 64: ctx <= 64 * ((4096 - query // 64) // 128).
    """
    mml, block, mbt, mnps = (
        cfg.max_model_len,
        cfg.block_size,
        cfg.max_num_batched_tokens,
        cfg.max_num_prefill_seqs,
    )
    if cfg.merged_prefill:
        return lambda bs, q, c: c <= mnps * ((mml - q // mnps) // block)
    max_ctx = -(-(mml - 1) // block)  # ceil((mml - 1) / block): 4095 / 128 -> 32
    return lambda bs, q, c: c <= max_ctx and q <= mml and bs * q <= mbt


def decode_filter(cfg: EngineShapeConfig) -> Callable[[int, int, int], bool]:
    """bs <= blocks (each sequence owns a block), before the corrector; none with contiguous PA."""
    if cfg.contiguous_pa:
        return lambda bs, q, c: True
    return lambda bs, q, c: bs <= c


def decode_corrector(cfg: EngineShapeConfig) -> Callable[[int, int, int], Bucket]:
    """Clamp blocks to what bs sequences at max_model_len can hold (non-contiguous PA only).

    Config A: (1, 1, 64) -> (1, 1, 32), since one sequence never holds more than 4096/128 blocks.
    """
    if cfg.contiguous_pa:
        return lambda bs, q, c: (bs, q, c)
    per_seq = cfg.max_blocks_per_seq
    return lambda bs, q, c: (bs, q, min(c, bs * per_seq))


def correct_decode(cfg: EngineShapeConfig, bucket: Bucket) -> Bucket:
    """``decode_corrector`` applied to one bucket."""
    return decode_corrector(cfg)(*bucket)


def generate_from_ranges(
    cfg: EngineShapeConfig, ranges: PhaseRanges, *, is_prompt: bool
) -> list[Bucket]:
    """The product of the ranges, filtered and corrected, deduplicated and sorted as tuples.

    The prompt edge rule (mml >= 8192): on the max ctx column the ctx becomes what is left of the
    model length after the query, e.g. config C q=128 -> (32768 - 128) // 128 = 255. The engine
    assigns it to the loop variable, so when the test fails for a later query the previous edge
    value "sticks" (reproduced on purpose).
    """
    keep = prompt_filter(cfg) if is_prompt else decode_filter(cfg)
    fix = (lambda bs, q, c: (bs, q, c)) if is_prompt else decode_corrector(cfg)
    max_c = max(ranges.ctx)
    edge = is_prompt and cfg.max_model_len >= LONG_CONTEXT
    out: set[Bucket] = set()
    for bs in ranges.bs:
        for c0 in ranges.ctx:
            ctx, on_edge = c0, edge and c0 == max_c
            for q in ranges.query:
                if on_edge:
                    ctx = _edge_ctx(cfg, q, ctx)
                if keep(bs, q, ctx):
                    out.add(fix(bs, q, ctx))
    return _non_empty(sorted(out), is_prompt)


def _edge_ctx(cfg: EngineShapeConfig, query: int, current: int) -> int:
    """The long-context edge value for ``query``, or ``current`` when the engine's test fails."""
    edge = (cfg.max_model_len - query) // cfg.block_size
    cap = cfg.prompt_ctx_bucket_max
    return edge if edge >= 0 and (cap is None or edge < cap) else current


def _non_empty(buckets: list[Bucket], is_prompt: bool) -> list[Bucket]:
    """Raise as the engine does when every bucket was filtered out."""
    if not buckets:
        phase = "prompt" if is_prompt else "decode"
        raise BucketPlanError(
            f"Generated 0 {phase} buckets: every candidate was filtered out; the engine refuses "
            "this configuration (adjust the bucketing configuration)"
        )
    return buckets


def generate_prompt(cfg: EngineShapeConfig) -> list[Bucket]:
    """The prompt buckets of the configured strategy."""
    return generate_from_ranges(cfg, prompt_ranges(cfg), is_prompt=True)


def generate_decode(cfg: EngineShapeConfig) -> list[Bucket]:
    """The (seed) decode buckets of the configured strategy.

    Contiguous PA: block ids go up to the physical count, so the engine appends ``num_gpu_blocks``
    as a last column when the range stops below it (config A cpa: ... 2048, 8192).
    """
    ranges = decode_ranges(cfg)
    if not ranges.ctx:
        # e.g. lin (min 65, step 64, max 65): no multiple of the step lies in [min, max]. The
        # engine indexes ctx[-1] here and fails; refuse with a message that says why instead.
        raise BucketPlanError(
            "the decode block range is empty (no multiple of the step between min and max); "
            "the engine cannot start with this bucketing configuration"
        )
    nhb = cfg.num_gpu_blocks
    if cfg.contiguous_pa and nhb is not None and ranges.ctx[-1] < nhb:
        ranges = ranges._replace(ctx=[*ranges.ctx, nhb])
    return generate_from_ranges(cfg, ranges, is_prompt=False)


def select_file_buckets(
    cfg: EngineShapeConfig, buckets: Iterable[Bucket], *, is_prompt: bool
) -> tuple[list[Bucket], list[Bucket]]:
    """(kept, omitted) file buckets: same filters and corrector, no product, no edge rule."""
    keep = prompt_filter(cfg) if is_prompt else decode_filter(cfg)
    fix = decode_corrector(cfg)
    kept: set[Bucket] = set()
    omitted: set[Bucket] = set()
    for bucket in buckets:
        if not keep(*bucket):
            omitted.add(bucket)
        else:
            kept.add(bucket if is_prompt else fix(*bucket))
    return _non_empty(sorted(kept), is_prompt), sorted(omitted)
