"""The drafter lines of ``warmgate plan``: the draft model's own graphs and the sweep to warm them.

The plan pipeline (``ProvenPlan.drafter``, issue 16) proves the drafter graphs of the plan
warmgate would warm (the completed one when completion applies), with the same partial-draft and
prefix-caching scope as the target proof, and plans the sweep; this module adds the flags and
renders the result.
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, get_args

from warmgate.buckets.cost import (
    ModelProfile,
    estimate_direct_warmup,
    format_seconds,
    format_span,
)
from warmgate.buckets.drafter.graphs import DraftMethod
from warmgate.buckets.drafter.sweep import DEFAULT_BUDGET_S, REASONS

if TYPE_CHECKING:
    from warmgate.reconcile.planning.drafter_plan import DrafterPlan
    from warmgate.reconcile.planning.proven_plan import ProvenPlan

__all__ = ["DrafterSummary", "add_drafter_arguments", "drafter_summary"]

# Short names of the sweep's reasons for not driving a shape, for the one-line summary.
SHORT = {
    REASONS["prompt"]: "target prompt shapes",
    REASONS["partial"]: "partial drafts only",
    REASONS["structured"]: "partial drafts only (structured outputs: ordinary traffic)",
    REASONS["contiguous"]: "contiguous PA",
    REASONS["unsure"]: "no sure step",
    REASONS["kv"]: "beyond the KV cache",
    REASONS["budget"]: "over budget",
}


def add_drafter_arguments(parser: argparse.ArgumentParser) -> None:
    """--method and the sweep's time budget (the manifest's when unset)."""
    g = parser.add_argument_group("drafter", "the draft model's own graphs (docs/coverage.md)")
    g.add_argument("--method", choices=get_args(DraftMethod), default=None,
                   help="speculative method (default: the manifest's)")  # fmt: skip
    budget = (
        "time budget of the drafter warmup sweep (default: 15%% of the manifest's "
        f"warmup.timeoutSeconds, at most {DEFAULT_BUDGET_S:g}; without a manifest "
        f"{DEFAULT_BUDGET_S:g})"
    )
    g.add_argument("--sweep-budget-s", type=float, default=None, metavar="S", help=budget)


@dataclass(frozen=True)
class DrafterSummary:
    """The drafter proof and sweep of one ``warmgate plan`` run, or why there is none."""

    plan: DrafterPlan
    model: ModelProfile | None = None

    def render(self) -> str:
        """The text lines appended to the table."""
        return "\n".join(self.lines()) + "\n"

    def lines(self) -> list[str]:
        """'drafter    eagle3 k=3: N shapes the engine will compile at runtime; ...'."""
        return self._graph_lines() + self._crash_lines()

    def _crash_lines(self) -> list[str]:
        crash = self.plan.crash
        if crash is None:
            return []
        return [f"CRASH      {crash.describe()}"]

    def _graph_lines(self) -> list[str]:
        if self.plan.error is not None:
            return [f"drafter    {self.plan.error}"]
        report, sweep = self.plan.report, self.plan.sweep
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
            f"           the warmup sweep{' sample' if self.plan.sampled else ''} drives "
            f"{sweep.spec.driven} of them in {len(sweep.spec.steps)} steps, "
            f"{format_span(low, high)} (budget {format_seconds(sweep.spec.budget_s)})",
        ]
        short = dict(SHORT)
        if self.plan.sampled:  # the direct warmup covers the set: the sweep is a sample
            short[REASONS["budget"]] = "outside the sample (warmed directly)"
        missed = Counter(short.get(why, why) for _, why in sweep.spec.undriven)
        if missed:
            counts = ", ".join(f"{n} {why}" for why, n in missed.items())
            lines.append(f"           not driven: {counts}")
        spec = self.plan.warmup_spec
        if spec is not None:
            warmed = [s.engine_config for s in report.shapes if s.warmed]
            d_low, d_high = estimate_direct_warmup(spec.shapes, warmed, model=self.model)
            limits = len(self.plan.direct_limits)
            whole = "all " if not limits else ""
            lines.append(
                f"           the engine plugin warms {whole}{len(spec.shapes)} of "
                f"{len(report.shapes)} directly before /health (issue 33), estimated "
                f"{format_span(d_low, d_high)}"
            )
            if limits:
                lines.append(
                    f"           {limits} left to runtime by an engine limit: a target prompt "
                    "shape (the engine's dummy prefill cannot reach it)"
                )
        return lines

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        """JSON-ready form: the drafter report and the sweep document."""
        report, sweep = self.plan.report, self.plan.sweep
        return {
            "method": self.plan.method,
            "error": self.plan.error,
            "report": None if report is None else report.to_dict(top),
            "sweep": None if sweep is None else sweep.spec.to_json(),
            "crash": None if self.plan.crash is None else self.plan.crash.to_dict(),
        }


def drafter_summary(result: ProvenPlan) -> DrafterSummary:
    """The pipeline's drafter proof and sweep of ``result.effective``."""
    return DrafterSummary(result.drafter, result.model)
