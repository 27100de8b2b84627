"""The one plan pipeline: the engine's bucket plan, its coverage proof, completion and cost.

The operator (`planning.evaluate`), `warmgate plan` and `warmgate demo` all call
`evaluate_plan`, so the three can never disagree about which plan is warmed and whether it is
proven: the policy (partial drafts, prefix caching, completion and its cap) is applied here
only.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
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
    UncoveredShape,
    estimate_buckets,
    estimate_plan,
    plan_buckets,
    plan_diff,
    prove_coverage,
)
from warmgate.buckets.completion.choose import Completed, Objective, complete_choice
from warmgate.buckets.drafter.sweep import DEFAULT_BUDGET_S
from warmgate.buckets.engine.lazy import cached_property
from warmgate.buckets.engine.strategies import decode_ranges, prompt_ranges
from warmgate.reconcile.planning.drafter_plan import DrafterPlan, plan_drafter, sweep_budget

# spec.buckets.coverage.maxExtraBuckets' default (warmgate.api.bucketing.CoveragePolicy).
DEFAULT_MAX_EXTRA_BUCKETS: Final = 64
# Plans above this many buckets are refused before planning: planning 22,372 buckets takes 1 to
# 2.5 s on the project's 2-core machine (benchmarks/bench_plan_size.py), so this bound keeps
# planning within seconds, and a warmup that compiles 50,000 graphs takes at least 5.5 h at
# the cost model's fastest 0.4 s per graph of an 8B model.
MAX_PLAN_BUCKETS: Final = 50_000


@dataclass(frozen=True)
class PlanSize:
    """How many buckets a configuration generates, counted without generating them.

    ``prompt`` and ``decode_seeds`` apply the engine's filters and the decode corrector to the
    strategy's ranges (not the long-context edge rule, which moves a ctx value rather than
    adding one); the spec-decode expansion then adds up to two buckets per seed, so the plan
    has between ``low`` and ``high`` buckets.
    """

    prompt: int
    decode_seeds: int
    expands: bool

    @property
    def low(self) -> int:
        """Buckets at least: prompt plus seed decode buckets."""
        return self.prompt + self.decode_seeds

    @property
    def high(self) -> int:
        """Buckets at most, with every seed expanded twice."""
        return self.prompt + self.decode_seeds * (3 if self.expands else 1)

    def warmup_low_s(self, model: ModelProfile) -> float:
        """The fewest seconds its warmup can take: each graph at least the smallest one's."""
        return self.low * estimate_buckets([], [(1, 1, 1)], model, overhead=False).low_s


def _prompt_count(config: EngineShapeConfig) -> int:
    ranges = prompt_ranges(config)
    ctx = sorted(ranges.ctx)
    mml, block, mbt = config.max_model_len, config.block_size, config.max_num_batched_tokens
    if config.merged_prefill:
        mnps = config.max_num_prefill_seqs
        fits = (bisect.bisect_right(ctx, mnps * ((mml - q // mnps) // block)) for q in ranges.query)
        return len(set(ranges.bs)) * sum(fits)
    max_ctx = -(-(mml - 1) // block)
    pairs = sum(1 for bs in set(ranges.bs) for q in set(ranges.query) if q <= mml and bs * q <= mbt)
    return pairs * bisect.bisect_right(ctx, max_ctx)


def _decode_count(config: EngineShapeConfig) -> int:
    ranges = decode_ranges(config)
    ctx = sorted(set(ranges.ctx))
    if config.contiguous_pa:
        extra = 1 if config.num_gpu_blocks and ctx and ctx[-1] < config.num_gpu_blocks else 0
        return len(set(ranges.bs)) * (len(ctx) + extra)
    count = 0
    for bs in set(ranges.bs):
        cap = bs * config.max_blocks_per_seq
        below = bisect.bisect_left(ctx, cap) - bisect.bisect_left(ctx, bs)
        count += max(below, 0) + (1 if ctx and ctx[-1] >= max(bs, cap) else 0)
    return count


def plan_size(config: EngineShapeConfig) -> PlanSize:
    """The bucket counts of ``config``, in time proportional to its ranges, not their product."""
    expands = config.num_speculative_tokens > 0
    if config.bucket_file is not None:
        lines = [line for line in config.bucket_file.splitlines() if line.strip()]
        return PlanSize(len(lines), 0, expands)
    return PlanSize(_prompt_count(config), _decode_count(config), expands)


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
    # What completion trades: decode padding near the engine's (more warmup) or warmup time.
    optimize_for: Objective = "ServingSpeed"
    # Structured-output requests served (vLLM's default): drafts truncated anywhere, every
    # prefill chunk sampled (docs/coverage.md, fact 10; issue 25 item 4).
    structured_outputs: bool = True

    @classmethod
    def of(cls, sdd: SpecDecodeDeployment) -> PlanPolicy:
        """The policy a SpecDecodeDeployment states (the engine's prefix-caching switch, the
        speculative method, and a sweep budget from spec.warmup.timeoutSeconds too)."""
        coverage = sdd.spec.buckets.coverage
        structured = sdd.spec.engine.structured_outputs
        return cls(
            # Grammar validation truncates drafts anywhere: partial drafts are ordinary traffic.
            partial_drafts=coverage.partial_drafts or structured,
            prefix_caching=sdd.spec.engine.enable_prefix_caching,
            complete=coverage.complete,
            max_extra_buckets=coverage.max_extra_buckets,
            method=sdd.spec.speculative.method,
            sweep_budget_s=sweep_budget(sdd.spec.warmup.timeout_seconds),
            optimize_for=coverage.optimize_for,
            structured_outputs=structured,
        )


@dataclass(frozen=True)
class ProvenPlan:
    """The engine's plan, its proof, and what completion made of it under the policy."""

    engine_plan: BucketPlan
    report: CoverageReport
    completed: BucketPlan | None
    completion_error: str | None
    policy: PlanPolicy
    model: ModelProfile
    # UnwarmableError: the proof of ``completed``, whose uncovered shapes no bucket the engine's
    # warmup compiles can serve (docs/coverage.md, "Buckets the warmup never compiles").
    unwarmable: CoverageReport | None = None
    # The proof completion made of ``completed`` under the policy (None: prove it when needed).
    completed_report: CoverageReport | None = None
    # How completion chose its seeds (greedy or optimum) and the padding trade (issue 25).
    completion: Completed | None = None

    @cached_property
    def diff(self) -> PlanDiff | None:
        """The buckets completion added (None when it did not run or failed)."""
        return None if self.completed is None else plan_diff(self.engine_plan, self.completed)

    @property
    def extra_buckets(self) -> int:
        """How many buckets completion adds to the engine's plan (0 without completion)."""
        return self.diff.added if self.diff is not None else 0

    @property
    def padding_buckets(self) -> int:
        """Of ``extra_buckets``, those padding refinement added (not capped by the policy)."""
        padding = self.completion.padding if self.completion is not None else None
        return padding.refined_buckets if padding is not None else 0

    @property
    def completion_applies(self) -> bool:
        """Completion ran, succeeded and the buckets coverage needs stay within the cap."""
        coverage = self.extra_buckets - self.padding_buckets
        return self.completed is not None and coverage <= self.policy.max_extra_buckets

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
        return self.report.covered or (self.completion_applies and self.unwarmable is None)

    @property
    def known_unwarmable(self) -> list[UncoveredShape]:
        """The shapes the warmed plan leaves to runtime because the engine's warmup cannot
        compile them (empty unless completion ended with UnwarmableError and applies)."""
        if self.unwarmable is None or not self.completion_applies:
            return []
        return list(self.unwarmable.uncovered)

    @cached_property
    def effective_report(self) -> CoverageReport:
        """The proof of the plan warmgate warms (proven again after completion)."""
        if self.effective is self.engine_plan:
            return self.report
        if self.unwarmable is not None:
            return self.unwarmable  # completion's own proof of the plan it returned
        if self.completed_report is not None:
            return self.completed_report  # the same proof, already made by completion
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
        return plan_drafter(
            self.effective,
            space,
            policy.method,
            policy.sweep_budget_s,
            self.model,
            structured_outputs=policy.structured_outputs,
        )

    def cost(self, plan: BucketPlan, *, recipe_cache: bool = False) -> CostEstimate:
        """The warmup time estimate of ``plan`` for this evaluation's model."""
        return estimate_plan(plan, self.model, recipe_cache=recipe_cache)


def evaluate_plan(config: EngineShapeConfig, policy: PlanPolicy, model: ModelProfile) -> ProvenPlan:
    """Plan the buckets, prove coverage, and complete the plan when the policy asks for it.

    Raises what the planner raises for a configuration the engine refuses (BucketPlanError,
    ValueError); a completion that finds no covered plan is reported, not raised. When some
    states can run no bucket the engine's warmup compiles (UnwarmableError), its best plan is
    kept as the completion, with its proof in ``unwarmable``: warming it covers everything else.
    """
    plan = plan_buckets(config)
    report = prove_coverage(plan, policy.partial_drafts, prefix_caching=policy.prefix_caching)
    if not policy.complete or report.covered:
        return ProvenPlan(plan, report, None, None, policy, model)
    try:
        done = complete_choice(
            config, policy.partial_drafts, policy.prefix_caching, policy.optimize_for
        )
    except CompletionError as exc:
        return ProvenPlan(plan, report, None, str(exc), policy, model)
    unwarmable = done.report if done.unwarmable else None
    return ProvenPlan(plan, report, done.plan, None, policy, model, unwarmable, done.report, done)
