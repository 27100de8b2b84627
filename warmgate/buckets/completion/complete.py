"""Plan completion: add the cheapest seed buckets that make every reachable step run warmed."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from warmgate.buckets.completion.prompt import PromptAdditions, prompt_additions
from warmgate.buckets.completion.seeds import SeedChooser, decode_seconds
from warmgate.buckets.coverage.prove import CoverageReport, UncoveredShape, prove_coverage
from warmgate.buckets.engine.bucket_file import format_bucket_file
from warmgate.buckets.engine.config import EngineShapeConfig
from warmgate.buckets.engine.generate import Bucket
from warmgate.buckets.engine.plan import BucketPlan, plan_buckets
from warmgate.buckets.engine.steps import rows_of
from warmgate.buckets.engine.warmup_shapes import warmed_prompt_shapes

__all__ = [
    "CompletionError",
    "PlanDiff",
    "UnwarmableError",
    "complete_plan",
    "complete_proven",
    "plan_diff",
    "with_bucket_file",
]

# Each round adds buckets for the gaps it sees; new seed rows can re-pad other steps (seed-first
# padding, doc section 3.6), which the next round covers. Rows grow by a factor T per level, so
# a handful of rounds reach a fixed point; the limit only guards against a non-converging input.
MAX_ROUNDS = 24
# The last-resort search tries single prompt buckets near the left-over prefills of this many
# shapes (most states first): each trial is a re-plan and a proof.
LOCAL_FIX_SHAPES = 16


class CompletionError(RuntimeError):
    """Completion found no covered plan (filters drop what it adds, or no fixed point)."""


class UnwarmableError(CompletionError):
    """Some reachable steps run a shape no bucket the engine's warmup compiles can replace.

    ``plan`` is the completed plan that covers everything else and ``report`` its proof, whose
    uncovered shapes are those steps' (docs/coverage.md, "Buckets the warmup never compiles");
    ``examples`` are states that run them.
    """

    def __init__(
        self, plan: BucketPlan, report: CoverageReport, examples: list[tuple[int, int, int]]
    ) -> None:
        top = report.uncovered[0]
        super().__init__(
            f"no bucket the engine's warmup compiles can serve {report.uncovered_states} "
            f"reachable states in {len(report.uncovered)} shapes, e.g. {top.engine_config} for "
            f"{top.phase} state {top.example}: the warmup's dummy of that bucket runs another "
            "(its context cut to max_model_len, or k tokens short with a draft model), and no "
            "added bucket takes those states without catching a neighbour's dummy"
        )
        self.plan = plan
        self.report = report
        self.examples = examples


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
    is returned unchanged when it is already covered. Raises CompletionError otherwise, and
    UnwarmableError (carrying the plan that covers everything else) when some prefills can only
    run a prompt shape the engine's warmup never compiles.

    ``cheapest`` picks each gap row's seed by estimated warmup cost (``SeedChooser``: the row's
    own seed or one a row below whose expansion reaches it); when that finds no fixed point, or
    with ``cheapest=False``, every gap row gets its own seed (the first completion, issue 4).
    """
    plan, _ = complete_proven(
        cfg, partial_drafts, prefix_caching=prefix_caching, max_rounds=max_rounds, cheapest=cheapest
    )
    return plan


def complete_proven(
    cfg: EngineShapeConfig,
    partial_drafts: bool = True,
    *,
    prefix_caching: bool | None = None,
    max_rounds: int = MAX_ROUNDS,
    cheapest: bool = True,
) -> tuple[BucketPlan, CoverageReport]:
    """``complete_plan`` and the proof completion made of the plan it returns.

    The report is ``prove_coverage(plan, partial_drafts, prefix_caching=prefix_caching)``:
    callers that need the completed plan's proof take it instead of proving the plan again.
    """
    if cheapest:
        try:
            return _complete(cfg, partial_drafts, prefix_caching, max_rounds, cheapest=True)
        except UnwarmableError:
            raise  # the engine's own limit: the other completion cannot do better
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
) -> tuple[BucketPlan, CoverageReport]:
    plan = plan_buckets(cfg)
    original = frozenset(plan.seed_decode_buckets) if cheapest else None
    for _ in range(max_rounds):
        report = prove_coverage(plan, partial, prefix_caching=sharing)
        if report.covered:
            if original is not None and plan.config.bucket_file != cfg.bucket_file:
                plan = _prune(plan, original, report)
            return _verified(plan, report, partial, sharing)
        try:
            plan = _next_plan(cfg, plan, report, original)
        except UnwarmableError as caught:
            if original is None or caught.plan.config.bucket_file == cfg.bucket_file:
                raise
            best = _prune(caught.plan, original, caught.report)
            again = prove_coverage(best, partial, prefix_caching=sharing)
            raise UnwarmableError(best, again, caught.examples) from None
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
    added = _prompt_additions(plan, report) if any(g.phase == "prompt" for g in gaps) else None
    prompt = set(plan.prompt_buckets) | (added.buckets if added else set())
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
        planned = set(plan.prompt_buckets) | set(plan.decode_buckets)
        if (added is not None and added.unwarmable) or all(g.shape in planned for g in gaps):
            fixed = _local_fix(plan, report)
            if fixed is not None:
                return fixed
            raise UnwarmableError(plan, report, [g.example for g in gaps])
        dropped = sorted((prompt | seeds) - set(nxt.prompt_buckets) - set(nxt.seed_decode_buckets))
        raise CompletionError(f"the engine's filters drop every bucket completion adds: {dropped}")
    return nxt


def _local_fix(plan: BucketPlan, report: CoverageReport) -> BucketPlan | None:
    """One prompt bucket near a left-over prefill that serves some without breaking others.

    The last resort once no row fits more than k away from its neighbours: rows that close catch
    each other's dummies, which can still compile the right shapes (a captured row's dummy may
    compile the catching row's bucket); rows all more than k apart have no such chain, and one
    more row then catches its neighbour's dummies. Tries the prefill's query to 2k + 2 above it
    for the LOCAL_FIX_SHAPES largest left-over shapes; a trial
    counts only if no prompt shape runs more states unwarmed than before and fewer do in all
    (trading a rare prefill for the common full chunk of a captured row is no fix).
    """
    cfg, space = plan.config, report.space
    reach = max(cfg.prompt_dummy_shortenings())
    rows = sorted({q for b, q, _ in plan.prompt_buckets if b == 1})
    if all(b - a > reach for a, b in itertools.pairwise(rows)):
        return None  # no row catches another's dummies: one more row only moves the gap
    last = min(space.query_max(1), cfg.max_num_batched_tokens)
    before = {g.shape: g.states for g in report.uncovered if g.phase == "prompt"}
    try:
        base = plan.to_bucket_file()
    except ValueError:  # query-1 prompt buckets: no file can hold them
        return None
    for gap in report.uncovered[:LOCAL_FIX_SHAPES]:
        bs, query, ctx = gap.example
        if gap.phase != "prompt" or bs != 1:
            continue
        for row in range(max(2, query), min(last, query + 2 * reach + 2) + 1):
            trial = plan_buckets(with_bucket_file(cfg, base + f"(1, {row}, {ctx})\n"))
            again = prove_coverage(trial, space.partial_drafts, prefix_caching=space.prefix_caching)
            after = {g.shape: g.states for g in again.uncovered if g.phase == "prompt"}
            if all(n <= before.get(s, 0) for s, n in after.items()) and after != before:
                return trial
    return None


def _largest_added(seeds: set[Bucket], original: frozenset[Bucket]) -> set[Bucket]:
    """The original seeds plus, per row, only the largest added seed."""
    top: dict[int, Bucket] = {}
    for seed in seeds - original:
        if seed[0] not in top or seed > top[seed[0]]:
            top[seed[0]] = seed
    return set(original) | set(top.values())


def _prune(plan: BucketPlan, original: frozenset[Bucket], report: CoverageReport) -> BucketPlan:
    """Drop added seeds whose row another seed's expansion already reaches, if no gap appears.

    A round adds (36, 1, 576) for row 36 before a later round adds (9, 1, 144), whose expansion
    (36, 1, 576) makes it redundant (small pad plan, k=3). Largest rows first; the prover decides
    (against ``report``'s gaps: none, or the prefills no bucket can serve).
    """
    space = report.space
    partial, sharing = space.partial_drafts, space.prefix_caching
    t = plan.config.tokens_per_step
    for seed in sorted(set(plan.seed_decode_buckets) - original, reverse=True):
        b, _, c = seed
        tops = {r: x for (r, _), x in ((k, v[-1]) for k, v in rows_of(plan.seed_decode_buckets))}
        if b % t or tops.get(b // t, 0) * t < c:
            continue
        seeds = sorted(set(plan.seed_decode_buckets) - {seed})
        text = format_bucket_file(plan.prompt_buckets, seeds, ("warmgate completed seed file",))
        trial = plan_buckets(with_bucket_file(plan.config, text))
        if prove_coverage(trial, partial, prefix_caching=sharing).uncovered == report.uncovered:
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
            # Contiguous PA runs max(C, S) (capped at num_gpu_blocks + 1 on main, section 3.6),
            # which can exceed the lookup target: the row needs the shape's own blocks.
            blocks = max(blocks, gap.shape[2]) if contiguous else blocks
            need[virtual] = max(need.get(virtual, 0), blocks)
    floor = 0 if contiguous else 1
    return {v: max(blocks, v * floor, 1) for v, blocks in need.items()}


def _prompt_additions(plan: BucketPlan, report: CoverageReport) -> PromptAdditions:
    """Prompt buckets for the prefills that run unwarmed shapes (``complete_prompt``).

    bs >= 2 batches get (bs, row, largest ctx), the row being the planned query those states pad
    to (the engine's own query padding is kept); bs-1 rows get the bucket the warmup compiles,
    in the row or in a new row just below it. Never query 1, which a file reads as decode.
    """
    shortenings = plan.config.prompt_dummy_shortenings()
    warmed = warmed_prompt_shapes(plan, shortenings)
    return prompt_additions(plan, report.space, warmed, shortenings)


def _verified(
    plan: BucketPlan, report: CoverageReport, partial_drafts: bool, prefix_caching: bool | None
) -> tuple[BucketPlan, CoverageReport]:
    """Re-plan from the plan's own seed file and prove it again, as the engine would read it.

    A strategy plan that was covered from the start and cannot be written as a file (query-1
    prompt buckets) is returned as it is: the engine generates it without a file. Returns the
    plan with its proof: ``report``, the covered proof of ``plan``, for such a strategy plan
    (`_prune` only changes plans read from a file), else the re-plan's own proof.
    """
    try:
        text = plan.to_bucket_file()
    except ValueError:
        if plan.config.bucket_file is None:
            return plan, report
        raise
    again = plan_buckets(with_bucket_file(plan.config, text))
    lists = (again.prompt_buckets, again.decode_buckets)
    if lists != (plan.prompt_buckets, plan.decode_buckets):
        raise CompletionError("the completed seed file re-plans to different buckets")
    proof = prove_coverage(again, partial_drafts, prefix_caching=prefix_caching)
    if not proof.covered:
        raise CompletionError("the completed seed file re-plans to an uncovered plan")
    return (plan, report) if plan.config.bucket_file is None else (again, proof)
