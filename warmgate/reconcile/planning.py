"""The planning stage of a reconcile: spec -> plan pipeline -> the planning verdicts (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from warmgate.api import SpecDecodeDeployment, engine_shape_config
from warmgate.api.constants import Reason
from warmgate.api.status import MAX_UNCOVERED_LISTED, PlanSummary
from warmgate.buckets import BucketPlan, BucketPlanError, CoverageReport
from warmgate.reconcile.model_size import ModelSize, model_size
from warmgate.reconcile.plan_evaluation import (
    PlanEvaluation,
    PlanPolicy,
    evaluate_plan,
    total_buckets,
)
from warmgate.reconcile.verdict import Verdict, one_line
from warmgate.resources import PlanToRun


@dataclass(frozen=True)
class PlanningResult:
    """What the planning stage decided; ``plan`` is the plan to warm (None when it failed)."""

    plan: BucketPlan | None
    planned: Verdict
    coverage: Verdict
    summary: PlanSummary | None = None
    stalled: bool = False
    evaluation: PlanEvaluation | None = None

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
        sweep = self.evaluation.drafter.document() if self.evaluation is not None else None
        return PlanToRun(self.plan, float(estimate or 0), kv_blocks, drafter_sweep=sweep)


def evaluate(sdd: SpecDecodeDeployment) -> PlanningResult:
    """Run the plan pipeline with the spec's policy and turn it into the planning verdicts."""
    try:
        config = engine_shape_config(sdd)
        size = model_size(sdd)
        evaluation = evaluate_plan(config, PlanPolicy.of(sdd), size.profile)
    except (ValueError, ValidationError, BucketPlanError) as exc:
        reason = Reason.PLAN_FAILED if isinstance(exc, BucketPlanError) else Reason.INVALID_SPEC
        failed = Verdict("False", reason, one_line(exc))
        waiting = Verdict("Unknown", Reason.PENDING, "Waiting for a bucket plan")
        return PlanningResult(None, failed, waiting, stalled=True)
    return _result(evaluation, size, *_coverage(evaluation))


def _coverage(evaluation: PlanEvaluation) -> tuple[Verdict, bool]:
    """The CoverageProven verdict, and whether the spec stalls on it."""
    report, policy = evaluation.report, evaluation.policy
    if report.covered:
        return Verdict("True", Reason.COVERAGE_COMPLETE, _proven(report)), False
    if not policy.complete:
        message = f"{_holes(report)}; allowed by spec.buckets.coverage.complete=false"
        return Verdict("False", Reason.UNCOVERED_SHAPES_ALLOWED, message), False
    if evaluation.completion_error is not None:
        message = f"{_holes(report)}; {evaluation.completion_error}"
        return Verdict("False", Reason.UNCOVERED_SHAPES, message), True
    extra = evaluation.extra_buckets
    if evaluation.capped:
        message = (
            f"{_holes(report)}; closing them needs {extra} extra buckets, more than "
            f"spec.buckets.coverage.maxExtraBuckets={policy.max_extra_buckets}"
        )
        return Verdict("False", Reason.EXTRA_BUCKETS_CAPPED, message), True
    proven = _proven(evaluation.effective_report)
    message = f"Completed the plan with {extra} extra buckets; {proven}"
    return Verdict("True", Reason.COVERAGE_COMPLETE, message), False


def _result(
    evaluation: PlanEvaluation, size: ModelSize, coverage: Verdict, stalled: bool
) -> PlanningResult:
    plan = evaluation.effective
    cost = evaluation.cost(plan)
    drafter = evaluation.drafter
    gaps = [] if evaluation.covered else evaluation.report.uncovered
    summary = PlanSummary(
        hash=plan.digest,
        prompt_buckets=len(plan.prompt_buckets),
        decode_buckets=len(plan.seed_decode_buckets),
        spec_decode_buckets=len(plan.decode_buckets),
        total_buckets=total_buckets(plan),
        extra_buckets=evaluation.extra_buckets if evaluation.completion_applies else 0,
        uncovered_count=len(gaps),
        uncovered_shapes=[str(g.engine_config) for g in gaps[:MAX_UNCOVERED_LISTED]] or None,
        # The upper end of the estimated range (the drafter sweep included): later stages size
        # probe budgets from it.
        estimated_warmup_seconds=round(cost.high_s + drafter.seconds[1]),
        drafter_shapes=drafter.runtime_shapes if drafter.has_drafter else None,
        drafter_swept=drafter.swept if drafter.has_drafter else None,
    )
    if coverage.holds:
        estimate = f"warmup {cost}, {size.describe()}"
        message = f"{coverage.message}; {estimate}"
        if drafter.status_line():
            message = f"target: {coverage.message}; {drafter.status_line()}; {estimate}"
        coverage = Verdict(coverage.status, coverage.reason, message)
    elif coverage.reason == Reason.UNCOVERED_SHAPES_ALLOWED and drafter.status_line():
        message = f"target: {coverage.message}; {drafter.status_line()}"
        coverage = Verdict(coverage.status, coverage.reason, message)
    planned = Verdict("True", Reason.PLANNED, _plan_message(evaluation.engine_plan))
    return PlanningResult(plan, planned, coverage, summary, stalled, evaluation)


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
