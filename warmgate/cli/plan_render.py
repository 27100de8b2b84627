"""The reports of ``warmgate plan``: the text summary and the JSON document of one evaluation."""

from __future__ import annotations

from typing import Any

from warmgate.buckets import (
    Bucket,
    BucketPlan,
    CostEstimate,
    CoverageReport,
    PlanDiff,
    UncoveredShape,
    estimate_buckets,
)
from warmgate.reconcile.planning.proven_plan import ProvenPlan

__all__ = ["render_json", "render_table"]

# How many added buckets the completion section lists before summarising the rest.
LIST_ADDED = 12


def render_table(evaluation: ProvenPlan, top: int, *, recipe_cache: bool) -> str:
    """The full text report."""
    lines = [
        *_plan_lines(evaluation.engine_plan),
        *_coverage_lines(evaluation.report, top),
        *_completion_lines(evaluation),
        *_cost_lines(evaluation, recipe_cache),
    ]
    return "\n".join(lines) + "\n"


def render_json(evaluation: ProvenPlan, top: int, *, recipe_cache: bool) -> dict[str, Any]:
    """JSON-ready form of the whole evaluation."""
    plan, model = evaluation.engine_plan, evaluation.model
    cost: dict[str, Any] = {"model": {"params_b": model.params_b, "dtype": model.dtype}}
    cost["plan"] = evaluation.cost(plan, recipe_cache=recipe_cache).to_dict()
    completion: dict[str, Any] = {"error": evaluation.completion_error, "applies": False}
    if evaluation.diff is not None and evaluation.completed is not None:
        completion = _completion_dict(evaluation, evaluation.diff, evaluation.completed)
        completion_cost = evaluation.cost(evaluation.completed, recipe_cache=recipe_cache)
        cost["completed"] = completion_cost.to_dict()
        cost["added"] = _added_cost(evaluation, evaluation.diff, recipe_cache).to_dict()
    return {
        "config": plan.config.model_dump(mode="json", exclude={"bucket_file"}),
        "plan": {**plan.to_dict()["counts"], "digest": plan.digest},
        "coverage": evaluation.report.to_dict(top),
        "completion": completion,
        "effective": {"digest": evaluation.effective.digest, "covered": evaluation.covered},
        "cost": cost,
    }


def _completion_dict(
    evaluation: ProvenPlan, diff: PlanDiff, completed: BucketPlan
) -> dict[str, Any]:
    unwarmable = evaluation.unwarmable
    return {
        "error": None,
        "applies": evaluation.completion_applies,
        "max_extra_buckets": evaluation.policy.max_extra_buckets,
        "added": diff.added,
        "added_prompt": [list(b) for b in diff.added_prompt],
        "added_seeds": [list(b) for b in diff.added_seeds],
        "added_decode": [list(b) for b in diff.added_decode],
        "digest": completed.digest,
        "how": evaluation.completion.to_dict() if evaluation.completion is not None else None,
        "padding_buckets": evaluation.padding_buckets,
        # UnwarmableError: the completed plan's own gaps, which no bucket the warmup compiles
        # can serve (docs/coverage.md, "Buckets the warmup never compiles").
        "unwarmable": [u.to_dict() for u in unwarmable.uncovered] if unwarmable else [],
        "unwarmable_states": unwarmable.uncovered_states if unwarmable else 0,
    }


def _added_cost(evaluation: ProvenPlan, diff: PlanDiff, recipe_cache: bool) -> CostEstimate:
    return estimate_buckets(
        diff.added_prompt,
        diff.added_decode,
        evaluation.model,
        recipe_cache=recipe_cache,
        overhead=False,
    )


def _plan_lines(plan: BucketPlan) -> list[str]:
    cfg = plan.config
    seeds, decode = len(plan.seed_decode_buckets), len(plan.decode_buckets)
    return [
        f"plan       vllm-gaudi {cfg.profile}, strategy {cfg.strategy}, "
        f"k={cfg.num_speculative_tokens}, digest {plan.digest[:12]}",
        f"engine     max_num_seqs {cfg.max_num_seqs}, max_model_len {cfg.max_model_len}, "
        f"max_num_batched_tokens {cfg.max_num_batched_tokens}, block {cfg.block_size}, "
        f"KV blocks {cfg.num_gpu_blocks if cfg.num_gpu_blocks is not None else 'unknown'}",
        f"buckets    prompt {len(plan.prompt_buckets)}, decode {decode} "
        f"({seeds} seeds + {decode - seeds} spec rows), fallback max ctx {plan.fallback_max_ctx}",
    ]


def _coverage_lines(report: CoverageReport, top: int) -> list[str]:
    space = report.space
    lines = [
        f"states     {report.decode_states:,} decode + {report.prompt_states:,} prompt "
        f"(partial drafts {_on(space.partial_drafts)}, prefix caching {_on(space.prefix_caching)})"
    ]
    if report.covered:
        return [*lines, "coverage   COVERED: every reachable step runs a warmed bucket"]
    share = 100 * report.uncovered_states / max(report.states, 1)
    lines.append(
        f"coverage   NOT COVERED: {len(report.uncovered)} unwarmed shapes, run by "
        f"{report.uncovered_states:,} states ({share:.1f}%)"
    )
    lines += [f"  {_gap(u)}" for u in report.uncovered[:top]]
    if len(report.uncovered) > top:
        lines.append(f"  ... and {len(report.uncovered) - top} more (--top N, --output json)")
    return lines


def _gap(gap: UncoveredShape) -> str:
    a, b, c = gap.example
    example = f"n={a} S={b} T={c}" if gap.phase == "decode" else f"bs={a} query={b} ctx={c}"
    return f"{gap.engine_config!s:<28} {gap.states:>12,} states  e.g. {example}"


def _completion_lines(evaluation: ProvenPlan) -> list[str]:
    if evaluation.report.covered:
        return ["complete   nothing to add"]
    if evaluation.completion_error is not None:
        return [f"complete   FAILED: {evaluation.completion_error}"]
    diff, completed = evaluation.diff, evaluation.completed
    if diff is None or completed is None:
        return ["complete   off (--complete or spec.buckets.coverage.complete to enable)"]
    cap = evaluation.policy.max_extra_buckets
    verdict = "applies" if evaluation.completion_applies else f"EXCEEDS maxExtraBuckets {cap}"
    how = _how(evaluation)
    unwarmable = evaluation.unwarmable
    proven = "proven covered" if unwarmable is None else "proven covered but for UNWARMABLE states"
    lines = [
        f"complete   +{diff.added} buckets ({len(diff.added_prompt)} prompt, "
        f"{len(diff.added_seeds)} seeds -> {len(diff.added_decode)} decode after the engine's "
        f"expansion): {verdict}; re-planned from its own seed file and {proven}",
        *how,
    ]
    if unwarmable is not None:
        lines.append(
            f"  UNWARMABLE: {unwarmable.uncovered_states:,} states in "
            f"{len(unwarmable.uncovered)} shape(s) run a shape no bucket the engine's warmup "
            "compiles (docs/coverage.md, 'Buckets the warmup never compiles')"
        )
        lines += [f"  {_gap(u)}" for u in unwarmable.uncovered[:LIST_ADDED]]
    added = [*diff.added_prompt, *diff.added_seeds]
    lines += [f"  + {'prompt' if b[1] > 1 else 'seed':<6} {b}" for b in added[:LIST_ADDED]]
    if len(added) > LIST_ADDED:
        lines.append(f"  ... and {len(added) - LIST_ADDED} more (--output json)")
    return lines + _oversize_warning(evaluation, diff.added_decode)


def _how(evaluation: ProvenPlan) -> list[str]:
    """Which completion chose the decode seeds, and the padding refinement's share."""
    done = evaluation.completion
    if done is None:
        return []
    source = "exact optimum (HiGHS)" if done.source == "optimum" else "greedy"
    lines = [f"  seeds by the {source}; optimum: {done.optimum}"]
    trade = done.padding
    if trade is not None and trade.target is not None:
        lines.append(
            f"  padding refinement: +{trade.refined_buckets} decode buckets ({trade.refined_s:.0f} "
            f"s midpoint, 8B), mean decode KV padding {trade.covered:.2f}x -> {trade.warmed:.2f}x "
            f"(engine plan {trade.engine:.2f}x, bound {trade.target:.2f}x; {trade.stopped})"
        )
    elif trade is not None:
        lines.append(
            f"  optimizeFor WarmupTime: mean decode KV padding {trade.warmed:.2f}x against the "
            f"engine plan's {trade.engine:.2f}x, not refined"
        )
    return lines


def _oversize_warning(evaluation: ProvenPlan, decode: tuple[Bucket, ...]) -> list[str]:
    """Warn when completion adds decode buckets larger than any the engine warms itself.

    They come from prefix caching (shared blocks let S exceed the KV blocks) or from partial
    drafts on the largest rows; the engine's warmup of oversized buckets has run out of memory
    before (doc section 9, vllm-gaudi PR #1700).
    """
    own = evaluation.engine_plan.fallback_max_ctx
    top = max((c for _, _, c in decode), default=0)
    if top <= own:
        return []
    hint = "; --no-prefix-caching if prompts share no long prefixes"
    sharing = evaluation.report.space.prefix_caching
    return [
        f"  warning: added decode buckets reach {top:,} blocks, beyond the engine's own largest "
        f"{own:,} (warmup memory risk, vllm-gaudi PR #1700){hint if sharing else ''}"
    ]


def _cost_lines(evaluation: ProvenPlan, recipe_cache: bool) -> list[str]:
    model = evaluation.model
    label = f"{model.params_b:g}B {model.dtype}{', recipe cache' if recipe_cache else ''}"
    engine_cost = evaluation.cost(evaluation.engine_plan, recipe_cache=recipe_cache)
    lines = [f"warmup     engine plan {engine_cost}"]
    if evaluation.diff is not None and evaluation.completed is not None:
        added = _added_cost(evaluation, evaluation.diff, recipe_cache)
        whole = evaluation.cost(evaluation.completed, recipe_cache=recipe_cache)
        lines.append(f"           completed plan {whole} (the added buckets: {added})")
    lines.append(f"           model {label}; a range from public figures, not a measurement")
    return lines


def _on(flag: bool) -> str:
    return "on" if flag else "off"
