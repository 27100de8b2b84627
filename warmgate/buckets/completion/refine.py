"""Padding refinement: seeds below a row's largest that bring decode KV padding back to a bound.

Completion gives each gap row one bucket at its largest block target (``complete``), so the
partial-draft steps of that row, and the steps its new seed row catches first, read the row's
largest block count: on ``examples/minimal-ngram.yaml`` the mean padded/real KV blocks of decode
steps goes from 1.15x (the engine's plan) to 2.58x. Refinement adds seeds (r, 1, v) with v below
row r's largest seed, greedily by padding removed per estimated warmup second, until the mean is
within the bound (``refine_padding``).

Why this never changes coverage: a decode step's padded batch reads only each row's largest
bucket (seed-first lookup, then the full list; docs/coverage.md, "Exact optimum"), and a seed
below its row's largest, with its expansion (r*T, 1, v*T) below the expansion of that largest,
moves no row's largest and not the fallback cap. So every step keeps its padded batch and row and
only takes the first bucket of that row at or above its target, which can only be smaller. The
refined plan is re-planned from its seed file and proven again all the same (``complete``).

The mean is kept exactly while seeds are added: the decode steps are the prover's pieces of S
(``DecodeProver.pieces``), grouped by the bucket they run; a new block value u in row V moves the
steps of bucket (V, C) whose target T*S is at most u from C to u, which lowers the sum of
C/(T*S) by (C - u)/T * (H(min(b, u // T)) - H(a - 1)) per piece [a, b] (H: harmonic numbers).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import accumulate

from warmgate.buckets.completion.complete import with_bucket_file
from warmgate.buckets.completion.seeds import decode_seconds
from warmgate.buckets.cost import ModelProfile
from warmgate.buckets.coverage.decode import DecodeProver
from warmgate.buckets.coverage.states import StateSpace
from warmgate.buckets.engine.bucket_file import format_bucket_file
from warmgate.buckets.engine.generate import Bucket
from warmgate.buckets.engine.plan import BucketPlan, plan_buckets
from warmgate.buckets.engine.spec import expand_spec
from warmgate.buckets.engine.steps import rows_of

__all__ = ["Refinement", "refine_padding"]

# Block values tried in each gap (prev, C) of a row: evenly spaced; the best of them is offered.
GRID = 12

Pieces = dict[tuple[int, int, int], int]  # (T, S low, S high) -> how many n run it


@dataclass(frozen=True, slots=True)
class Refinement:
    """The refined plan, the seeds refinement added and the mean KV padding before and after."""

    plan: BucketPlan
    seeds: tuple[Bucket, ...]
    before: float
    after: float
    target: float
    stopped: str  # "reached", "budget" (max_buckets), "no candidate", "contiguous PA"

    @property
    def reached(self) -> bool:
        """The refined plan's mean is within the target."""
        return self.after <= self.target + 1e-9


class _Steps:
    """The plan's decode steps grouped by the bucket they run, and the sum of their padding."""

    def __init__(self, plan: BucketPlan, space: StateSpace) -> None:
        prover = DecodeProver(plan, space)
        self.by: dict[tuple[int, int], Pieces] = {}
        self.states = 0
        top = 0
        for t in space.tokens:
            for n in range(1, space.max_num_seqs + 1):
                lo, hi = space.total_blocks(n)
                for a, b, (v, _, c) in prover.pieces(n, t, lo, hi):
                    got = self.by.setdefault((v, c), {})
                    got[t, a, b] = got.get((t, a, b), 0) + 1
                    self.states += b - a + 1
                    top = max(top, b)
        self.h = [0.0, *accumulate(1.0 / s for s in range(1, top + 1))]
        self.total = sum(self._sum(key, pieces) for key, pieces in self.by.items())
        self.rows = {b: list(c) for (b, _), c in rows_of(plan.decode_buckets)}

    def _sum(self, key: tuple[int, int], pieces: Pieces) -> float:
        c, h = key[1], self.h
        return sum(m * c / t * (h[b] - h[a - 1]) for (t, a, b), m in pieces.items())

    @property
    def mean(self) -> float:
        """Mean padded/real KV blocks over every reachable decode step."""
        return self.total / self.states if self.states else 1.0

    def gain(self, row: int, u: int) -> float:
        """How much the padding sum drops if row ``row`` gets block value ``u``."""
        vals = self.rows.get(row)
        if not vals:
            return 0.0
        i = bisect_left(vals, u)
        if i == len(vals) or vals[i] == u:
            return 0.0
        c, h, out = vals[i], self.h, 0.0
        for (t, a, b), m in self.by.get((row, c), {}).items():
            top = min(b, u // t)
            if top >= a:
                out += m * (c - u) / t * (h[top] - h[a - 1])
        return out

    def add(self, row: int, u: int) -> None:
        """Give row ``row`` block value ``u``: its steps with target <= u now run it."""
        vals = self.rows.get(row)
        if vals is None or u in vals or u > vals[-1]:
            return
        self.total -= self.gain(row, u)
        i = bisect_left(vals, u)
        c = vals[i]
        vals.insert(i, u)
        keep: Pieces = {}
        move: Pieces = {}
        for (t, a, b), m in self.by.pop((row, c), {}).items():
            top = min(b, u // t)
            if top >= a:
                move[t, a, top] = move.get((t, a, top), 0) + m
            if top < b:
                key = (t, max(a, top + 1), b)
                keep[key] = keep.get(key, 0) + m
        if keep:
            self.by[row, c] = keep
        if move:
            self.by[row, u] = move

    def gaps(self, row: int) -> Iterable[tuple[int, int]]:
        """(previous value, value) of each bucket of ``row`` that some step runs."""
        vals = self.rows.get(row, [])
        for i, c in enumerate(vals):
            if (row, c) in self.by:
                yield (vals[i - 1] if i else 0), c


class _Refiner:
    """Lazy greedy over candidate seeds: the best padding drop per estimated warmup second."""

    def __init__(self, plan: BucketPlan, steps: _Steps, model: ModelProfile | None) -> None:
        cfg = plan.config
        self.cfg, self.steps, self.model = cfg, steps, model
        self.t = cfg.tokens_per_step
        self.per_seq = cfg.max_blocks_per_seq
        self.tops = {b: c[-1] for (b, _), c in rows_of(plan.seed_decode_buckets)}
        self.planned = set(plan.decode_buckets)
        self.heap: list[tuple[float, Bucket]] = []
        self.added: list[Bucket] = []
        self.buckets = 0
        self._expanded: dict[Bucket, list[Bucket]] = {}
        self._costs: dict[Bucket, float] = {}

    def offer(self, row: int) -> None:
        """Push the best candidate seed of every gap of ``row`` (direct or through expansion)."""
        for prev, c in list(self.steps.gaps(row)):
            self._offer_gap(row, prev, c)

    def _offer_gap(self, row: int, prev: int, c: int) -> None:
        """Push the best seed that splits the gap (prev, c] of ``row``."""
        if (row, c) not in self.steps.by:
            return
        best: tuple[float, Bucket] | None = None
        for u in _grid(prev, c):
            for seed in self._seeds_for(row, u):
                score = self._score(seed)
                if score is not None and (best is None or score[0] > best[0]):
                    best = score[0], seed
        if best is not None:
            heapq.heappush(self.heap, (-best[0], best[1]))

    def _seeds_for(self, row: int, u: int) -> list[Bucket]:
        """Seeds that put a value of at least u (and below the row's largest) into ``row``."""
        out = []
        if row in self.tops and row <= u < self.tops[row]:
            out.append((row, 1, u))
        if self.t > 1 and row % self.t == 0 and (r := row // self.t) in self.tops:
            v = -(-u // self.t)
            if r <= v < self.tops[r] and v <= r * self.per_seq:
                out.append((r, 1, v))
        return out

    def _new(self, seed: Bucket) -> list[Bucket]:
        expanded = self._expanded.get(seed)
        if expanded is None:
            expanded = self._expanded[seed] = expand_spec(self.cfg, [seed])
        return [b for b in expanded if b not in self.planned]

    def _cost(self, buckets: list[Bucket]) -> float:
        total = 0.0
        for bucket in buckets:
            cost = self._costs.get(bucket)
            if cost is None:
                cost = self._costs[bucket] = decode_seconds([bucket], self.model)
            total += cost
        return total

    def _score(self, seed: Bucket) -> tuple[float, float, list[Bucket]] | None:
        """(drop per second, cost, new buckets), or None when the seed removes nothing."""
        new = self._new(seed)
        if not new:
            return None
        drop = sum(self.steps.gain(row, u) for row, _, u in new)
        if drop <= 0:
            return None
        cost = self._cost(new)
        return drop / cost, cost, new

    def run(self, target: float, max_buckets: int | None) -> str:
        for row in sorted(self.steps.rows):
            self.offer(row)
        while self.steps.mean > target:
            found = self._pop()
            if found is None:
                return "no candidate"
            seed, new = found
            if max_buckets is not None and self.buckets + len(new) > max_buckets:
                return "budget"
            self._apply(seed, new)
        return "reached"

    def _pop(self) -> tuple[Bucket, list[Bucket]] | None:
        """The best seed by its current score (scores only fall as seeds are added)."""
        while self.heap:
            _, seed = heapq.heappop(self.heap)
            score = self._score(seed)
            if score is None:
                continue
            if self.heap and score[0] < -self.heap[0][0]:
                heapq.heappush(self.heap, (-score[0], seed))
                continue
            return seed, score[2]
        return None

    def _apply(self, seed: Bucket, new: list[Bucket]) -> None:
        for row, _, u in sorted(new, key=lambda b: -b[2]):
            self.steps.add(row, u)
            self.planned.add((row, 1, u))
        self.added.append(seed)
        self.buckets += len(new)
        for row, _, u in new:
            vals = self.steps.rows.get(row, [])
            i = bisect_left(vals, u)
            if i < len(vals) and vals[i] == u:
                self._offer_gap(row, vals[i - 1] if i else 0, u)
                if i + 1 < len(vals):
                    self._offer_gap(row, u, vals[i + 1])


def _grid(prev: int, c: int) -> list[int]:
    """GRID values evenly spaced in (prev, c), e.g. (0, 13) -> 1..12."""
    lo = prev + 1
    if lo >= c:
        return []
    return sorted({lo + (c - lo) * i // GRID for i in range(GRID)})


def refine_padding(
    plan: BucketPlan,
    space: StateSpace,
    target: float,
    *,
    max_buckets: int | None = None,
    model: ModelProfile | None = None,
) -> Refinement:
    """``plan`` plus seeds below its rows' largest until the mean decode KV padding is at most
    ``target``, or ``max_buckets`` more decode buckets would be needed, or no seed helps.

    The result reads its buckets from a seed file; the caller proves it (coverage cannot change,
    see the module docstring) and measures its padding exactly (``decode_padding``).
    """
    if plan.config.contiguous_pa:
        return Refinement(plan, (), 0.0, 0.0, target, "contiguous PA")
    steps = _Steps(plan, space)
    before = steps.mean
    if before <= target:
        return Refinement(plan, (), before, before, target, "reached")
    refiner = _Refiner(plan, steps, model)
    stopped = refiner.run(target, max_buckets)
    if not refiner.added:
        return Refinement(plan, (), before, before, target, stopped)
    seeds = sorted({*plan.seed_decode_buckets, *refiner.added})
    text = format_bucket_file(plan.prompt_buckets, seeds, ("warmgate refined seed file",))
    done = plan_buckets(with_bucket_file(plan.config, text))
    return Refinement(done, tuple(sorted(refiner.added)), before, steps.mean, target, stopped)
