"""``warmgate plan``'s completion figures: decode padding, and the distance to the exact optimum."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from warmgate.buckets.completion.complete import plan_diff
from warmgate.buckets.completion.optimum import Optimum, OptimumUnavailable, optimal_seeds
from warmgate.buckets.completion.seeds import decode_seconds
from warmgate.buckets.coverage.padding import decode_padding

if TYPE_CHECKING:
    from warmgate.reconcile.planning.proven_plan import ProvenPlan

__all__ = ["add_figure_arguments", "figure_lines", "figures"]


def add_figure_arguments(group: argparse._ArgumentGroup) -> None:
    """``--optimum``: solve the exact program too (small engines; needs the dev extra)."""
    group.add_argument(
        "--optimum",
        action="store_true",
        help="compare completion with the exact cheapest decode completion (HiGHS, small engines)",
    )


def figures(result: ProvenPlan, optimum: bool) -> dict[str, Any]:
    """Padding of the engine's and the completed plan, and the optimum when asked for."""
    space = result.report.space
    scope = {"partial_drafts": space.partial_drafts, "prefix_caching": space.prefix_caching}
    out: dict[str, Any] = {
        "padding": {"plan": decode_padding(result.engine_plan, **scope).to_dict()}
    }
    if result.completed is not None:
        out["padding"]["completed"] = decode_padding(result.completed, **scope).to_dict()
    if optimum and result.diff is not None:
        out["optimum"] = _optimum(result, scope)
    return out


def figure_lines(data: dict[str, Any]) -> list[str]:
    """The table lines of ``figures``' result."""
    pad = data["padding"]
    lines = [f"padding    engine plan     {_pad(pad['plan'])}"]
    if "completed" in pad:
        lines.append(f"           completed plan  {_pad(pad['completed'])}")
    best = data.get("optimum")
    if best is None:
        return lines
    if "error" in best:
        return [*lines, f"optimum    not computed: {best['error']}"]
    return [
        *lines,
        f"optimum    decode additions: completion {best['completion_s']:.1f} s, optimum "
        f"{best['estimated_s']:.1f} s (midpoint estimates) = {_ratio(best['ratio'])} the optimum; "
        f"optimum {len(best['seeds'])} seeds -> {len(best['decode'])} decode buckets, "
        f"HiGHS {best['solve_s']:.1f} s",
    ]


def _optimum(result: ProvenPlan, scope: dict[str, bool]) -> dict[str, Any]:
    assert result.diff is not None
    # Coverage's own additions: padding refinement is not part of the optimum's problem.
    done = result.completion
    covered = plan_diff(result.engine_plan, done.coverage_plan) if done else result.diff
    spent = decode_seconds(covered.added_decode, result.model)
    try:
        best: Optimum = optimal_seeds(
            result.engine_plan.config,
            scope["partial_drafts"],
            prefix_caching=scope["prefix_caching"],
            model=result.model,
        )
    except OptimumUnavailable as exc:
        return {"error": str(exc)}
    ratio = round(spent / best.seconds, 3) if best.seconds else (1.0 if not spent else None)
    return {**best.to_dict(), "completion_s": round(spent, 2), "ratio": ratio}


def _ratio(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.2f}x"


def _pad(figures: dict[str, float]) -> str:
    return (
        f"tokens mean {figures['mean_tokens']:.2f}x worst {figures['worst_tokens']:.2f}x, "
        f"KV blocks mean {figures['mean_blocks']:.2f}x worst {figures['worst_blocks']:.1f}x "
        "(padded/real, decode)"
    )
