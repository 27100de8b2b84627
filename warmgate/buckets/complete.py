"""Plan completion: add the cheapest seed buckets that make every reachable step run warmed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from warmgate.buckets.bucket_file import format_bucket_file
from warmgate.buckets.complete_seeds import SeedChooser, decode_seconds
from warmgate.buckets.config import EngineShapeConfig
from warmgate.buckets.coverage import CoverageReport, UncoveredShape, prove_coverage
from warmgate.buckets.coverage_prompt import PromptProver
from warmgate.buckets.coverage_steps import rows_of
from warmgate.buckets.generate import Bucket
from warmgate.buckets.plan import BucketPlan, plan_buckets
from warmgate.buckets.states import StateSpace

__all__ = ["CompletionError", "PlanDiff", "complete_plan", "plan_diff", "with_bucket_file"]

# Each round adds buckets for the gaps it sees; new seed rows can re-pad other steps (seed-first
# padding, doc section 3.6), which the next round covers. Rows grow by a factor T per level, so
# a handful of rounds reach a fixed point; the limit only guards against a non-converging input.
MAX_ROUNDS = 24


class CompletionError(RuntimeError):
    """Completion found no covered plan (filters drop what it adds, or no fixed point)."""


@dataclass(frozen=True, slots=True)
class PlanDiff:
    """Buckets a completed plan has beyond the original, per phase (sorted)."""

    added_prompt: tuple[Bucket, ...]
    added_seeds: tuple[Bucket, ...]
    added_decode: tuple[Bucket, ...]

    @property
    def added(self) -> int:
        """Buckets warmup compiles in addition (prompt plus decode, spec rows included)."""
        return len(self.added_prompt) + len(self.added_decode)


def plan_diff(before: BucketPlan, after: BucketPlan) -> PlanDiff:
    """What ``after`` warms that ``before`` does not."""
    return PlanDiff(
        tuple(sorted(set(after.prompt_buckets) - set(before.prompt_buckets))),
        tuple(sorted(set(after.seed_decode_buckets) - set(before.seed_decode_buckets))),
        tuple(sorted(set(after.decode_buckets) - set(before.decode_buckets))),
    )


def with_bucket_file(cfg: EngineShapeConfig, text: str) -> EngineShapeConfig:
    """``cfg`` reading its buckets from ``text`` (VLLM_BUCKETING_FROM_FILE), validated again."""
    return EngineShapeConfig.model_validate({**cfg.model_dump(), "bucket_file": text})


def complete_plan(
    cfg: EngineShapeConfig,
    partial_drafts: bool = True,
    *,
    prefix_caching: bool | None = None,
    max_rounds: int = MAX_ROUNDS,
    cheapest: bool = True,
) -> BucketPlan:
    """A plan whose coverage proof holds, from ``cfg``'s plan plus as few seed buckets as found.

    The result reads its buckets from a seed file (``plan.config.bucket_file``) that holds every
    original prompt and seed bucket, so nothing the user's seeds gave is removed; the engine
    expands the file's decode rows again, and the proof runs on that re-expanded plan. The plan
    is returned unchanged when it is already covered. Raises CompletionError otherwise.

    ``cheapest`` picks each gap row's seed by estimated warmup cost (``SeedChooser``: the row's
    own seed or one a row below whose expansion reaches it); when that finds no fixed point, or
    with ``cheapest=False``, every gap row gets its own seed (the first completion, issue 4).
    """
    if cheapest:
        try:
            return _complete(cfg, partial_drafts, prefix_caching, max_rounds, cheapest=True)
        except CompletionError:
            pass
    return _complete(cfg, partial_drafts, prefix_caching, max_rounds, cheapest=False)


def _complete(
    cfg: EngineShapeConfig,
    partial: bool,
    sharing: bool | None,
    max_rounds: int,
    *,
    cheapest: bool,
) -> BucketPlan:
    plan = plan_buckets(cfg)
    original = frozenset(plan.seed_decode_buckets) if cheapest else None
    for _ in range(max_rounds):
        report = prove_coverage(plan, partial, prefix_caching=sharing)
        if report.covered:
            if original is not None and plan.config.bucket_file != cfg.bucket_file:
                plan = _prune(plan, original, partial, sharing)
            return _verified(plan, partial, sharing)
        plan = _next_plan(cfg, plan, report, original)
    raise CompletionError(f"no covered plan after {max_rounds} rounds of completion")


def _next_plan(
    cfg: EngineShapeConfig,
    plan: BucketPlan,
    report: CoverageReport,
    original: frozenset[Bucket] | None,
) -> BucketPlan:
    """Re-plan from the current seeds plus the round's additions; fail if nothing new sticks.

    With ``original`` (the cheapest choice), an added seed that a later round's larger seed in
    the same row supersedes is dropped: lookups read only a row's largest seed (docs/coverage.md,
    "Exact optimum"), so it would only add buckets. Original seeds always stay.
    """
    gaps = report.uncovered
    space = report.space
    need = _decode_needs(plan, gaps)
    if original is not None:
        decode = SeedChooser(plan, space, decode_seconds).choose(need)
    else:
        decode = [(v, 1, blocks) for v, blocks in sorted(need.items())]
    added = (
        _prompt_additions(plan, space.partial_drafts, space.prefix_caching)
        if any(g.phase == "prompt" for g in gaps)
        else []
    )
    prompt = set(plan.prompt_buckets) | set(added)
    seeds = set(plan.seed_decode_buckets) | set(decode)
    if original is not None:
        seeds = _largest_added(seeds, original)
    try:
        text = format_bucket_file(sorted(prompt), sorted(seeds), ("warmgate completed seed file",))
    except ValueError as exc:  # e.g. query-1 prompt buckets (VLLM_PROMPT_QUERY_BUCKET_MIN=1)
        raise CompletionError(f"the plan cannot be written as a seed file: {exc}") from exc
    nxt = plan_buckets(with_bucket_file(cfg, text))
    if set(nxt.prompt_buckets) <= set(plan.prompt_buckets) and set(nxt.seed_decode_buckets) <= set(
        plan.seed_decode_buckets
    ):
        dropped = sorted((prompt | seeds) - set(nxt.prompt_buckets) - set(nxt.seed_decode_buckets))
        raise CompletionError(f"the engine's filters drop every bucket completion adds: {dropped}")
    return nxt


def _largest_added(seeds: set[Bucket], original: frozenset[Bucket]) -> set[Bucket]:
    """The original seeds plus, per row, only the largest added seed."""
    top: dict[int, Bucket] = {}
    for seed in seeds - original:
        if seed[0] not in top or seed > top[seed[0]]:
            top[seed[0]] = seed
    return set(original) | set(top.values())


def _prune(
    plan: BucketPlan, original: frozenset[Bucket], partial: bool, sharing: bool | None
) -> BucketPlan:
    """Drop added seeds whose row another seed's expansion already reaches, if still covered.

    A round adds (36, 1, 576) for row 36 before a later round adds (9, 1, 144), whose expansion
    (36, 1, 576) makes it redundant (small pad plan, k=3). Largest rows first; the prover decides.
    """
    t = plan.config.tokens_per_step
    for seed in sorted(set(plan.seed_decode_buckets) - original, reverse=True):
        b, _, c = seed
        tops = {r: x for (r, _), x in ((k, v[-1]) for k, v in rows_of(plan.seed_decode_buckets))}
        if b % t or tops.get(b // t, 0) * t < c:
            continue
        seeds = sorted(set(plan.seed_decode_buckets) - {seed})
        text = format_bucket_file(plan.prompt_buckets, seeds, ("warmgate completed seed file",))
        trial = plan_buckets(with_bucket_file(plan.config, text))
        if prove_coverage(trial, partial, prefix_caching=sharing).covered:
            plan = trial
    return plan


def _decode_needs(plan: BucketPlan, gaps: Iterable[UncoveredShape]) -> dict[int, int]:
    """For each virtual-batch row V that runs unwarmed shapes, the blocks a bucket needs there.

    A seed (V, 1, largest target) closes them all: the block lookup first-fits row V before any
    larger row, so a bucket in row V at least as large as every target makes all of them hit
    row V (doc section 3.4). e.g. config A, k=3,
    partial T=3 over B=8 gives V=24 with targets up to 3*192=576 -> seed (24, 1, 576). Without
    contiguous PA the decode filter drops seeds with bs > blocks, so blocks is at least V.
    """
    contiguous = plan.config.contiguous_pa
    need: dict[int, int] = {}
    for gap in gaps:
        if gap.phase == "decode":
            virtual, _, blocks = gap.requested
            # Contiguous PA runs max(C, S) capped at num_gpu_blocks + 1 (doc section 3.6), which
            # can exceed the lookup target: the row needs the shape's own blocks.
            blocks = max(blocks, gap.shape[2]) if contiguous else blocks
            need[virtual] = max(need.get(virtual, 0), blocks)
    floor = 0 if contiguous else 1
    return {v: max(blocks, v * floor, 1) for v, blocks in need.items()}


def _prompt_additions(plan: BucketPlan, partial: bool, sharing: bool | None) -> list[Bucket]:
    """One prompt bucket per (bs, query row) with gaps: the row's query, the largest ctx.

    The row is the planned query the gap's states pad to (the engine's own query padding is
    kept); beyond the largest planned query it is the longest query itself. Never 1, which a
    file reads as decode; at most mbt // bs, which the prompt filter demands.
    """
    space = StateSpace.of(plan.config, partial_drafts=partial, prefix_caching=sharing)
    needs = PromptProver(plan, space).row_needs(frozenset(plan.prompt_buckets))
    mbt = plan.config.max_num_batched_tokens
    return [(bs, max(2, min(q, mbt // bs)), ctx) for (bs, q), ctx in sorted(needs.items())]


def _verified(plan: BucketPlan, partial_drafts: bool, prefix_caching: bool | None) -> BucketPlan:
    """Re-plan from the plan's own seed file and prove it again, as the engine would read it.

    A strategy plan that was covered from the start and cannot be written as a file (query-1
    prompt buckets) is returned as it is: the engine generates it without a file.
    """
    try:
        text = plan.to_bucket_file()
    except ValueError:
        if plan.config.bucket_file is None:
            return plan
        raise
    again = plan_buckets(with_bucket_file(plan.config, text))
    lists = (again.prompt_buckets, again.decode_buckets)
    if lists != (plan.prompt_buckets, plan.decode_buckets):
        raise CompletionError("the completed seed file re-plans to different buckets")
    if not prove_coverage(again, partial_drafts, prefix_caching=prefix_caching).covered:
        raise CompletionError("the completed seed file re-plans to an uncovered plan")
    return plan if plan.config.bucket_file is None else again
