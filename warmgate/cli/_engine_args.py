"""Shared argparse options for the engine flags that decide bucket shapes (-> EngineShapeConfig)."""

from __future__ import annotations

import argparse
from pathlib import Path

from pydantic import ValidationError

from warmgate.buckets import PROFILES, BucketOverrides, EngineShapeConfig

__all__ = ["EngineArgumentError", "add_engine_arguments", "engine_config_from_args"]


# The flags whose destination is the EngineShapeConfig field of the same name (``--max-num-seqs``
# sets ``max_num_seqs``; `_describe` names a field's flag the same way back).
SAME_NAME_FLAGS = (
    "max_num_seqs",
    "max_model_len",
    "max_num_batched_tokens",
    "block_size",
    "num_gpu_blocks",
    "num_speculative_tokens",
    "strategy",
    "contiguous_pa",
    "merged_prefill",
    "prompt_bs_max",
    "profile",
    "prompt_query_bucket_min_one",
    "prompt_ctx_bucket_max",
    "skip_decode_block_clamp",
)


class EngineArgumentError(ValueError):
    """The engine flags do not make a valid EngineShapeConfig; the message names the flag."""


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the vLLM / vllm-gaudi flags of ``EngineShapeConfig`` to ``parser`` (group "engine")."""
    g = parser.add_argument_group("engine", "vLLM and vllm-gaudi settings that decide the shapes")
    g.add_argument("--max-num-seqs", type=int, default=256, help="--max-num-seqs (default 256)")
    g.add_argument("--max-model-len", type=int, required=True, help="--max-model-len")
    g.add_argument(
        "--max-num-batched-tokens", type=int, default=2048, help="(default 2048, vllm serve)"
    )
    g.add_argument("--block-size", type=int, default=128, help="KV block size (default 128)")
    g.add_argument(
        "--num-gpu-blocks",
        type=int,
        default=None,
        help="the engine's KV block count (num_hpu_blocks); unknown when omitted",
    )
    g.add_argument(
        "--num-speculative-tokens", "-k", type=int, default=0, help="k; 0 = no spec decode"
    )
    g.add_argument("--strategy", choices=("exp", "lin", "pad"), default="exp")
    g.add_argument("--contiguous-pa", action="store_true", help="VLLM_CONTIGUOUS_PA=true")
    g.add_argument("--merged-prefill", action="store_true", help="VLLM_MERGED_PREFILL=true")
    g.add_argument("--prompt-bs-max", type=int, default=None, help="VLLM_PROMPT_BS_BUCKET_MAX")
    g.add_argument(
        "--prompt-query-bucket-min-one",
        action="store_true",
        help="VLLM_PROMPT_QUERY_BUCKET_MIN=1 (adds query 1)",
    )
    g.add_argument(
        "--prompt-ctx-bucket-max", type=int, default=None, help="VLLM_PROMPT_CTX_BUCKET_MAX"
    )
    g.add_argument("--skip-decode-block-clamp", action="store_true", help="hybrid/SWA models")
    g.add_argument(
        "--bucket-file", type=Path, default=None, help="a VLLM_BUCKETING_FROM_FILE file to read"
    )
    g.add_argument(
        "--bucket-env",
        action="append",
        default=[],
        metavar="VLLM_X_Y_BUCKET_Z=N",
        help="per-dimension lin/pad override, e.g. VLLM_DECODE_BS_BUCKET_STEP=16 (repeatable)",
    )
    g.add_argument("--profile", choices=PROFILES, default=PROFILES[0], help="vllm-gaudi version")


def _overrides(pairs: list[str]) -> BucketOverrides | None:
    """Parse repeated ``NAME=VALUE`` into BucketOverrides, or None when there are none."""
    if not pairs:
        return None
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise EngineArgumentError(f"--bucket-env expects NAME=VALUE, got {pair!r}")
        env[name.strip()] = value.strip()
    try:
        return BucketOverrides.from_env(env)
    except ValidationError as exc:
        raise EngineArgumentError(_describe(exc, overrides=True)) from exc
    except ValueError as exc:
        raise EngineArgumentError(f"--bucket-env: {exc}") from exc


def engine_config_from_args(args: argparse.Namespace) -> EngineShapeConfig:
    """Build the config from parsed ``add_engine_arguments`` flags.

    Raises EngineArgumentError naming the flag (e.g. ``--max-num-seqs: Input should be ...``).
    """
    try:
        bucket_file = args.bucket_file.read_text() if args.bucket_file is not None else None
        return EngineShapeConfig(
            **{name: getattr(args, name) for name in SAME_NAME_FLAGS},
            bucket_file=bucket_file,
            overrides=_overrides(args.bucket_env),
        )
    except ValidationError as exc:
        raise EngineArgumentError(_describe(exc)) from exc
    except OSError as exc:
        raise EngineArgumentError(f"--bucket-file: {exc}") from exc


def _describe(exc: ValidationError, *, overrides: bool = False) -> str:
    """Errors joined, each named by its flag: ``--max-num-seqs: Input should be ...``."""
    lines = []
    for err in exc.errors():
        loc = [str(part) for part in err["loc"]]
        if not loc:
            flag = "engine flags"
        elif overrides:
            flag = BucketOverrides.env_name(loc[0])
        else:
            flag = "--" + loc[0].replace("_", "-")
        lines.append(f"{flag}: {err['msg']}")
    return "; ".join(lines)
