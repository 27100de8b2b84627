"""Coverage proof: does every reachable decode and prompt step run a planned (warmed) bucket?"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Literal

from warmgate.buckets.coverage.decode import DecodeProver
from warmgate.buckets.coverage.prompt import PromptProver
from warmgate.buckets.coverage.states import StateSpace
from warmgate.buckets.engine.config import SpeculativeMethod
from warmgate.buckets.engine.plan import BucketPlan
from warmgate.buckets.engine.steps import Bucket, Tally, tally_add
from warmgate.buckets.engine.warmup_shapes import warmed_decode_shapes, warmed_prompt_shapes

__all__ = ["CoverageReport", "UncoveredShape", "brute_force_coverage", "prove_coverage"]

StepKind = Literal["decode", "prompt"]


@dataclass(frozen=True, slots=True)
class UncoveredShape:
    """A forward shape that reachable steps run but warmup never compiled.

    A prompt shape may be a planned bucket: the warmup's dummy of it runs another bucket.

    ``shape`` is the bucket (bs, query, blocks); ``states`` how many reachable states run it;
    ``example`` one of them, the lexicographically smallest: decode (n, S, T),
    prompt (bs, query, ctx). ``requested`` is the componentwise largest lookup target of
    those states (decode (B*T, 1, blocks), prompt (bs, query, ctx)): what a bucket must cover.
    """

    shape: Bucket
    phase: StepKind
    states: int
    example: tuple[int, int, int]
    requested: Bucket = (0, 0, 0)

    @property
    def engine_config(self) -> tuple[str, int, int, int]:
        """The tuple the engine logs in "Configuration: ... was not warmed-up!" (doc 4.3)."""
        bs, query, blocks = self.shape
        if self.phase == "prompt":
            return ("prompt", bs, query, bs * blocks)
        return ("decode", bs, query, blocks)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "phase": self.phase,
            "shape": list(self.shape),
            "engine_config": list(self.engine_config),
            "states": self.states,
            "example": list(self.example),
        }


@dataclass(frozen=True, slots=True)
class CoverageReport:
    """The verdict over the whole reachable space (docs/coverage.md), with the gaps found."""

    space: StateSpace
    decode_states: int
    prompt_states: int
    uncovered: list[UncoveredShape] = field(default_factory=list)

    @property
    def covered(self) -> bool:
        """True when every reachable state runs a planned bucket."""
        return not self.uncovered

    @property
    def states(self) -> int:
        """How many reachable states were considered, decode and prompt."""
        return self.decode_states + self.prompt_states

    @property
    def uncovered_states(self) -> int:
        """How many reachable states run an unwarmed shape."""
        return sum(u.states for u in self.uncovered)

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        """JSON-ready form; ``top`` limits the listed shapes (largest state counts first)."""
        return {
            "covered": self.covered,
            "states": self.states,
            "decode_states": self.decode_states,
            "prompt_states": self.prompt_states,
            "uncovered_states": self.uncovered_states,
            "uncovered_shapes": len(self.uncovered),
            "partial_drafts": self.space.partial_drafts,
            "prefix_caching": self.space.prefix_caching,
            "uncovered": [u.to_dict() for u in self.uncovered[:top]],
        }


def prove_coverage(
    plan: BucketPlan,
    partial_drafts: bool = True,
    *,
    prefix_caching: bool | None = None,
    method: SpeculativeMethod | None = None,
) -> CoverageReport:
    """Exact coverage verdict of ``plan`` over every reachable decode and prompt state.

    ``partial_drafts`` puts every T in 1..1+k in scope (else T = 1+k only). ``prefix_caching``
    None takes the engine default: on, unless contiguous PA forces it off; with it on, shared
    blocks let S exceed num_gpu_blocks. Uncovered shapes come largest state count first.
    A prompt shape is warmed when the engine's prompt warmup compiles it (``warmup_shapes``),
    which depends on the speculative method: ``plan.config.speculative_method``, else ``method``.
    The draft model's own graphs are proven apart (``drafter.graphs.prove_drafter``).
    """
    space = StateSpace.of(plan.config, partial_drafts=partial_drafts, prefix_caching=prefix_caching)
    decode: Tally = {}
    prompt: Tally = {}
    decode_states = DecodeProver(plan, space).run(decode)
    prompt_states = PromptProver(plan, space).run(prompt)
    scope = plan.config.prompt_dummy_shortenings(method)
    warmed = (warmed_decode_shapes(plan, scope), warmed_prompt_shapes(plan, scope))
    return _report(space, (decode_states, prompt_states), (decode, prompt), warmed)


def brute_force_coverage(
    plan: BucketPlan,
    partial_drafts: bool = True,
    *,
    prefix_caching: bool | None = None,
    warmed: tuple[Collection[Bucket], Collection[Bucket]] | None = None,
) -> CoverageReport:
    """The reference: every state through ``plan.decode_shape`` / ``plan.prompt_shape``.

    Only for small configs (tests, benchmarks): it costs one lookup per state. ``warmed`` is the
    (decode, prompt) shapes the warmup compiles (the tests pass their own simulation of the
    engine's dummies); None takes ``warmup_shapes``' model.
    """
    space = StateSpace.of(plan.config, partial_drafts=partial_drafts, prefix_caching=prefix_caching)
    decode: Tally = {}
    prompt: Tally = {}
    decode_states = prompt_states = 0
    for n, s, t in space.decode_states():
        shape = plan.decode_shape(n, s, t)
        need = min(s if plan.config.contiguous_pa else t * s, plan.fallback_max_ctx)
        tally_add(decode, shape, 1, (n, s, t), (shape[0], 1, need))
        decode_states += 1
    for bs, q, c in space.prompt_candidates():
        shape = plan.prompt_shape(bs, q, c)
        if bs == 1 or space.batch_allowed(shape):
            tally_add(prompt, shape, 1, (bs, q, c), (bs, q, c))
            prompt_states += 1
    if warmed is None:
        warmed = (warmed_decode_shapes(plan), warmed_prompt_shapes(plan))
    return _report(space, (decode_states, prompt_states), (decode, prompt), warmed)


def _report(
    space: StateSpace,
    counts: tuple[int, int],
    tallies: tuple[Tally, Tally],
    warmed: tuple[Collection[Bucket], Collection[Bucket]],
) -> CoverageReport:
    """Keep the shapes warmup never compiles, largest state count first.

    ``warmed`` (decode, prompt) are the shapes the warmup's dummies run (``warmup_shapes``):
    prompt dummies miss some planned buckets, decode ones only in corner cases.
    """
    gaps = [
        *_gaps(tallies[0], frozenset(warmed[0]), "decode"),
        *_gaps(tallies[1], frozenset(warmed[1]), "prompt"),
    ]
    gaps.sort(key=lambda u: (-u.states, u.phase, u.shape))
    return CoverageReport(space, counts[0], counts[1], gaps)


def _gaps(tally: Tally, planned: frozenset[Bucket], phase: StepKind) -> list[UncoveredShape]:
    return [
        UncoveredShape(shape, phase, entry.states, entry.example, entry.requested)
        for shape, entry in tally.items()
        if shape not in planned
    ]
