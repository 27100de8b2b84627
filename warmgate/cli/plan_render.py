"""The human-readable summary of ``warmgate plan``: buckets, verdict, gaps, completion, cost."""

from __future__ import annotations

from typing import TYPE_CHECKING

from warmgate.buckets import (
    Bucket,
    BucketPlan,
    CoverageReport,
    UncoveredShape,
    estimate_buckets,
)
from warmgate.buckets.cost import estimate_plan

if TYPE_CHECKING:
    from warmgate.cli.plan import PlanResult

__all__ = ["render_table"]

# How many added buckets the completion section lists before summarising the rest.
LIST_ADDED = 12


def render_table(result: PlanResult, top: int) -> str:
    """The full text report."""
    lines = [
        *_plan_lines(result.plan),
        *_coverage_lines(result.report, top),
        *_completion_lines(result),
        *_cost_lines(result),
    ]
    return "\n".join(lines) + "\n"


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


def _completion_lines(result: PlanResult) -> list[str]:
    if result.report.covered:
        return ["complete   nothing to add"]
    if result.completion_error is not None:
        return [f"complete   FAILED: {result.completion_error}"]
    diff, completed = result.diff, result.completed
    if diff is None or completed is None:
        return ["complete   off (--complete or spec.buckets.coverage.complete to enable)"]
    verdict = (
        "applies" if result.completion_applies else f"EXCEEDS maxExtraBuckets {result.max_extra}"
    )
    lines = [
        f"complete   +{diff.added} buckets ({len(diff.added_prompt)} prompt, "
        f"{len(diff.added_seeds)} seeds -> {len(diff.added_decode)} decode after the engine's "
        f"expansion): {verdict}; re-planned from its own seed file and proven covered"
    ]
    added = [*diff.added_prompt, *diff.added_seeds]
    lines += [f"  + {'prompt' if b[1] > 1 else 'seed':<6} {b}" for b in added[:LIST_ADDED]]
    if len(added) > LIST_ADDED:
        lines.append(f"  ... and {len(added) - LIST_ADDED} more (--output json)")
    return lines + _oversize_warning(result, diff.added_decode)


def _oversize_warning(result: PlanResult, decode: tuple[Bucket, ...]) -> list[str]:
    """Warn when completion adds decode buckets larger than any the engine warms itself.

    They come from prefix caching (shared blocks let S exceed the KV blocks) or from partial
    drafts on the largest rows; the engine's warmup of oversized buckets has run out of memory
    before (doc section 9, vllm-gaudi PR #1700).
    """
    own = result.plan.fallback_max_ctx
    top = max((c for _, _, c in decode), default=0)
    if top <= own:
        return []
    hint = "; --no-prefix-caching if prompts share no long prefixes"
    sharing = result.report.space.prefix_caching
    return [
        f"  warning: added decode buckets reach {top:,} blocks, beyond the engine's own largest "
        f"{own:,} (warmup memory risk, vllm-gaudi PR #1700){hint if sharing else ''}"
    ]


def _cost_lines(result: PlanResult) -> list[str]:
    model, cached = result.model, result.recipe_cache
    label = f"{model.params_b:g}B {model.dtype}{', recipe cache' if cached else ''}"
    lines = [f"warmup     engine plan {estimate_plan(result.plan, model, recipe_cache=cached)}"]
    if result.diff is not None and result.completed is not None:
        diff = result.diff
        added = estimate_buckets(
            diff.added_prompt, diff.added_decode, model, recipe_cache=cached, overhead=False
        )
        whole = estimate_plan(result.completed, model, recipe_cache=cached)
        lines.append(f"           completed plan {whole} (the added buckets: {added})")
    lines.append(f"           model {label}; a range from public figures, not a measurement")
    return lines


def _on(flag: bool) -> str:
    return "on" if flag else "off"
