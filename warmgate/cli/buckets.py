"""``warmgate buckets``: print the buckets vllm-gaudi will generate for a set of engine flags."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterable

from warmgate.buckets import Bucket, BucketPlan, plan_buckets
from warmgate.cli._engine_args import (
    EngineArgumentError,
    add_engine_arguments,
    engine_config_from_args,
)

__all__ = ["add_engine_arguments", "engine_config_from_args", "register", "render_table", "run"]

# How many of the largest buckets the summary lists per phase.
TOP = 3


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``buckets`` sub-command."""
    parser = subparsers.add_parser(
        "buckets",
        help="print the shape buckets vllm-gaudi generates for the given engine flags",
        description="Plan vllm-gaudi's prompt and decode buckets (exact port, no hardware).",
    )
    add_engine_arguments(parser)
    parser.add_argument(
        "--output",
        "-o",
        choices=("table", "json", "bucket-file"),
        default="table",
        help="table (summary, default), json (full lists) or bucket-file (seed-only file text)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Plan and print; exit code 2 for invalid flags or configurations the engine refuses."""
    try:
        plan = plan_buckets(engine_config_from_args(args))
        text = _render(plan, args.output)
    except (EngineArgumentError, ValueError) as exc:
        print(f"warmgate buckets: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0


def _render(plan: BucketPlan, output: str) -> str:
    """The text for ``--output``."""
    if output == "json":
        return json.dumps(plan.to_dict(), indent=2) + "\n"
    if output == "bucket-file":
        return plan.to_bucket_file()
    return render_table(plan)


def _span(values: list[int]) -> str:
    """``128..2048 (9)`` or a single value."""
    return str(values[0]) if len(values) == 1 else f"{values[0]}..{values[-1]} ({len(values)})"


def _rows(buckets: Iterable[Bucket]) -> dict[int, list[Bucket]]:
    """Buckets grouped by batch size, in order."""
    return {bs: list(g) for bs, g in itertools.groupby(sorted(buckets), key=lambda b: b[0])}


def render_table(plan: BucketPlan) -> str:
    """A readable summary: counts, prompt and decode rows, the largest buckets."""
    cfg = plan.config
    lines = [
        f"profile {cfg.profile}  strategy {'file' if cfg.bucket_file else cfg.strategy}  "
        f"k={cfg.num_speculative_tokens}  contiguous_pa={cfg.contiguous_pa}  "
        f"digest {plan.digest[:16]}",
        f"prompt buckets: {len(plan.prompt_buckets)}   seed decode buckets: "
        f"{len(plan.seed_decode_buckets)}   decode buckets: {len(plan.decode_buckets)} "
        f"(spec expansion added {plan.spec_added})   fallback max ctx: {plan.fallback_max_ctx}",
        "",
        "prompt rows        query                    ctx blocks",
    ]
    for bs, row in _rows(plan.prompt_buckets).items():
        queries = sorted({q for _, q, _ in row})
        ctxs = sorted({c for _, _, c in row})
        lines.append(f"  bs {bs:<6}  {_span(queries):<23}  {_span(ctxs)}")
    lines += ["", "decode rows        blocks                   origin"]
    seeds = set(plan.seed_decode_buckets)
    for bs, row in _rows(plan.decode_buckets).items():
        n_seed = sum(b in seeds for b in row)
        origin = "seed" if n_seed == len(row) else "spec" if n_seed == 0 else "seed+spec"
        lines.append(f"  bs {bs:<6}  {_span([c for _, _, c in row]):<23}  {origin}")
    lines += ["", *_largest(plan)]
    lines += _file_notes(plan)
    return "\n".join(lines) + "\n"


def _largest(plan: BucketPlan) -> list[str]:
    """The largest buckets by padded tokens (prompt) and by blocks (decode)."""
    block = plan.config.block_size
    prompt = sorted(plan.prompt_buckets, key=lambda b: (b[0] * (b[1] + b[2] * block), b))
    decode = sorted(plan.decode_buckets, key=lambda b: (b[2], b[0]))
    return [
        f"largest prompt buckets: {', '.join(map(str, prompt[-TOP:][::-1]))}",
        f"largest decode buckets: {', '.join(map(str, decode[-TOP:][::-1]))}",
    ]


def _file_notes(plan: BucketPlan) -> list[str]:
    """Warnings the engine logs for a bucket file: omitted buckets and skipped lines."""
    notes = []
    if plan.omitted_prompt or plan.omitted_decode:
        notes.append(
            f"omitted by the engine's filters: {len(plan.omitted_prompt)} prompt, "
            f"{len(plan.omitted_decode)} decode"
        )
    notes += [f"skipped line {n}: {line!r} ({why})" for n, line, why in plan.skipped_file_lines]
    return notes
