"""The drafter stage of the plan pipeline: the draft model's graphs and the sweep that warms them.

eagle, eagle3 and mtp run a draft model whose graphs vllm-gaudi's warmup mostly never compiles
(docs/coverage.md, "Drafter graphs"). For the plan warmgate warms, ``plan_drafter`` proves which
graphs the engine would compile at runtime and plans the warmup sweep that makes the drafter run
them inside the warmup Job (``warmgate.buckets.drafter.sweep``); the runner drives it and
verifies it with its compile hook (docs/runner.md). ngram and k = 0 have no drafter graphs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, cast, get_args

from warmgate.buckets import BucketPlan, ModelProfile
from warmgate.buckets.cost import format_span
from warmgate.buckets.coverage.states import StateSpace
from warmgate.buckets.drafter.crash import DrafterCrash, drafter_crash
from warmgate.buckets.drafter.graphs import (
    DrafterModelError,
    DrafterReport,
    DraftMethod,
    prove_drafter,
)
from warmgate.buckets.drafter.sweep import DEFAULT_BUDGET_S, DrafterSweep, plan_sweep
from warmgate.buckets.engine.lazy import cached_property
from warmgate.contract.drafterwarm import DrafterWarmupSpec, make_spec
from warmgate.contract.sweepplan import SweepSpec

# The sweep may take this share of one warmup attempt (spec.warmup.timeoutSeconds), at most
# DEFAULT_BUDGET_S: the engine's own warmup keeps most of the attempt (docs/runner.md).
SWEEP_SHARE: Final = 0.15


# Once the engine plugin warms the plan's whole drafter set directly (issue 33), the sweep is no
# longer where the drafter's graphs come from: it is the end-to-end confirmation that traffic
# through the real scheduler reaches only graphs the direct warmup built (its steps are replayed
# in the probe, where any compile fails the run). So its budget shrinks to a sample: the steps
# the greedy plan takes first (the most planned graphs per estimated second) within this many
# estimated Gaudi seconds (high estimate).
SAMPLE_BUDGET_S: Final = 120.0


def sweep_budget(timeout_seconds: float) -> float:
    """The sweep's time budget for one warmup attempt, e.g. 3600 s -> 540 s; 86400 s -> 1800 s."""
    return min(DEFAULT_BUDGET_S, SWEEP_SHARE * timeout_seconds)


@dataclass(frozen=True)
class DrafterPlan:
    """The drafter graphs of a plan and their sweep, or why there are none."""

    method: str | None
    report: DrafterReport | None = None
    sweep: DrafterSweep | None = None
    error: str | None = None
    # Reachable states in which the drafter's assert crashes the engine (issue 25 item 5).
    crash: DrafterCrash | None = None
    # The engine's block size and max_model_len (the direct warmup's positions and block tables).
    block_size: int | None = None
    max_model_len: int = 0
    profile: str = "v0.26.0"
    # The sweep is the sample of one the direct warmup covers (SAMPLE_BUDGET_S), not the whole
    # sweep the budget allowed.
    sampled: bool = False

    @property
    def has_drafter(self) -> bool:
        """A draft model on the HPU whose graphs were proven (eagle, eagle3, mtp with k > 0)."""
        return self.report is not None and self.report.has_drafter

    @property
    def runtime_shapes(self) -> int:
        """The drafter graphs the engine would compile at runtime without the sweep."""
        return len(self.report.unwarmed) if self.report is not None else 0

    @property
    def swept(self) -> int:
        """Of those, the graphs the warmup sweep surely makes the drafter compile."""
        return self.sweep.spec.driven if self.sweep is not None else 0

    @property
    def seconds(self) -> tuple[float, float]:
        """The sweep's estimated (low, high) seconds; (0, 0) without one."""
        return self.sweep.seconds if self.sweep is not None else (0.0, 0.0)

    @property
    def sweep_spec(self) -> SweepSpec | None:
        """The runner plan's ``drafter_sweep`` (format warmgate-drafter-sweep/1), possibly without
        steps; None when there is no modelled drafter (the runner then runs no compile hook)."""
        if not self.has_drafter or self.sweep is None:
            return None
        return self.sweep.spec

    @cached_property
    def warmup_spec(self) -> DrafterWarmupSpec | None:
        """Every drafter shape of the plan, for the engine plugin's direct warmup (the runner
        plan's ``drafter_warmup``, issue 33): the whole set ``prove_drafter`` lists, partial
        drafts, structured-output prefills and the graphs the engine warms itself included.
        None without a modelled drafter."""
        report = self.report
        if report is None or not report.has_drafter or self.block_size is None:
            return None
        shapes, _ = direct_shapes(report)
        return make_spec(
            report.method,
            report.k,
            self.block_size,
            self.max_model_len,
            shapes,
            profile=self.profile,
        )

    @property
    def direct_limits(self) -> list[tuple[str, int, int, int]]:
        """The drafter shapes the direct warmup cannot reach (``direct_shapes``'s engine limit)."""
        return direct_shapes(self.report)[1] if self.report is not None else []

    def status_line(self) -> str:
        """'drafter: N shapes the engine compiles at runtime, M driven by the warmup sweep'."""
        if self.error is not None:
            return f"drafter: {self.error}"
        if not self.has_drafter:
            return ""
        line = (
            f"drafter: {self.runtime_shapes} shapes the engine compiles at runtime, "
            f"{self.swept} driven by the warmup sweep"
        )
        if self.sweep is not None and self.sweep.spec.steps:
            line += f" ({len(self.sweep.spec.steps)} steps, {format_span(*self.seconds)})"
        return line


# The one engine limit of the direct warmup (issue 33): a drafter prefill graph runs on the
# target's prompt bucket, and a prompt-phase drafter shape the engine's own prompt warmup does not
# build is one whose target prompt shape is no warmed bucket of the engine's list (not in the
# plan, or over max_num_batched_tokens). The plugin's dummy prefill is looked up like any prefill
# and lands on another bucket, so it cannot run that graph; the sweep's undriven reason "a target
# prompt shape" is the same state, and the target's coverage proof counts it.
DIRECT_LIMIT: Final = (
    "a target prompt shape: the drafter's prefill runs on the target's prompt bucket, which the "
    "engine's list does not warm; the engine's dummy prefill cannot reach it"
)


def direct_shapes(report: DrafterReport) -> tuple[list[tuple[str, int, int, int]], list[Any]]:
    """(the shapes the direct warmup warms, those it cannot: ``DIRECT_LIMIT``): every shape
    ``prove_drafter`` lists but the prompt-phase ones the engine's own warmup does not build."""
    limits = [s.engine_config for s in report.shapes if s.phase == "prompt" and not s.warmed]
    limited = set(limits)
    shapes = [s.engine_config for s in report.shapes if s.engine_config not in limited]
    return shapes, limits


def plan_drafter(
    plan: BucketPlan,
    space: StateSpace,
    method: str | None,
    budget_s: float,
    model: ModelProfile,
    *,
    structured_outputs: bool = True,
) -> DrafterPlan:
    """Prove the drafter graphs of ``plan`` in the target proof's scope and plan their sweep."""
    if method is None:
        return DrafterPlan(None)
    if method not in get_args(DraftMethod):
        return DrafterPlan(method, error=f"{method}: no drafter model for this method")
    typed = cast(DraftMethod, method)
    crash = drafter_crash(plan.config, method)
    try:
        report = prove_drafter(
            plan,
            typed,
            space.partial_drafts,
            prefix_caching=space.prefix_caching,
            structured_outputs=structured_outputs,
        )
    except DrafterModelError as exc:
        return DrafterPlan(method, error=f"{method}: not modelled: {exc}", crash=crash)
    # The direct warmup covers every shape but the engine limit, which no sweep drives either
    # (DIRECT_LIMIT): the sweep is a sample.
    sampled = report.has_drafter
    budget = min(budget_s, SAMPLE_BUDGET_S) if sampled else budget_s
    sweep = plan_sweep(plan, report, budget_s=budget, model=model)
    return DrafterPlan(
        method,
        report,
        sweep,
        crash=crash,
        block_size=plan.config.block_size,
        max_model_len=plan.config.max_model_len,
        profile=plan.config.profile,
        sampled=sampled,
    )
