"""The planning stage of a reconcile: spec -> bucket plan -> coverage proof -> status (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import ValidationError

from warmgate.api import SpecDecodeDeployment, engine_shape_config
from warmgate.api.constants import Reason
from warmgate.api.status import MAX_UNCOVERED_LISTED, PlanSummary
from warmgate.buckets import BucketPlan, BucketPlanError, plan_buckets
from warmgate.buckets.complete import CompletionError, complete_plan
from warmgate.buckets.cost import CostEstimate, ModelProfile, estimate_plan
from warmgate.buckets.coverage import CoverageReport, prove_coverage
from warmgate.reconcile.verdict import Verdict, one_line
from warmgate.resources import PlanToRun

# "Llama-3.3-70B-Instruct" -> 70.0: the cost model scales with model size; names are the only
# size hint a spec carries, so an unparsable name falls back to the cost model's 8B reference.
_PARAMS_B = re.compile(r"(?<![0-9.])(\d+(?:\.\d+)?)[bB](?![a-zA-Z])")


@dataclass
class PlanningResult:
    """What the planning stage decided; ``plan`` is the plan to warm (None when it failed)."""

    plan: BucketPlan | None
    planned: Verdict
    coverage: Verdict
    summary: PlanSummary | None = None
    stalled: bool = False

    @property
    def may_warm(self) -> bool:
        """Warm a proven plan, or one whose holes the spec explicitly allows."""
        allowed = self.coverage.reason == Reason.UNCOVERED_SHAPES_ALLOWED
        return self.plan is not None and not self.stalled and (self.coverage.holds or allowed)

    def to_run(self, kv_blocks: int | None) -> PlanToRun | None:
        """The plan to build children for, with its estimate; None when nothing may warm."""
        if self.plan is None or not self.may_warm:
            return None
        estimate = self.summary.estimated_warmup_seconds if self.summary else None
        return PlanToRun(self.plan, float(estimate or 0), kv_blocks)


def _prefix_caching(sdd: SpecDecodeDeployment) -> bool | None:
    """The spec's prefix-caching switch; None lets the prover take the engine default."""
    return sdd.spec.engine.enable_prefix_caching


def model_profile(sdd: SpecDecodeDeployment) -> ModelProfile:
    """Model size for the cost model, read from the model name when it states one."""
    match = _PARAMS_B.search(sdd.spec.model.name)
    return ModelProfile(params_b=float(match.group(1))) if match else ModelProfile()


def evaluate(sdd: SpecDecodeDeployment) -> PlanningResult:
    """Plan the buckets, prove coverage and complete the plan as the spec's policy asks."""
    try:
        cfg = engine_shape_config(sdd)
        plan = plan_buckets(cfg)
    except (ValueError, ValidationError, BucketPlanError) as exc:
        reason = Reason.PLAN_FAILED if isinstance(exc, BucketPlanError) else Reason.INVALID_SPEC
        failed = Verdict("False", reason, one_line(exc))
        waiting = Verdict("Unknown", Reason.PENDING, "Waiting for a bucket plan")
        return PlanningResult(None, failed, waiting, stalled=True)
    policy = sdd.spec.buckets.coverage
    report = prove_coverage(plan, policy.partial_drafts, prefix_caching=_prefix_caching(sdd))
    planned = Verdict("True", Reason.PLANNED, _plan_message(plan))
    if report.covered:
        return _result(
            sdd, plan, planned, Verdict("True", Reason.COVERAGE_COMPLETE, _proven(report))
        )
    if not policy.complete:
        message = f"{_holes(report)}; allowed by spec.buckets.coverage.complete=false"
        return _result(
            sdd, plan, planned, Verdict("False", Reason.UNCOVERED_SHAPES_ALLOWED, message), report
        )
    return _complete(sdd, plan, planned, report)


def _complete(
    sdd: SpecDecodeDeployment, plan: BucketPlan, planned: Verdict, report: CoverageReport
) -> PlanningResult:
    policy = sdd.spec.buckets.coverage
    try:
        done = complete_plan(
            plan.config, policy.partial_drafts, prefix_caching=_prefix_caching(sdd)
        )
    except CompletionError as exc:
        failed = Verdict("False", Reason.UNCOVERED_SHAPES, f"{_holes(report)}; {exc}")
        return _result(sdd, plan, planned, failed, report, stalled=True)
    extra = total_buckets(done) - total_buckets(plan)
    if extra > policy.max_extra_buckets:
        message = (
            f"{_holes(report)}; closing them needs {extra} extra buckets, more than "
            f"spec.buckets.coverage.maxExtraBuckets={policy.max_extra_buckets}"
        )
        failed = Verdict("False", Reason.EXTRA_BUCKETS_CAPPED, message)
        return _result(sdd, plan, planned, failed, report, stalled=True)
    proven = prove_coverage(done, policy.partial_drafts, prefix_caching=_prefix_caching(sdd))
    message = f"Completed the plan with {extra} extra buckets; {_proven(proven)}"
    return _result(
        sdd, done, planned, Verdict("True", Reason.COVERAGE_COMPLETE, message), extra=extra
    )


def _result(
    sdd: SpecDecodeDeployment,
    plan: BucketPlan,
    planned: Verdict,
    coverage: Verdict,
    report: CoverageReport | None = None,
    *,
    extra: int = 0,
    stalled: bool = False,
) -> PlanningResult:
    cost = estimate_plan(plan, model_profile(sdd))
    summary = _summary(plan, extra, report, cost)
    if coverage.status == "True":
        coverage = Verdict(coverage.status, coverage.reason, f"{coverage.message}; warmup {cost}")
    return PlanningResult(plan, planned, coverage, summary, stalled)


def _summary(
    plan: BucketPlan, extra: int, report: CoverageReport | None, cost: CostEstimate
) -> PlanSummary:
    gaps = report.uncovered if report else []
    return PlanSummary(
        hash=plan.digest,
        prompt_buckets=len(plan.prompt_buckets),
        decode_buckets=len(plan.seed_decode_buckets),
        spec_decode_buckets=len(plan.decode_buckets),
        total_buckets=total_buckets(plan),
        extra_buckets=extra,
        uncovered_count=len(gaps),
        uncovered_shapes=[str(g.engine_config) for g in gaps[:MAX_UNCOVERED_LISTED]] or None,
        # The upper end of the estimated range: later stages size probe budgets from it.
        estimated_warmup_seconds=round(cost.high_s),
    )


def total_buckets(plan: BucketPlan) -> int:
    """The graphs a warmup compiles: prompt plus decode buckets (spec-decode rows included)."""
    return len(plan.prompt_buckets) + len(plan.decode_buckets)


def _plan_message(plan: BucketPlan) -> str:
    return (
        f"{len(plan.prompt_buckets)} prompt and {len(plan.decode_buckets)} decode buckets "
        f"({len(plan.seed_decode_buckets)} seeds, +{plan.spec_added} from the spec-decode "
        f"expansion), profile {plan.config.profile}"
    )


def _proven(report: CoverageReport) -> str:
    return f"all {report.states:,} reachable states run a planned bucket"


def _holes(report: CoverageReport) -> str:
    top = report.uncovered[0]
    return (
        f"{len(report.uncovered)} shapes would run unwarmed in {report.uncovered_states:,} of "
        f"{report.states:,} reachable states, e.g. {top.engine_config} for state {top.example}"
    )
