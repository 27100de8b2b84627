"""The one mapping from a SpecDecodeDeployment spec to the planner's EngineShapeConfig."""

from __future__ import annotations

from typing import Any

from warmgate.api.bucketing import DIMENSIONS, BucketRange, BucketsSpec
from warmgate.api.resource import SpecDecodeDeployment, SpecDecodeDeploymentSpec
from warmgate.buckets import BucketOverrides, EngineShapeConfig

# EngineShapeConfig keeps VLLM_PROMPT_BS_BUCKET_MAX and VLLM_PROMPT_CTX_BUCKET_MAX at the top
# level (they also act under exp); every other range field is a BucketOverrides field.
_TOP_LEVEL = {("prompt", "bs", "max"), ("prompt", "ctx", "max")}
_RANGE_ATTRS = ("min", "step", "max", "pad_max", "pad_percent")


def _range(buckets: BucketsSpec, phase: str, dim: str) -> BucketRange | None:
    ranges = getattr(buckets, phase)
    return getattr(ranges, dim) if ranges is not None else None


def _overrides(buckets: BucketsSpec) -> BucketOverrides | None:
    """The per-dimension VLLM_{PROMPT,DECODE}_*_BUCKET_* values the user set, or None."""
    values: dict[str, Any] = {}
    for phase, dim in DIMENSIONS:
        values |= _range_values(buckets, phase, dim)
    return BucketOverrides(**values) if values else None


def _range_values(buckets: BucketsSpec, phase: str, dim: str) -> dict[str, int]:
    rng = _range(buckets, phase, dim)
    if rng is None:
        return {}
    return {
        f"{phase}_{dim}_{attr}": value
        for attr in _RANGE_ATTRS
        if (value := getattr(rng, attr)) is not None and (phase, dim, attr) not in _TOP_LEVEL
    }


def _top_level(buckets: BucketsSpec, phase: str, dim: str) -> int | None:
    rng = _range(buckets, phase, dim)
    return rng.max if rng is not None else None


def engine_shape_config(
    sdd: SpecDecodeDeployment | SpecDecodeDeploymentSpec, *, num_gpu_blocks: int | None = None
) -> EngineShapeConfig:
    """Map the spec to the planner's engine inputs.

    `num_gpu_blocks` is the KV block count the warmup measured; spec.engine.numGpuBlocks, when
    set, wins because serving pins it (`--num-gpu-blocks-override`).
    """
    spec = sdd.spec if isinstance(sdd, SpecDecodeDeployment) else sdd
    engine, buckets = spec.engine, spec.buckets
    return EngineShapeConfig(
        max_num_seqs=engine.max_num_seqs,
        max_model_len=engine.max_model_len,
        max_num_batched_tokens=engine.max_num_batched_tokens,
        block_size=engine.block_size,
        num_gpu_blocks=engine.num_gpu_blocks or num_gpu_blocks,
        num_speculative_tokens=spec.speculative.num_speculative_tokens,
        speculative_method=spec.speculative.method,
        strategy=buckets.strategy,
        contiguous_pa=buckets.contiguous_pa,
        merged_prefill=buckets.merged_prefill,
        prompt_bs_max=_top_level(buckets, "prompt", "bs"),
        prompt_ctx_bucket_max=_top_level(buckets, "prompt", "ctx"),
        bucket_file=buckets.bucket_file(),
        profile=engine.profile,
        overrides=_overrides(buckets),
    )
