"""Piecewise-constant views of first-fit lookups and fallback rounding, for the interval prover."""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = [
    "INF",
    "ShapeTally",
    "Staircase",
    "Tally",
    "fallback_pieces",
    "overlap",
    "rows_of",
    "tally_add",
]

# Larger than any block count or query a config can produce; closes the last piece.
INF = 1 << 62

Bucket = tuple[int, int, int]
Overlap = tuple[int, int, int, int]  # (states, example n, example S, largest S)
Row = tuple[tuple[int, int], list[int]]


@dataclass(slots=True)
class ShapeTally:
    """What the provers learn about one shape: state count, smallest example, largest request."""

    states: int
    example: Bucket
    requested: Bucket

    def add(self, states: int, example: Bucket, requested: Bucket) -> None:
        """Merge another run of states that run the same shape."""
        self.states += states
        self.example = min(self.example, example)
        old = self.requested
        self.requested = (old[0], max(old[1], requested[1]), max(old[2], requested[2]))


Tally = dict[Bucket, ShapeTally]


def tally_add(tally: Tally, shape: Bucket, states: int, example: Bucket, requested: Bucket) -> None:
    """Record a run of states in ``tally``."""
    entry = tally.get(shape)
    if entry is None:
        tally[shape] = ShapeTally(states, example, requested)
    else:
        entry.add(states, example, requested)


def rows_of(sorted_buckets: Sequence[Bucket]) -> list[Row]:
    """Group a sorted bucket list into ((bs, query), ascending ctx list) rows, in tuple order."""
    rows: list[Row] = []
    for b, q, c in sorted_buckets:
        if not rows or rows[-1][0] != (b, q):
            rows.append(((b, q), []))
        rows[-1][1].append(c)
    return rows


@dataclass(frozen=True, slots=True)
class Staircase:
    """first_fit as a step function of the target ctx x, for a fixed (bs, query) target.

    ``highs[i]`` closes the piece (highs[i-1], highs[i]] on which first-fit returns ``hits[i]``;
    beyond ``highs[-1]`` nothing dominates the target (a fallback). Reference doc section 3.4:
    first-fit is the lex-smallest bucket dominating the target, so walking the dominating rows in
    tuple order, each row serves only the x its predecessors' largest ctx did not reach. e.g. config
    A seeds from bs 12: (12,*) serves x <= 384, then (22,*) serves 385..704 -> 448, 640 or 704.
    """

    highs: tuple[int, ...]
    hits: tuple[Bucket, ...]

    @classmethod
    def build(cls, rows: Sequence[Row], bs: int, query: int) -> Staircase:
        """The staircase of first_fit(rows, (bs, query, x)) over x."""
        highs: list[int] = []
        hits: list[Bucket] = []
        covered = -1
        for (b, q), ctxs in rows:
            if b < bs or q < query or ctxs[-1] <= covered:
                continue
            for c in ctxs:
                if c > covered:
                    highs.append(c)
                    hits.append((b, q, c))
            covered = ctxs[-1]
        return cls(tuple(highs), tuple(hits))

    @property
    def top(self) -> int:
        """The largest x any bucket covers; -1 when nothing dominates (bs, query) at all."""
        return self.highs[-1] if self.highs else -1

    def at(self, x: int) -> Bucket | None:
        """first_fit for ctx x, or None (fallback)."""
        i = bisect_left(self.highs, x)
        return self.hits[i] if i < len(self.hits) else None

    def pieces(self, lo: int, hi: int) -> Iterator[tuple[int, int, Bucket | None]]:
        """Split [lo, hi] into maximal runs of x with one first-fit answer (None = fallback)."""
        i = bisect_left(self.highs, lo)
        highs, hits = self.highs, self.hits
        while lo <= hi:
            if i >= len(highs):
                yield lo, hi, None
                return
            end = min(highs[i], hi)
            yield lo, end, hits[i]
            lo = end + 1
            i += 1


def _cube_root_step(n: int) -> int:
    """ceil(n ** (1/3)) exactly as ``calc_fallback_value`` computes it (math.pow on floats)."""
    return math.ceil(math.pow(n, 1 / 3))


def _band_end(m: int) -> int:
    """The largest n whose float cube-root step is m (near m**3; float error moves it by +-1)."""
    n = m**3
    while _cube_root_step(n + 1) <= m:
        n += 1
    while _cube_root_step(n) > m:
        n -= 1
    return n


def fallback_pieces(lo: int, hi: int, base: int) -> Iterator[tuple[int, int, int]]:
    """Split [lo, hi] into runs where ``fallback_value(x, base)`` is constant: (a, b, value).

    cf(x) = ceil(x / s) * s with s = ceil(cbrt x) * base (doc section 3.4), so cf is constant on
    (v - s, v] inside one cube-root band; the band ends near m**3. e.g. base 32: 28..64 -> s 128,
    one piece of value 128; 65..125 -> s 160, one piece of value 160; 126..216 -> s 192:
    126..192 -> 192, 193..216 -> 384.
    """
    x = lo
    while x <= hi:
        if x <= 1:
            yield x, x, x
            x += 1
            continue
        m = _cube_root_step(x)
        step = m * base
        value = math.ceil(x / step) * step
        end = min(value, _band_end(m), hi)
        yield x, end, value
        x = end + 1


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _positive_run(p: int, q: int, u: int, v: int) -> tuple[int, int] | None:
    """The sub-range of n in [u, v] where p*n + q >= 1 (a linear count stays positive)."""
    if p > 0:
        u = max(u, _ceil_div(1 - q, p))
    elif p < 0:
        v = min(v, (q - 1) // -p)
    elif q < 1:
        return None
    return (u, v) if u <= v else None


def _cuts(n1: int, n2: int, c1: int, c2: int) -> list[int]:
    """``sorted({n1, n2 + 1, *(c for c in (c1, c2) if n1 < c <= n2)})`` without the set and sort.

    The starts of ``overlap``'s segments of n, then n2 + 1; it runs for every piece of every
    proof, so it compares the two inner cuts instead.
    """
    if c1 > c2:
        c1, c2 = c2, c1
    cuts = [n1]
    if n1 < c1 <= n2:
        cuts.append(c1)
    if c1 < c2 and n1 < c2 <= n2:
        cuts.append(c2)
    if n2 + 1 != n1:
        cuts.append(n2 + 1)
    return cuts if n1 <= n2 + 1 else cuts[::-1]  # n1 > n2 + 1: just [n2 + 1, n1]


def overlap(a: int, b: int, n1: int, n2: int, reach: tuple[int, int]) -> Overlap | None:
    """How many (n, S) with n in [n1, n2] and S in [a, b] are reachable: n <= S <= hi(n).

    hi(n) = min(per_seq * n, cap) with (per_seq, cap) = reach. Returns (count, smallest n, its
    smallest S, largest S), or None. The count min(b, hi(n)) - max(a, n) + 1 is linear in n
    between the breakpoints n = top // per_seq and n = a, so each segment is an arithmetic
    series. e.g. a=5, b=8, n in 1..3, per_seq 4: n=1 reaches S <= 4 (none), n=2 and n=3 reach
    S 5..8 (4 each) -> (8, 2, 5, 8).
    """
    per_seq, cap = reach
    top = min(b, cap)
    k1 = top // per_seq  # per_seq * n <= top exactly when n <= k1
    count, first, last = 0, None, None
    for u, nxt in itertools.pairwise(_cuts(n1, n2, k1 + 1, a + 1)):
        v = nxt - 1
        up, uq = (per_seq, 0) if v <= k1 else (0, top)  # hi side: per_seq * n, or top
        lp, lq = (0, a) if v <= a else (1, 0)  # lo side: a, or n
        run = _positive_run(up - lp, uq - lq + 1, u, v)
        if run is None:
            continue
        x, y = run
        p, q = up - lp, uq - lq + 1
        count += p * (x + y) * (y - x + 1) // 2 + q * (y - x + 1)
        first = first or (x, lp * x + lq)
        last = up * y + uq
    if first is None or last is None:
        return None
    return count, first[0], first[1], last
