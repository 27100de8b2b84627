"""The completion warmgate warms: the greedy's or the optimum's seeds, then padding refinement.

``complete_choice`` runs the greedy completion (``complete``), then, when it added decode seeds,
the exact optimum of those seeds (``optimum``) within ``OPERATOR_BUDGET``, a deterministic limit
calibrated at about 2 s of CPU on the project's machine (docs/benchmarks.md); the optimum's seeds
replace the greedy's when they cost fewer estimated warmup seconds and leave the same proof. With
``optimize_for="ServingSpeed"`` (the spec's default) it then refines the plan until its mean
decode KV-block padding is within ``PADDING_BOUND`` of the engine plan's (``refine``); with
``"WarmupTime"`` it keeps the cheapest plan and reports the padding it costs.

Every choice compares estimated seconds of the reference model (8B BF16, like the greedy's own
chooser), so the result depends on the engine config and the proof's scope only, not on the
model size: it is memoized per (config, scope, objective), and a burst of objects that differ
only in model size plans it once (``complete_choice.cache_info()``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Literal

from warmgate.buckets.completion.complete import (
    UnwarmableError,
    complete_proven,
    plan_diff,
    with_bucket_file,
)
from warmgate.buckets.completion.optimum import OptimumUnavailable, SolveBudget, optimal_seeds
from warmgate.buckets.completion.refine import Refinement, refine_padding
from warmgate.buckets.completion.seeds import decode_seconds
from warmgate.buckets.coverage.padding import decode_padding
from warmgate.buckets.coverage.prove import CoverageReport, prove_coverage
from warmgate.buckets.engine.bucket_file import format_bucket_file
from warmgate.buckets.engine.config import EngineShapeConfig
from warmgate.buckets.engine.plan import BucketPlan, plan_buckets

__all__ = [
    "OPERATOR_BUDGET",
    "PADDING_BOUND",
    "Completed",
    "Objective",
    "PaddingTrade",
    "complete_choice",
]

Objective = Literal["ServingSpeed", "WarmupTime"]
Source = Literal["greedy", "optimum"]

# The exact optimum is tried within these deterministic limits (one input, one plan): on the
# 200 random engines of benchmarks/bench_optimum_random.py, 175 solve within them, in 0.1 s of
# process CPU at the median and at most 6.3 s (the model, HiGHS with presolve off, the proof of
# the answer; the project's 2-core machine under load), and a refused attempt costs at most
# 0.6 s; docs/benchmarks.md, "Completion at the optimum". HiGHS's wall-clock stop is a safety
# net for a pathological program only (the one limit that could make two runs differ).
OPERATOR_BUDGET = SolveBudget(work=20_000, variables=12_000, rows=20_000, nodes=1_000, time_s=120.0)
# ServingSpeed keeps the warmed plan's mean decode KV padding within this factor of the engine's.
PADDING_BOUND = 1.05
# Completions kept for reuse: a burst's distinct engine configs (the scale run has 72 under 334
# planner inputs, which differ by model size too).
MEMO = 128


@dataclass(frozen=True, slots=True)
class PaddingTrade:
    """Mean padded/real KV blocks of decode steps: the engine's plan, the coverage completion,
    and the plan warmgate warms (refined under ServingSpeed), with what refinement added."""

    engine: float
    covered: float
    warmed: float
    target: float | None  # None: WarmupTime, nothing refined
    refined_buckets: int
    refined_s: float
    stopped: str

    @property
    def within(self) -> bool:
        """The warmed plan's mean is within PADDING_BOUND of the engine plan's."""
        return self.warmed <= PADDING_BOUND * self.engine + 1e-9

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "engine_mean_blocks": round(self.engine, 3),
            "completed_mean_blocks": round(self.covered, 3),
            "warmed_mean_blocks": round(self.warmed, 3),
            "target": None if self.target is None else round(self.target, 3),
            "refined_buckets": self.refined_buckets,
            "refined_s": round(self.refined_s, 1),
            "stopped": self.stopped,
        }


@dataclass(frozen=True, slots=True)
class Completed:
    """The plan completion chose, its proof, and how it was made."""

    plan: BucketPlan
    report: CoverageReport
    unwarmable: bool  # the proof's gaps are prefills no bucket the warmup compiles can serve
    coverage_plan: BucketPlan  # before padding refinement
    source: Source
    optimum: str  # what became of the optimum, e.g. "15.6 s of decode buckets vs 16.7 s"
    optimum_solve_s: float  # HiGHS's run time, wall clock (0 when it did not run)
    padding: PaddingTrade | None  # None when completion added no decode bucket

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (without the plans)."""
        return {
            "source": self.source,
            "optimum": self.optimum,
            "optimum_solve_s": round(self.optimum_solve_s, 3),
            "padding": None if self.padding is None else self.padding.to_dict(),
        }


@functools.lru_cache(maxsize=MEMO)
def complete_choice(
    cfg: EngineShapeConfig,
    partial_drafts: bool,
    prefix_caching: bool | None,
    optimize_for: Objective = "ServingSpeed",
) -> Completed:
    """The completed plan warmgate warms for ``cfg`` (module docstring); raises CompletionError
    when no covered plan is found (UnwarmableError is not raised: its plan is returned, with
    ``unwarmable`` set)."""
    plan, report, unwarmable = _greedy(cfg, partial_drafts, prefix_caching)
    engine = plan_buckets(cfg)
    source: Source = "greedy"
    note, cpu = "not tried: completion added no decode seed", 0.0
    if plan_diff(engine, plan).added_seeds:
        better, note, cpu = _optimum(cfg, engine, plan, report)
        if better is not None:
            (plan, report), source = better, "optimum"
    padding, final, final_report = _padding(engine, plan, report, optimize_for)
    return Completed(final, final_report, unwarmable, plan, source, note, cpu, padding)


def _greedy(
    cfg: EngineShapeConfig, partial: bool, sharing: bool | None
) -> tuple[BucketPlan, CoverageReport, bool]:
    try:
        plan, report = complete_proven(cfg, partial, prefix_caching=sharing)
    except UnwarmableError as caught:
        return caught.plan, caught.report, True
    return plan, report, False


def _optimum(
    cfg: EngineShapeConfig, engine: BucketPlan, greedy: BucketPlan, proof: CoverageReport
) -> tuple[tuple[BucketPlan, CoverageReport] | None, str, float]:
    """The greedy plan with the optimum's decode seeds instead of its own, when that is cheaper
    and proves the same; else None. Also the note for the status and the solve's CPU."""
    space = proof.space
    try:
        best = optimal_seeds(
            cfg, space.partial_drafts, prefix_caching=space.prefix_caching, budget=OPERATOR_BUDGET
        )
    except OptimumUnavailable as exc:
        return None, f"not used: {exc}", 0.0
    spent = decode_seconds(plan_diff(engine, greedy).added_decode)
    if best.seconds >= spent - 1e-9:
        return None, f"no cheaper than the greedy ({best.seconds:.1f} s)", best.solve_s
    seeds = sorted({*engine.seed_decode_buckets, *best.seeds})
    text = format_bucket_file(greedy.prompt_buckets, seeds, ("warmgate completed seed file",))
    plan = plan_buckets(with_bucket_file(cfg, text))
    again = prove_coverage(plan, space.partial_drafts, prefix_caching=space.prefix_caching)
    if _gaps(again) != _gaps(proof):
        return None, "not used: its plan proves differently from the greedy's", best.solve_s
    return (plan, again), f"{best.seconds:.1f} s of decode buckets vs {spent:.1f} s", best.solve_s


def _gaps(report: CoverageReport) -> list[tuple[Any, int]]:
    return [(u.shape, u.states) for u in report.uncovered]


def _padding(
    engine: BucketPlan, plan: BucketPlan, report: CoverageReport, objective: Objective
) -> tuple[PaddingTrade | None, BucketPlan, CoverageReport]:
    """The padding trade of a plan that changed the engine's decode buckets, refined under
    ServingSpeed when its mean passes the bound (and the refined plan proves the same)."""
    if set(plan.decode_buckets) == set(engine.decode_buckets):
        return None, plan, report
    space = report.space
    scope = {"partial_drafts": space.partial_drafts, "prefix_caching": space.prefix_caching}
    before = decode_padding(engine, **scope).mean_blocks
    covered = decode_padding(plan, **scope).mean_blocks
    if objective == "WarmupTime":
        return PaddingTrade(before, covered, covered, None, 0, 0.0, "warmup time"), plan, report
    refined = refine_padding(plan, space, PADDING_BOUND * before)
    return _refined(plan, report, refined, before, covered)


def _refined(
    plan: BucketPlan,
    report: CoverageReport,
    refined: Refinement,
    before: float,
    covered: float,
) -> tuple[PaddingTrade, BucketPlan, CoverageReport]:
    target = refined.target
    if not refined.seeds:
        trade = PaddingTrade(before, covered, covered, target, 0, 0.0, refined.stopped)
        return trade, plan, report
    space = report.space
    again = prove_coverage(refined.plan, space.partial_drafts, prefix_caching=space.prefix_caching)
    if _gaps(again) != _gaps(report):  # a refined bucket the warmup would not compile
        trade = PaddingTrade(before, covered, covered, target, 0, 0.0, "refused by the proof")
        return trade, plan, report
    added = set(refined.plan.decode_buckets) - set(plan.decode_buckets)
    trade = PaddingTrade(
        before, covered, refined.after, target, len(added), decode_seconds(added), refined.stopped
    )
    return trade, refined.plan, again
