"""The planning stage of a reconcile: spec -> plan pipeline -> the planning verdicts (pure)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, replace
from typing import Any

from pydantic import ValidationError

from warmgate.api import SpecDecodeDeployment
from warmgate.api.constants import Reason
from warmgate.api.status import MAX_UNCOVERED_LISTED, PlanSummary
from warmgate.buckets import (
    BucketPlan,
    BucketPlanError,
    CoverageReport,
    EngineShapeConfig,
    UncoveredShape,
)
from warmgate.buckets.cost import format_seconds
from warmgate.buckets.engine.methods import DRAFT_MODEL_METHODS
from warmgate.reconcile.planning.model_size import ModelSize, model_size
from warmgate.reconcile.planning.proven_plan import (
    MAX_PLAN_BUCKETS,
    PlanPolicy,
    PlanSize,
    ProvenPlan,
    evaluate_plan,
    plan_size,
    total_buckets,
)
from warmgate.reconcile.planning.verdict import Verdict, one_line
from warmgate.resources import PlanBundle
from warmgate.resources.vllm_engine import engine_of


@dataclass(frozen=True)
class PlanningResult:
    """What the planning stage decided; ``plan`` is the plan to warm (None when it failed)."""

    plan: BucketPlan | None
    planned: Verdict
    coverage: Verdict
    summary: PlanSummary | None = None
    stalled: bool = False
    evaluation: ProvenPlan | None = None
    # The Warmed verdict of a plan that cannot warm in time (Stalled, no Job is created).
    refused: Verdict | None = None
    # Warning Events the plan deserves whatever its verdicts (e.g. a reachable drafter crash).
    warnings: tuple[Verdict, ...] = ()

    @property
    def may_warm(self) -> bool:
        """Warm a proven plan, one whose holes the spec explicitly allows, or one that covers
        everything but the states no bucket the engine's warmup compiles can serve."""
        allowed = self.coverage.reason in (
            Reason.UNCOVERED_SHAPES_ALLOWED,
            Reason.UNWARMABLE_SHAPES,
        )
        proven = self.coverage.holds or allowed
        return self.plan is not None and not self.stalled and self.refused is None and proven

    def to_run(self, kv_blocks: int | None) -> PlanBundle | None:
        """The plan to build children for, with its estimate; None when nothing may warm."""
        if self.plan is None or not self.may_warm:
            return None
        estimate = self.summary.estimated_warmup_seconds if self.summary else None
        evaluation = self.evaluation
        sweep = evaluation.drafter.sweep_spec if evaluation is not None else None
        known = known_unwarmable(evaluation) if evaluation is not None else ()
        direct = evaluation.drafter.warmup_spec if evaluation is not None else None
        return PlanBundle(
            self.plan,
            float(estimate or 0),
            kv_blocks,
            drafter_sweep=sweep,
            known_unwarmable=known,
            drafter_warmup=direct,
        )


def known_unwarmable(evaluation: ProvenPlan) -> tuple[tuple[str, int, int, int], ...]:
    """The warmed plan's known-unwarmable shapes as the engine logs them (runner plan field)."""
    return tuple(u.engine_config for u in evaluation.known_unwarmable)


@dataclass(frozen=True)
class PlanningInputs:
    """Everything `evaluate` reads of a spec: equal inputs always give equal planning results."""

    config: EngineShapeConfig
    policy: PlanPolicy
    size: ModelSize
    timeout_s: int
    # spec.warmup.drafter.verification is Required (the default): a draft model whose graphs
    # cannot be verified is refused (issue 33).
    drafter_required: bool = True

    @classmethod
    def of(cls, sdd: SpecDecodeDeployment) -> PlanningInputs:
        """The spec's inputs; ValueError (pydantic's ValidationError is one) when it has none."""
        timeout = sdd.spec.warmup.timeout_seconds
        required = sdd.spec.warmup.drafter.verification == "Required"
        return cls(engine_of(sdd).shape, PlanPolicy.of(sdd), model_size(sdd), timeout, required)

    @property
    def digest(self) -> str:
        """sha256 of the inputs' canonical JSON: the key under which results are shared."""
        doc = {
            "config": self.config.model_dump(mode="json"),
            "policy": asdict(self.policy),
            "size": asdict(self.size),
            "timeout": self.timeout_s,
        }
        if not self.drafter_required:  # the inputs of Required specs keep their digest
            doc["drafter"] = "BestEffort"
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


def evaluate(sdd: SpecDecodeDeployment) -> PlanningResult:
    """Run the plan pipeline with the spec's policy and turn it into the planning verdicts.

    It reads the spec only through `PlanningInputs`, so one result serves every object with the
    same inputs (`planning_cache.PlanningCache` shares them).
    """
    waiting = Verdict("Unknown", Reason.PENDING, "Waiting for a bucket plan")
    try:
        inputs = PlanningInputs.of(sdd)
        size = inputs.size
        too_large = _too_large(plan_size(inputs.config), size)
        if too_large is not None:
            return PlanningResult(None, too_large, waiting, stalled=True)
        evaluation = evaluate_plan(inputs.config, inputs.policy, size.profile)
    except (ValueError, ValidationError, BucketPlanError) as exc:
        reason = Reason.PLAN_FAILED if isinstance(exc, BucketPlanError) else Reason.INVALID_SPEC
        failed = Verdict("False", reason, one_line(exc))
        return PlanningResult(None, failed, waiting, stalled=True)
    result = _result(evaluation, size, *_coverage(evaluation))
    return _drafter_verifiable(_in_time(result, size, inputs.timeout_s), inputs)


def _drafter_verifiable(result: PlanningResult, inputs: PlanningInputs) -> PlanningResult:
    """Fail closed (issue 33): a draft model whose graphs the planner cannot model gets no
    drafter sweep and no compile hook, so no warmup could verify any of its graphs. With
    spec.warmup.drafter.verification Required such a plan is refused before any Gaudi time is
    spent (Warmed=False DrafterUnverified, Stalled); BestEffort warms the target's plan."""
    evaluation = result.evaluation
    policy = inputs.policy
    if not inputs.drafter_required or evaluation is None or result.refused is not None:
        return result
    drafts = policy.method in DRAFT_MODEL_METHODS and inputs.config.num_speculative_tokens > 0
    if not drafts or evaluation.drafter.sweep_spec is not None:
        return result
    why = evaluation.drafter.error or f"{policy.method}: no drafter graphs were planned"
    message = (
        f"The drafter's graphs cannot be verified ({why}): no warmup can give evidence for any "
        "of them, and spec.warmup.drafter.verification is Required, so none is started. Set it "
        "to BestEffort to warm the target's plan and serve with the drafter's graphs unverified "
        "(they compile at runtime), or change the configuration the message names"
    )
    return replace(result, refused=Verdict("False", Reason.DRAFTER_UNVERIFIED, message))


def _too_large(plan: PlanSize, size: ModelSize) -> Verdict | None:
    """A plan too large to compute in seconds or warm in a day, refused before planning it."""
    if plan.low <= MAX_PLAN_BUCKETS:
        return None
    low = format_seconds(plan.warmup_low_s(size.profile))
    message = (
        f"The engine would generate {plan.low:,} to {plan.high:,} buckets ({plan.prompt:,} "
        f"prompt, {plan.decode_seeds:,} decode seeds before the spec-decode expansion), more "
        f"than the {MAX_PLAN_BUCKETS:,} warmgate plans; warming them would take at least {low} "
        f"({size.describe()}). Narrow spec.buckets' ranges, lower engine.maxModelLen or "
        "maxNumSeqs, or use strategy exp"
    )
    return Verdict("False", Reason.PLAN_TOO_LARGE, message)


def _in_time(result: PlanningResult, size: ModelSize, timeout_s: int) -> PlanningResult:
    """Refuse to warm a plan whose fastest estimated warmup exceeds one attempt's deadline."""
    evaluation = result.evaluation
    if evaluation is None or result.plan is None:
        return result
    cost = evaluation.cost(result.plan)
    if cost.low_s <= timeout_s:
        return result
    message = (
        f"Warming the plan's {cost.graphs:,} buckets would take {cost} ({size.describe()}), "
        f"at least {format_seconds(cost.low_s)}: more than spec.warmup.timeoutSeconds="
        f"{timeout_s}, so every attempt would time out. Raise spec.warmup.timeoutSeconds "
        "(at most 86400) or narrow spec.buckets' ranges"
    )
    return replace(result, refused=Verdict("False", Reason.WARMUP_TOO_LONG, message))


def _coverage(evaluation: ProvenPlan) -> tuple[Verdict, bool]:
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
    if evaluation.unwarmable is not None:
        return Verdict("False", Reason.UNWARMABLE_SHAPES, _unwarmable(evaluation)), False
    proven = _proven(evaluation.effective_report)
    message = f"Completed the plan with {_extra(evaluation)}; {proven}{_trade(evaluation)}"
    return Verdict("True", Reason.COVERAGE_COMPLETE, message), False


def _extra(evaluation: ProvenPlan) -> str:
    """'52 extra buckets (greedy)' or '239 extra buckets (exact optimum; 187 for decode
    padding)': what completion added and how it chose."""
    done = evaluation.completion
    how = "exact optimum" if done is not None and done.source == "optimum" else "greedy"
    padding = evaluation.padding_buckets
    detail = f"{how}; {padding} for decode padding" if padding else how
    return f"{evaluation.extra_buckets} extra buckets ({detail})"


def _trade(evaluation: ProvenPlan) -> str:
    """The decode padding the warmed plan pays against the engine's (issue 25 item 7)."""
    done = evaluation.completion
    trade = done.padding if done is not None else None
    if trade is None:
        return ""
    figures = (
        f"mean decode KV padding {trade.warmed:.2f}x (engine plan {trade.engine:.2f}x, "
        f"coverage alone {trade.covered:.2f}x)"
    )
    if trade.target is None:
        return f"; {figures}: optimizeFor WarmupTime keeps the cheapest plan"
    if trade.within:
        return f"; {figures}"
    return f"; {figures}, above the {trade.target:.2f}x bound: refinement stopped ({trade.stopped})"


def _result(
    evaluation: ProvenPlan, size: ModelSize, coverage: Verdict, stalled: bool
) -> PlanningResult:
    plan = evaluation.effective
    cost = evaluation.cost(plan)
    drafter = evaluation.drafter
    gaps = [] if evaluation.covered else evaluation.effective_report.uncovered
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
    ).model_copy(update=_completion_fields(evaluation))
    if coverage.holds or coverage.reason == Reason.UNWARMABLE_SHAPES:
        estimate = f"warmup {cost}, {size.describe()}"
        message = f"{coverage.message}; {estimate}"
        if drafter.status_line():
            message = f"target: {coverage.message}; {drafter.status_line()}; {estimate}"
        coverage = Verdict(coverage.status, coverage.reason, message)
    elif coverage.reason == Reason.UNCOVERED_SHAPES_ALLOWED and drafter.status_line():
        message = f"target: {coverage.message}; {drafter.status_line()}"
        coverage = Verdict(coverage.status, coverage.reason, message)
    planned = Verdict("True", Reason.PLANNED, _plan_message(evaluation.engine_plan))
    warnings = _warnings(evaluation)
    return PlanningResult(plan, planned, coverage, summary, stalled, evaluation, warnings=warnings)


def _warnings(evaluation: ProvenPlan) -> tuple[Verdict, ...]:
    """The drafter's reachable crash, said as it is: the states and what avoids them."""
    crash = evaluation.drafter.crash
    if crash is None:
        return ()
    message = f"The engine crashes in reachable states: {crash.describe()}"
    return (Verdict("True", Reason.DRAFTER_CRASH_REACHABLE, message),)


def _completion_fields(evaluation: ProvenPlan) -> dict[str, Any]:
    """status.plan's completedBy, paddingBuckets and decode padding figures (when they apply)."""
    done = evaluation.completion
    if done is None or not evaluation.completion_applies:
        return {}
    fields: dict[str, Any] = {"completed_by": done.source.capitalize()}
    if done.padding is not None:
        fields["padding_buckets"] = done.padding.refined_buckets
        fields["decode_padding_engine"] = round(done.padding.engine, 3)
        fields["decode_padding"] = round(done.padding.warmed, 3)
    return fields


def _plan_message(plan: BucketPlan) -> str:
    return (
        f"{len(plan.prompt_buckets)} prompt and {len(plan.decode_buckets)} decode buckets "
        f"({len(plan.seed_decode_buckets)} seeds, +{plan.spec_added} from the spec-decode "
        f"expansion), profile {plan.config.profile}"
    )


def _proven(report: CoverageReport) -> str:
    return f"all {report.states:,} reachable states run a planned bucket"


def _unwarmable(evaluation: ProvenPlan) -> str:
    """Completion's plan leaves states only the engine's runtime compiles: how many, why."""
    report = evaluation.effective_report
    top = report.uncovered[0]
    return (
        f"Completed the plan with {_extra(evaluation)}{_trade(evaluation)}; "
        f"{report.uncovered_states:,} of {report.states:,} reachable states in "
        f"{len(report.uncovered)} shape(s) compile at runtime whatever the plan, e.g. "
        f"{top.engine_config} for {top.phase} state {top.example}: {_why(evaluation, top)}; "
        f"{_advice(evaluation)}; the warmup reports these shapes as known gaps"
    )


def _advice(evaluation: ProvenPlan) -> str:
    """What the docs say a user can change (docs/coverage.md, "Buckets the warmup never
    compiles"): only k = 1 is known to help, and only for a draft model's top-row states."""
    if max(evaluation.engine_plan.config.prompt_dummy_shortenings()) > 1:
        return (
            "an engine limit: with a draft model, spec.speculative.numSpeculativeTokens=1 "
            "leaves none at the top query row (docs/coverage.md, 'Buckets the warmup never "
            "compiles')"
        )
    return (
        "an engine limit no spec field is known to remove (docs/coverage.md, 'Buckets the "
        "warmup never compiles')"
    )


def _why(evaluation: ProvenPlan, gap: UncoveredShape) -> str:
    """Why the warmup never compiles ``gap``'s shape: its dummy runs another bucket."""
    cfg = evaluation.engine_plan.config
    _, query, ctx = gap.shape
    causes = []
    if gap.phase == "prompt" and query + ctx * cfg.block_size > cfg.max_model_len:
        kept = max(0, (cfg.max_model_len - query) // cfg.block_size)
        causes.append(f"its context is cut to {kept} blocks to fit maxModelLen")
    k = max(cfg.prompt_dummy_shortenings())
    if gap.phase == "prompt" and k > 0:
        causes.append(f"its requests are {k} tokens short, left for the draft model")
    if gap.phase == "decode":
        causes.append("its sequences are cut at maxModelLen")
    detail = f" ({' and '.join(causes)})" if causes else ""
    return f"the engine's warmup dummy of any bucket serving it runs another bucket{detail}"


def _holes(report: CoverageReport) -> str:
    top = report.uncovered[0]
    return (
        f"{len(report.uncovered)} shapes would run unwarmed in {report.uncovered_states:,} of "
        f"{report.states:,} reachable states, e.g. {top.engine_config} for state {top.example}"
    )
