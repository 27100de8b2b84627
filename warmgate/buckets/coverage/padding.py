"""Padding waste of a plan's decode steps: mean and worst padded/real tokens and KV blocks."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from warmgate.buckets.coverage.decode import DecodeProver
from warmgate.buckets.coverage.states import StateSpace
from warmgate.buckets.engine.plan import BucketPlan

__all__ = ["Padding", "decode_padding"]

# Below this many terms a harmonic sum is added exactly; above, the asymptotic series is exact
# to far better than the figures' two decimals.
_EXACT_TERMS = 64


@dataclass(frozen=True, slots=True)
class Padding:
    """How much a plan pads reachable decode steps, each step counted once.

    A step of n sequences, S blocks and T tokens each runs (B*T, 1, C): it computes B*T token
    rows for n*T real ones (``tokens`` = B/n) and reads C blocks for T*S real ones (``blocks``
    = C/(T*S); with contiguous PA, C/S). Completion does not raise the B of a step the engine's
    seeds serve (new seed rows only catch steps earlier; tested); the KV figure is where a
    completion that adds few, large buckets pays.
    """

    states: int
    mean_tokens: float
    worst_tokens: float
    mean_blocks: float
    worst_blocks: float

    def __str__(self) -> str:
        return (
            f"tokens mean {self.mean_tokens:.2f}x worst {self.worst_tokens:.2f}x, "
            f"KV blocks mean {self.mean_blocks:.2f}x worst {self.worst_blocks:.1f}x"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "states": self.states,
            "mean_tokens": round(self.mean_tokens, 3),
            "worst_tokens": round(self.worst_tokens, 3),
            "mean_blocks": round(self.mean_blocks, 3),
            "worst_blocks": round(self.worst_blocks, 3),
        }


def decode_padding(
    plan: BucketPlan, partial_drafts: bool = True, *, prefix_caching: bool | None = None
) -> Padding:
    """Padded/real ratios over every reachable decode step (the prover's state space).

    Exact in closed form per (n, T) and piece of S, as the prover walks them: e.g. a piece
    S in [a, b] running (B*T, 1, C) adds (b - a + 1) * B/n to the token sum and
    C/T * (H(b) - H(a-1)) to the block sum (H = harmonic numbers).
    """
    space = StateSpace.of(plan.config, partial_drafts=partial_drafts, prefix_caching=prefix_caching)
    prover = DecodeProver(plan, space)
    mult_t = not plan.config.contiguous_pa
    states, tokens, blocks = 0, 0.0, 0.0
    worst_t = worst_b = 1.0
    for t in space.tokens:
        real_t = t if mult_t else 1
        for n in range(1, space.max_num_seqs + 1):
            lo, hi = space.total_blocks(n)
            for a, b, (virtual, _, ctx) in prover.pieces(n, t, lo, hi):
                count, batch = b - a + 1, virtual // t
                states += count
                tokens += count * batch / n
                blocks += ctx / real_t * _harmonic(a, b)
                worst_t = max(worst_t, batch / n)
                worst_b = max(worst_b, ctx / (real_t * a))
    if states == 0:
        return Padding(0, 1.0, 1.0, 1.0, 1.0)
    return Padding(states, tokens / states, worst_t, blocks / states, worst_b)


def _harmonic(a: int, b: int) -> float:
    """sum(1/s for s in a..b)."""
    if b - a < _EXACT_TERMS:
        return math.fsum(1.0 / s for s in range(a, b + 1))
    return _h(b) - _h(a - 1)


def _h(x: int) -> float:
    """H(x) by its asymptotic series (x >= 63 here, error below 1e-12)."""
    if x < _EXACT_TERMS:
        return math.fsum(1.0 / s for s in range(1, x + 1))
    inv = 1.0 / x
    return math.log(x) + 0.5772156649015329 + inv / 2 - inv**2 / 12 + inv**4 / 120
