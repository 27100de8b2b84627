"""The drafter lines of ``warmgate plan``: the draft model's own graphs and the sweep to warm them.

Self-contained so that ``warmgate plan`` calls it in one place (issue 16, phase 1). It proves the
drafter graphs of the plan warmgate would warm (the completed one when completion applies), with
the same partial-draft and prefix-caching scope as the target proof, and plans the sweep.
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, get_args

from warmgate.api import load_manifest
from warmgate.buckets.cost import format_seconds, format_span
from warmgate.buckets.drafter import DrafterModelError, DrafterReport, DraftMethod, prove_drafter
from warmgate.buckets.sweep import DEFAULT_BUDGET_S, REASONS, SweepPlan, plan_sweep

if TYPE_CHECKING:
    from warmgate.reconcile.plan_evaluation import PlanEvaluation

__all__ = ["DrafterSummary", "add_drafter_arguments", "drafter_summary"]

# Short names of the sweep's reasons for not driving a shape, for the one-line summary.
SHORT = {
    REASONS["prompt"]: "target prompt shapes",
    REASONS["partial"]: "partial drafts only",
    REASONS["contiguous"]: "contiguous PA",
    REASONS["unsure"]: "no sure step",
    REASONS["kv"]: "beyond the KV cache",
    REASONS["budget"]: "over budget",
}


def add_drafter_arguments(parser: argparse.ArgumentParser) -> None:
    """--method (manifest wins when unset) and the sweep's time budget."""
    g = parser.add_argument_group("drafter", "the draft model's own graphs (docs/coverage.md)")
    g.add_argument("--method", choices=get_args(DraftMethod), default=None,
                   help="speculative method (default: the manifest's)")  # fmt: skip
    budget = f"time budget of the drafter warmup sweep (default {DEFAULT_BUDGET_S:g})"
    g.add_argument("--sweep-budget-s", type=float, default=DEFAULT_BUDGET_S, metavar="S",
                   help=budget)  # fmt: skip


@dataclass(frozen=True)
class DrafterSummary:
    """The drafter proof and sweep of one ``warmgate plan`` run, or why there is none."""

    method: str | None
    report: DrafterReport | None = None
    sweep: SweepPlan | None = None
    error: str | None = None

    def render(self) -> str:
        """The text lines appended to the table."""
        return "\n".join(self.lines()) + "\n"

    def lines(self) -> list[str]:
        """'drafter    eagle3 k=3: N shapes the engine will compile at runtime; ...'."""
        if self.error is not None:
            return [f"drafter    {self.error}"]
        report, sweep = self.report, self.sweep
        if report is None or sweep is None:
            return ["drafter    method unknown: pass --method or a manifest"]
        if not report.has_drafter:
            return [f"drafter    {report.method}: {report.note}"]
        runtime, unwarmed = len(report.shapes), len(report.unwarmed)
        low, high = sweep.seconds
        lines = [
            f"drafter    {report.method} k={report.k}: {unwarmed} shapes the engine will compile "
            f"at runtime (the drafter runs {runtime}, its prompt warmup compiles "
            f"{runtime - unwarmed})",
            f"           the warmup sweep drives {len(sweep.driven)} of them in "
            f"{len(sweep.steps)} steps, {format_span(low, high)} "
            f"(budget {format_seconds(sweep.budget_s)})",
        ]
        missed = Counter(SHORT.get(why, why) for _, why in sweep.undriven)
        if missed:
            counts = ", ".join(f"{n} {why}" for why, n in missed.items())
            lines.append(f"           not driven: {counts}")
        return lines

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        """JSON-ready form: the drafter report and the sweep document."""
        return {
            "method": self.method,
            "error": self.error,
            "report": None if self.report is None else self.report.to_dict(top),
            "sweep": None if self.sweep is None else self.sweep.to_dict(),
        }


def drafter_summary(args: argparse.Namespace, result: PlanEvaluation) -> DrafterSummary:
    """Prove the drafter graphs of ``result.effective`` and plan their sweep."""
    method = args.method
    if method is None and args.manifest is not None:
        method = load_manifest(args.manifest).spec.speculative.method
    if method is None:
        return DrafterSummary(None)
    space = result.report.space
    try:
        report = prove_drafter(
            result.effective, method, space.partial_drafts, prefix_caching=space.prefix_caching
        )
    except DrafterModelError as exc:
        return DrafterSummary(method, error=f"{method}: not modelled: {exc}")
    sweep = plan_sweep(result.effective, report, budget_s=args.sweep_budget_s, model=result.model)
    return DrafterSummary(method, report, sweep)
