"""Seeds that would make warmup cover shapes the serving engine ran unwarmed, proven by re-planning.

The engine logs a forward shape as (phase, batch, query, padded block-list length); a planned
bucket maps to it as prompt (b, q, c) -> ('prompt', b, q, b*c) and decode (b, 1, c) ->
('decode', b, 1, c) (docs/vllm-gaudi-bucketing.md §4.3). The proposal seeds each missing shape's
bucket itself, re-plans with the plan's seed file plus those seeds (the engine's own filters and
spec-decode expansion, `plan_buckets`), and keeps only what the new plan really warms. It is a
proposal: the operator shows it in status.drift and never changes the spec.
"""

from __future__ import annotations

import ast

from warmgate.api.status import MAX_UNCOVERED_LISTED, ProposedSeeds
from warmgate.buckets import Bucket, BucketPlan, BucketPlanError, EngineShapeConfig, plan_buckets
from warmgate.contract.board import SHAPE_CHARS

Shape = tuple[str, int, int, int]
# A shape dimension an engine can run (batch, query tokens, blocks); larger is no engine's.
MAX_DIMENSION = 2**31 - 1
# Serve mode records a drafter compile after warmup as "drafter (decode, 16, 1, 48)" (issue 33):
# no seed warms a drafter graph.
DRAFTER_PREFIX = "drafter ("
DRAFTER_NO_SEEDS = (
    "No seed proposal for drafter graphs: seeds warm the target's buckets, and these are drafter "
    "graphs the engine plugin's direct warmup did not warm"
)


def parse_shape(text: str) -> Shape | None:
    """ "('decode', 24, 1, 768)" -> ('decode', 24, 1, 768); None for anything else."""
    try:
        value = ast.literal_eval(text[:SHAPE_CHARS])
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None
    if not (isinstance(value, tuple) and len(value) == 4 and value[0] in ("prompt", "decode")):
        return None
    if not all(type(v) is int and 0 <= v <= MAX_DIMENSION for v in value[1:]):
        return None
    return (str(value[0]), int(value[1]), int(value[2]), int(value[3]))


def bucket_of(shape: Shape) -> Bucket | None:
    """The planned bucket that the engine logs as ``shape``; None when none can be."""
    phase, batch, query, blocks = shape
    if phase == "decode":
        return (batch, 1, blocks) if query == 1 else None
    if batch == 0 or blocks % batch:
        return None
    return (batch, query, blocks // batch)


def _warmed(plan: BucketPlan) -> tuple[set[Bucket], set[Bucket]]:
    return set(plan.warmed_prompt_buckets), set(plan.decode_buckets)


def _replan(plan: BucketPlan, seeds: list[Bucket]) -> BucketPlan | None:
    rows = "\n".join(f"({b}, {q}, {c})" for b, q, c in seeds)
    text = f"{plan.to_bucket_file().rstrip()}\n# proposed for shapes observed unwarmed\n{rows}\n"
    try:
        config = EngineShapeConfig.model_validate({**plan.config.model_dump(), "bucket_file": text})
        return plan_buckets(config)
    except (ValueError, BucketPlanError):
        return None


def propose(plan: BucketPlan, shapes: list[str]) -> tuple[ProposedSeeds | None, str]:
    """Seeds that make the plan warm ``shapes``, and a sentence saying what they do."""
    prompt, decode = _warmed(plan)
    wanted = [b for b in map(bucket_of, filter(None, map(parse_shape, shapes))) if b]
    missing = sorted({b for b in wanted if b not in (decode if b[1] == 1 else prompt)})
    if not wanted and any(s.startswith(DRAFTER_PREFIX) for s in shapes):
        return None, DRAFTER_NO_SEEDS
    if not missing:
        return None, "The current plan already warms these shapes"
    try:
        replanned = _replan(plan, missing)
    except ValueError:  # a plan with query-1 prompt buckets has no seed file
        replanned = None
    if replanned is None:
        return None, "No seed proposal: the plan cannot be written as a seed file"
    new_prompt, new_decode = _warmed(replanned)
    covered = [b for b in missing if b in (new_decode if b[1] == 1 else new_prompt)]
    seeds = ProposedSeeds(
        prompt=[list(b) for b in covered if b[1] != 1][:MAX_UNCOVERED_LISTED] or None,
        decode=[list(b) for b in covered if b[1] == 1][:MAX_UNCOVERED_LISTED] or None,
    )
    left = len(missing) - len(covered)
    text = (
        f"Adding {len(covered)} seed(s) to spec.buckets.seeds (status.drift.proposedSeeds) "
        f"makes warmup cover them ({len(replanned.prompt_buckets) + len(replanned.decode_buckets)}"
        f" buckets instead of {len(plan.prompt_buckets) + len(plan.decode_buckets)}); "
        "the operator does not apply it"
    )
    if left:
        text += f"; {left} shape(s) no seed can cover (the engine's filters drop them)"
    return (seeds if covered else None), text
