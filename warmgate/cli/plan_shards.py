"""``warmgate plan``'s sharded-warmup lines (issue 38): the plan in N slices, one engine each.

For N = 2, 4, 8 (or ``--shards N``), at most what the plan allows (every engine needs a prompt
bucket and a decode seed): the estimated wall time (the slowest slice), the balance (worst slice
over the mean, compile seconds), the goal's ratio (wall over single-process / N, the issue's
goal is 1.2x at most), the decode graphs more than one engine compiles, and the cards it takes
(N x TP). Estimates of the cost model, nothing measured; engine start-up (loading the model,
once per shard, side by side) is in neither figure.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from warmgate.buckets.cost import format_span
from warmgate.buckets.shard import max_shards, slice_plan

if TYPE_CHECKING:
    from warmgate.reconcile.planning.proven_plan import ProvenPlan

__all__ = ["DEFAULT_SHARDS", "add_shard_arguments", "shard_figures", "shard_lines"]

DEFAULT_SHARDS = (2, 4, 8)


def add_shard_arguments(group: argparse._ArgumentGroup) -> None:
    """``--shards N``: the sharded estimate for N engines instead of 2, 4 and 8."""
    group.add_argument(
        "--shards",
        type=int,
        default=None,
        metavar="N",
        help="estimate a sharded warmup of N engine processes (default: 2, 4 and 8)",
    )


def shard_figures(
    result: ProvenPlan, shards: int | None, tensor_parallel: int = 1
) -> dict[str, Any]:
    """The ``sharded`` figures: one entry per N, each the `ShardedPlan.to_dict()` plus cards."""
    plan = result.effective
    spec = result.drafter.warmup_spec
    drafter = spec.shapes if spec is not None else ()
    wanted = (shards,) if shards is not None else DEFAULT_SHARDS
    out: list[dict[str, Any]] = []
    for n in wanted:
        if n < 1 or n > max_shards(plan):
            out.append({"shards": n, "error": f"at most {max_shards(plan)} shards for this plan"})
            continue
        doc = slice_plan(plan, n, drafter=drafter, model=result.model).to_dict()
        doc.pop("slices")
        out.append({**doc, "cards": n * tensor_parallel})
    return {"sharded": out}


def shard_lines(data: dict[str, Any]) -> list[str]:
    """The table lines of ``shard_figures``' result."""
    lines = []
    for i, row in enumerate(data["sharded"]):
        head = "sharded   " if i == 0 else "          "
        if "error" in row:
            lines.append(f"{head} N={row['shards']}: {row['error']}")
            continue
        single = format_span(*row["single_s"])
        lines.append(
            f"{head} N={row['shards']} ({row['cards']} cards): {format_span(*row['wall_s'])} wall "
            f"against {single} in one process, {row['goal_ratio']:.2f}x single/N, balance "
            f"{row['balance']:.3f}, {row['duplicated_decode']} decode graphs built twice"
        )
    if lines:
        lines.append(
            "           estimates with the drafter's direct warmup; model start-up not in them"
        )
    return lines
