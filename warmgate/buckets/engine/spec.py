"""Spec-decode expansion of seed decode buckets (PR #624, generate_spec_decode_buckets)."""

from __future__ import annotations

from collections.abc import Iterable

from warmgate.buckets.engine.config import EngineShapeConfig
from warmgate.buckets.engine.generate import Bucket, decode_corrector

__all__ = ["expand_spec"]


def expand_spec(cfg: EngineShapeConfig, seeds: Iterable[Bucket]) -> list[Bucket]:
    """The decode list after the spec expansion of ``seeds`` (unchanged when k == 0).

    With T = 1 + k a step of B sequences runs as a virtual batch of B*T rows of one token, each
    row repeating its sequence's block table, so every seed (b, 1, c) also yields (b*T, 1, c*T)
    and, when b*T <= c, (b*T, 1, c); both through the decode corrector. No filter is re-applied
    and nothing caps bs or blocks (config A, k=1: (64, 1, 2048) -> (128, 1, 4096)).

    e.g. config A, k=1: seed (1, 1, 1) -> (2, 1, 2); seed (1, 1, 32) -> (2, 1, 64) (already a
    seed) and (2, 1, 32); seed (2, 1, 64) -> (4, 1, 128) only, as 4 * 32 caps 128 at 128.
    """
    seeds = sorted(set(seeds))
    if cfg.num_speculative_tokens == 0:
        return seeds
    t = cfg.tokens_per_step
    fix = decode_corrector(cfg)
    out: set[Bucket] = set(seeds)
    for b, q, c in seeds:
        out.add(fix(b * t, q, c * t))
        if b * t <= c:
            out.add(fix(b * t, q, c))
    return sorted(out)
