"""The one plan pipeline: the engine's bucket plan, its coverage proof, completion and cost.

The operator (`planning.evaluate`), `warmgate plan` and `warmgate demo` all call
`evaluate_plan`, so the three can never disagree about which plan is warmed and whether it is
proven: the policy (partial drafts, prefix caching, completion and its cap) is applied here
only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Final

from warmgate.api import SpecDecodeDeployment
from warmgate.buckets import (
    BucketPlan,
    CompletionError,
    CostEstimate,
    CoverageReport,
    EngineShapeConfig,
    ModelProfile,
    PlanDiff,
    complete_plan,
    estimate_plan,
    plan_buckets,
    plan_diff,
    prove_coverage,
)
from warmgate.buckets.sweep import DEFAULT_BUDGET_S
from warmgate.reconcile.drafter_plan import DrafterPlan, plan_drafter, sweep_budget

# spec.buckets.coverage.maxExtraBuckets' default (warmgate.api.bucketing.CoveragePolicy).
DEFAULT_MAX_EXTRA_BUCKETS: Final = 64


def total_buckets(plan: BucketPlan) -> int:
    """The graphs a warmup compiles: prompt plus decode buckets (spec-decode rows included)."""
    return len(plan.prompt_buckets) + len(plan.decode_buckets)


@dataclass(frozen=True)
class PlanPolicy:
    """What the proof covers and what completion may add (spec.buckets.coverage)."""

    partial_drafts: bool = True
    # None: the engine default (on, unless contiguous PA forces it off).
    prefix_caching: bool | None = None
    complete: bool = True
    max_extra_buckets: int = DEFAULT_MAX_EXTRA_BUCKETS
    # The speculative method (None: unknown, no drafter proof) and the drafter sweep's budget.
    method: str | None = None
    sweep_budget_s: float = DEFAULT_BUDGET_S

    @classmethod
    def of(cls, sdd: SpecDecodeDeployment) -> PlanPolicy:
        """The policy a SpecDecodeDeployment states (the engine's prefix-caching switch, the
        speculative method, and a sweep budget from spec.warmup.timeoutSeconds too)."""
        coverage = sdd.spec.buckets.coverage
        return cls(
            partial_drafts=coverage.partial_drafts,
            prefix_caching=sdd.spec.engine.enable_prefix_caching,
            complete=coverage.complete,
            max_extra_buckets=coverage.max_extra_buckets,
            method=sdd.spec.speculative.method,
            sweep_budget_s=sweep_budget(sdd.spec.warmup.timeout_seconds),
        )


@dataclass(frozen=True)
class PlanEvaluation:
    """The engine's plan, its proof, and what completion made of it under the policy."""

    engine_plan: BucketPlan
    report: CoverageReport
    completed: BucketPlan | None
    completion_error: str | None
    policy: PlanPolicy
    model: ModelProfile

    @cached_property
    def diff(self) -> PlanDiff | None:
        """The buckets completion added (None when it did not run or failed)."""
        return None if self.completed is None else plan_diff(self.engine_plan, self.completed)

    @property
    def extra_buckets(self) -> int:
        """How many buckets completion adds to the engine's plan (0 without completion)."""
        return self.diff.added if self.diff is not None else 0

    @property
    def completion_applies(self) -> bool:
        """Completion ran, succeeded and stays within the policy's cap."""
        return self.completed is not None and self.extra_buckets <= self.policy.max_extra_buckets

    @property
    def capped(self) -> bool:
        """Completion succeeded but needs more buckets than the policy allows."""
        return self.completed is not None and not self.completion_applies

    @property
    def effective(self) -> BucketPlan:
        """The plan warmgate warms: the completed one when completion applies."""
        if self.completion_applies and self.completed is not None:
            return self.completed
        return self.engine_plan

    @property
    def covered(self) -> bool:
        """The plan warmgate warms leaves no reachable shape unwarmed."""
        return self.report.covered or self.completion_applies

    @cached_property
    def effective_report(self) -> CoverageReport:
        """The proof of the plan warmgate warms (proven again after completion)."""
        if self.effective is self.engine_plan:
            return self.report
        policy = self.policy
        return prove_coverage(
            self.effective, policy.partial_drafts, prefix_caching=policy.prefix_caching
        )

    @cached_property
    def drafter(self) -> DrafterPlan:
        """The drafter graphs of the plan warmgate warms, in the target proof's scope, and the
        warmup sweep that drives them (none for ngram, k = 0 or an unknown method)."""
        policy = self.policy
        space = self.report.space
        return plan_drafter(self.effective, space, policy.method, policy.sweep_budget_s, self.model)

    def cost(self, plan: BucketPlan, *, recipe_cache: bool = False) -> CostEstimate:
        """The warmup time estimate of ``plan`` for this evaluation's model."""
        return estimate_plan(plan, self.model, recipe_cache=recipe_cache)


def evaluate_plan(
    config: EngineShapeConfig, policy: PlanPolicy, model: ModelProfile
) -> PlanEvaluation:
    """Plan the buckets, prove coverage, and complete the plan when the policy asks for it.

    Raises what the planner raises for a configuration the engine refuses (BucketPlanError,
    ValueError); a completion that finds no covered plan is reported, not raised.
    """
    plan = plan_buckets(config)
    report = prove_coverage(plan, policy.partial_drafts, prefix_caching=policy.prefix_caching)
    completed: BucketPlan | None = None
    error: str | None = None
    if policy.complete and not report.covered:
        try:
            completed = complete_plan(
                config, policy.partial_drafts, prefix_caching=policy.prefix_caching
            )
        except CompletionError as exc:
            error = str(exc)
    return PlanEvaluation(plan, report, completed, error, policy, model)
