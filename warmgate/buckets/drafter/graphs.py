"""The draft model's graphs (eagle, eagle3, mtp): shapes it runs, and those the engine never warms.

vllm-gaudi wraps the draft model in its own HPU graph (lazy mode) and never runs it on a decode
bucket during warmup; only its prompt warmup runs the drafter. ``prove_drafter`` lists every graph
shape the drafter runs over the same reachable state space as ``prove_coverage`` and marks the
ones the engine's own warmup compiles. docs/coverage.md ("Drafter graphs") states the engine's
behaviour with file and line.

    report = prove_drafter(plan, "eagle3", partial_drafts=True)
    report.unwarmed  # [DrafterShape(phase, shape, calls, warmed, full_drafts, example)]

Example (issue 16): exp, max_num_seqs 8, block 128, max_model_len 4096, k=3, three requests of
300 tokens (b_i = 3, S = 9, T = 4): the target runs ('decode', 16, 1, 48), warmed; the drafter
runs (16, 1, 48) (call 1, the target's shape), then (4, 1, 16) twice (calls 2 and 3 on the padded
batch B = 4 over X = 9 blocks): none of them is a drafter graph the engine's warmup compiles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from warmgate.buckets.coverage.states import StateSpace
from warmgate.buckets.drafter.walk import DrafterWalk, Key
from warmgate.buckets.engine.methods import (
    DRAFT_MODEL_METHODS,
    METHODS,
    SpeculativeMethod,
    traits,
)
from warmgate.buckets.engine.plan import BucketPlan
from warmgate.buckets.engine.steps import Bucket
from warmgate.contract.sweepplan import Graph

__all__ = [
    "DRAFT_MODEL_METHODS",
    "CallKind",
    "DraftMethod",
    "DrafterModelError",
    "DrafterReport",
    "DrafterShape",
    "engine_graph",
    "prove_drafter",
]

# SpeculativeConfig.use_eagle(): DRAFT_MODEL_METHODS run HpuEagleProposer, a draft model on the HPU.
DraftMethod = SpeculativeMethod
CallKind = Literal["prompt-first", "prompt-next", "decode-first", "decode-next"]
CALL_KINDS: tuple[CallKind, ...] = get_args(CallKind)


def engine_graph(key: Key) -> Graph:
    """A graph's (phase, shape) as the target's ``_check_config`` logs it: (phase, batch, query,
    block-list length), a prompt's context blocks times its batch."""
    phase, (bs, query, blocks) = key
    return phase, bs, query, bs * blocks if phase == "prompt" else blocks


class DrafterModelError(ValueError):
    """A configuration whose drafter path warmgate does not model (the message says why)."""


@dataclass(frozen=True, slots=True)
class DrafterShape:
    """One graph the drafter runs: ``phase`` and ``shape`` as the target's buckets.

    ``calls`` are the call kinds that run it: prompt-first (call 1 of a prefill, the target's
    prompt shape), prompt-next (calls 2..k after a prefill, batch 1), decode-first (call 1 of a
    decode step, the target's (B*T, 1, C)), decode-next (calls 2..k, batch B). ``warmed``: the
    engine's own warmup runs the drafter at it. ``full_drafts``: some step with full drafts
    (T = 1 + k) or a prefill runs it; otherwise only partial-draft steps do. ``example``: one
    state that runs it: decode (n, S, T) for call 1 and (n, S, T, X) for calls 2..k, prompt-first
    (bs, query, ctx), prompt-next (prompt tokens L, call j).
    """

    phase: Literal["decode", "prompt"]
    shape: Bucket
    calls: tuple[CallKind, ...]
    warmed: bool
    full_drafts: bool
    example: tuple[int, ...]

    @property
    def key(self) -> Key:
        """(phase, shape): the identity of the graph."""
        return self.phase, self.shape

    @property
    def engine_config(self) -> Graph:
        """The (phase, batch, query, block-list length) tuple, as the target's ``_check_config``."""
        return engine_graph(self.key)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "phase": self.phase,
            "shape": list(self.shape),
            "engine_config": list(self.engine_config),
            "calls": list(self.calls),
            "warmed": self.warmed,
            "full_drafts": self.full_drafts,
            "example": list(self.example),
        }


@dataclass(frozen=True, slots=True)
class DrafterReport:
    """Every drafter graph of the reachable space, and which of them the engine warms itself."""

    method: str
    k: int
    shapes: tuple[DrafterShape, ...]
    warmup: frozenset[Key]
    space: StateSpace
    note: str = ""
    # Structured-output requests served: grammar validation truncates drafts at any position,
    # so graphs only partial drafts reach are ordinary traffic, not the end of a sequence.
    structured_outputs: bool = False

    def ordinary(self, shape: DrafterShape) -> bool:
        """Whether ordinary traffic reaches ``shape``: a full-draft step or a prefill does,
        and with structured outputs any partial-draft step too."""
        return shape.full_drafts or self.structured_outputs

    @property
    def has_drafter(self) -> bool:
        """Whether the method runs a draft model on the HPU (ngram proposes on the CPU)."""
        return self.method in DRAFT_MODEL_METHODS and self.k > 0

    @property
    def unwarmed(self) -> list[DrafterShape]:
        """The graphs the engine compiles at runtime, the first time a step needs them."""
        return [s for s in self.shapes if not s.warmed]

    def count(self, call: CallKind) -> int:
        """How many graphs a call kind runs."""
        return sum(call in s.calls for s in self.shapes)

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        """JSON-ready form; ``top`` limits the listed unwarmed shapes."""
        unwarmed = self.unwarmed
        return {
            "method": self.method,
            "k": self.k,
            "has_drafter": self.has_drafter,
            "shapes": len(self.shapes),
            "unwarmed_shapes": len(unwarmed),
            "warmed_by_engine": len(self.shapes) - len(unwarmed),
            "by_call": {call: self.count(call) for call in CALL_KINDS},
            "partial_drafts": self.space.partial_drafts,
            "prefix_caching": self.space.prefix_caching,
            "structured_outputs": self.structured_outputs,
            "note": self.note,
            "unwarmed": [s.to_dict() for s in unwarmed[:top]],
        }


def prove_drafter(
    plan: BucketPlan,
    method: DraftMethod,
    partial_drafts: bool = True,
    *,
    prefix_caching: bool | None = None,
    structured_outputs: bool = False,
) -> DrafterReport:
    """The drafter graphs of ``plan`` for ``method``, over ``prove_coverage``'s state space.

    ``structured_outputs``: structured-output requests are served, so partial drafts are in
    scope whatever ``partial_drafts`` says (grammar validation truncates drafts at any position)
    and every prefill chunk runs the drafter, not only the chunk that completes its prompt; for
    prompt batches of one request that adds no graph (a partial chunk's (query, ctx) and its end
    L are those of a completing chunk of an L-token prompt; docs/coverage.md, fact 10), which
    ``tests/unit/buckets/drafter/test_drafter_structured.py`` checks against a brute force.

    ngram has none (NgramProposer drafts on the CPU). Raises ``DrafterModelError`` for an
    unknown method, and for prompt batches of several requests (VLLM_PROMPT_BS_BUCKET_MAX > 1 or
    merged prefill): ``propose_eagle_prefill`` handles one prompt row per batch and is not
    modelled beyond it.
    """
    if method not in get_args(DraftMethod):
        raise DrafterModelError(f"method must be one of {get_args(DraftMethod)}, got {method!r}")
    cfg = plan.config
    partial = partial_drafts or structured_outputs
    space = StateSpace.of(cfg, partial_drafts=partial, prefix_caching=prefix_caching)
    k = cfg.num_speculative_tokens
    if method not in DRAFT_MODEL_METHODS or k == 0:
        proposer = METHODS[method].proposer
        why = "no speculative tokens" if k == 0 else f"{proposer} drafts on the CPU"
        note = f"no drafter graphs: {why}"
        return DrafterReport(method, k, (), frozenset(), space, note, structured_outputs)
    if cfg.max_num_prefill_seqs > 1:
        raise DrafterModelError(
            "prompt batches of several requests (prompt_bs_max > 1 or merged_prefill) are not "
            "modelled for eagle-type drafters: propose_eagle_prefill treats a batch as one row"
        )
    walk = DrafterWalk(plan, space)
    warmup = frozenset(walk.warmup())
    shapes = [_shape(key, found.calls, found.full_drafts, found.example, key in warmup)
              for key, found in walk.run().items()]  # fmt: skip
    shapes.sort(key=lambda s: (s.warmed, s.phase, s.shape))
    return DrafterReport(method, k, tuple(shapes), warmup, space, _note(method), structured_outputs)


def _shape(
    key: Key, calls: set[str], full: bool, example: tuple[int, ...], warmed: bool
) -> DrafterShape:
    phase: Literal["decode", "prompt"] = "prompt" if key[0] == "prompt" else "decode"
    ordered = tuple(c for c in CALL_KINDS if c in calls)
    return DrafterShape(phase, key[1], ordered, warmed, full, example)


def _note(method: str) -> str:
    known = traits(method)
    if known is not None and known.aux_hidden_states:
        return (
            f"{method} also runs combine_hidden_states outside the drafter's graph, once per "
            "call-1 token count (every call-1 shape above covers it)"
        )
    return ""
