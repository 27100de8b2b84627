"""Runtime bucket lookups: first-fit over sorted tuples, a fast per-row index, fallback buckets."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

from warmgate.buckets.engine.generate import Bucket

__all__ = ["BucketIndex", "DecodeRows", "Lookup", "fallback_value", "first_fit"]

# generate_fallback_bucket's base steps: bs rounds on 2, query and blocks on 32.
FALLBACK_BS_BASE = 2
FALLBACK_QUERY_BASE = 32
FALLBACK_BLOCKS_BASE = 32


@dataclass(frozen=True, slots=True)
class Lookup:
    """The bucket a lookup returns and whether it missed every planned bucket.

    ``fallback`` is True when no planned bucket covered the target, so the engine generated a
    fallback bucket (and compiles it on first use). ``planned`` says whether the returned bucket is
    in the planned list: a fallback can coincide with a planned bucket by chance (e.g. config A
    (65, 1, 10) -> fallback (64, 1, 96), which is not planned; a fallback (64, 1, 128) would be).
    """

    bucket: Bucket
    fallback: bool
    planned: bool


def first_fit(sorted_buckets: Sequence[Bucket], target: Bucket) -> Bucket | None:
    """``find_equal_or_closest_greater_config`` verbatim: bisect, then scan for a dominating bucket.

    This is the reference the fast ``BucketIndex`` is tested against. It picks the smallest bs row
    having any bucket that covers the target, then the smallest such bucket in that row: config A
    (12, 1, 500) -> (22, 1, 640), because the bs-12 row stops at 384.
    """
    for i in range(bisect_left(sorted_buckets, target), len(sorted_buckets)):
        b = sorted_buckets[i]
        if b[0] >= target[0] and b[1] >= target[1] and b[2] >= target[2]:
            return b
    return None


class BucketIndex:
    """Per-(bs, query) rows of a sorted bucket list, answering ``first_fit`` with bisects.

    Every bucket of a row (b, q) with (b, q) > (bs, query) sorts after the target, so first-fit is
    the first row at or after (bs, query) with q >= query whose largest ctx covers the target ctx,
    and in it the smallest ctx >= target (one bisect).
    """

    __slots__ = ("_ctx", "_keys", "_max")

    def __init__(self, sorted_buckets: Sequence[Bucket]) -> None:
        keys: list[tuple[int, int]] = []
        ctx: list[list[int]] = []
        for b, q, c in sorted_buckets:
            if not keys or keys[-1] != (b, q):
                keys.append((b, q))
                ctx.append([])
            ctx[-1].append(c)
        self._keys = keys
        self._ctx = ctx
        self._max = [row[-1] for row in ctx]

    def find(self, bs: int, query: int, ctx: int) -> Bucket | None:
        """Same answer as ``first_fit(buckets, (bs, query, ctx))``."""
        keys, maxes = self._keys, self._max
        for i in range(bisect_left(keys, (bs, query)), len(keys)):
            kb, kq = keys[i]
            if kq >= query and maxes[i] >= ctx:
                row = self._ctx[i]
                return (kb, kq, row[bisect_left(row, ctx)])
        return None


class DecodeRows:
    """Decode buckets (all of query 1) as bs rows of sorted block counts, for fast first fit.

    e.g. config A seeds: rows [1, 2, 4, 8, ...], row 12 -> [64, 128, 192, 256, 320, 384]; the
    lookup (12, 500) skips row 12 (max 384) and returns (22, 1, 640) from row 22.
    """

    __slots__ = ("_bs", "_ctx", "_max")

    def __init__(self, sorted_buckets: Sequence[Bucket]) -> None:
        if any(q != 1 for _, q, _ in sorted_buckets):
            raise ValueError("decode buckets must all have query 1")
        index = BucketIndex(sorted_buckets)
        self._bs = [b for b, _ in index._keys]
        self._ctx = index._ctx
        self._max = index._max

    def find(self, bs: int, blocks: int) -> Bucket | None:
        """Same answer as ``first_fit(buckets, (bs, 1, blocks))``."""
        maxes = self._max
        n = len(maxes)
        i = bisect_left(self._bs, bs)
        while i < n and maxes[i] < blocks:
            i += 1
        if i == n:
            return None
        row = self._ctx[i]
        return (self._bs[i], 1, row[bisect_left(row, blocks)])


def fallback_value(n: int, base: int) -> int:
    """``calc_fallback_value``: round n up on a step that grows with its cube root.

    e.g. cf(31, 32): step ceil(31 ** (1/3)) * 32 = 4 * 32 = 128 -> 128;
    cf(4001, 32): step 16 * 32 = 512 -> 4096; cf(65, 2): step 5 * 2 = 10 -> 70.
    """
    if n <= 1:
        return n
    step = math.ceil(math.pow(n, 1 / 3)) * base
    return math.ceil(n / step) * step
