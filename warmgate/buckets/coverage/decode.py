"""Exact decode coverage over intervals of S: the shape of every (n, S, T) without enumerating S."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

from warmgate.buckets.coverage.states import StateSpace
from warmgate.buckets.engine.lookup import FALLBACK_BLOCKS_BASE, FALLBACK_BS_BASE, fallback_value
from warmgate.buckets.engine.plan import BucketPlan
from warmgate.buckets.engine.steps import (
    INF,
    Bucket,
    Staircase,
    Tally,
    fallback_pieces,
    overlap,
    rows_of,
    tally_add,
)

__all__ = ["DecodeProver"]

Piece = tuple[int, int, int]  # (S low, S high, value), inclusive


class DecodeProver:
    """Walks n and T, splitting S at the breakpoints of both lookups (doc section 3.6).

    For fixed n and T the padded batch B = find_decode_bucket(n, min(S, fmc), seed=T>1)[0] is a
    step function of S whose steps are the ctx values of the seed (then full) rows at or above n;
    the block bucket C = find_decode_bucket(B*T, min(T*S, fmc))[2] is a step function of T*S on
    row B*T and above. Fallbacks round on cube-root steps (``fallback_pieces``). Every piece is
    an interval of S with one shape; runs of n that share the S -> shape function are counted
    together in closed form (``overlap``), so the work is rows x T x pieces, not states.
    """

    def __init__(self, plan: BucketPlan, space: StateSpace) -> None:
        cfg = plan.config
        self.space = space
        self.fmc = plan.fallback_max_ctx
        self.mns = cfg.max_num_seqs
        self.nhb = cfg.num_gpu_blocks
        self.contiguous = cfg.contiguous_pa
        self.caps = cfg.caps_contiguous_blocks
        self._seed_rows = rows_of(plan.seed_decode_buckets)
        self._rows = rows_of(plan.decode_buckets)
        self._seed_bs = [b for (b, _), _ in self._seed_rows]
        self._row_bs = [b for (b, _), _ in self._rows]
        self._cache: dict[tuple[bool, int], Staircase] = {}
        # The staircase of each (seed, bs) asked for: the provers ask for the same few bs values
        # hundreds of thousands of times, this skips the bisect that finds their row span.
        self._by_bs: dict[tuple[bool, int], Staircase] = {}
        self._group_runs: dict[bool, list[tuple[int, int]]] = {}

    def _stairs(self, seed: bool, bs: int) -> Staircase:
        """first_fit((bs, 1, x)) over seeds or the full list; shared by every bs of one row span."""
        stairs = self._by_bs.get((seed, bs))
        if stairs is None:
            stairs = self._by_bs[seed, bs] = self._span_stairs(seed, bs)
        return stairs

    def _span_stairs(self, seed: bool, bs: int) -> Staircase:
        """The staircase of the rows at or above bs, built once per row span."""
        rows, keys = (self._seed_rows, self._seed_bs) if seed else (self._rows, self._row_bs)
        start = bisect_left(keys, bs)
        key = (seed, start)
        stairs = self._cache.get(key)
        if stairs is None:
            stairs = self._cache[key] = Staircase.build(rows[start:], bs, 1)
        return stairs

    def run(self, tally: Tally) -> int:
        """Add every decode state to ``tally``; return how many there were."""
        total = 0
        reach = self._reach()
        for t in self.space.tokens:
            mult = 1 if self.contiguous else t
            for n1, n2 in self._groups(t):
                for a, b, shape in self.pieces(n1, t, n1, self.space.total_blocks(n2)[1]):
                    hit = overlap(a, b, n1, n2, reach)
                    if hit is not None:
                        count, n, s, s_top = hit
                        total += count
                        need = (shape[0], 1, min(mult * s_top, self.fmc))
                        tally_add(tally, shape, count, (n, s, t), need)
        return total

    def _reach(self) -> tuple[int, int]:
        """(per_seq, cap) with S <= min(per_seq * n, cap): the space's upper bound on S."""
        space = self.space
        if self.contiguous:
            cap = space.total_blocks(1)[1]
            return cap, cap
        _, cap = space.total_blocks(space.max_num_seqs)
        shared = space.prefix_caching or self.nhb is None
        return space.blocks_per_seq, INF if shared else cap

    def groups(self, t: int) -> Iterator[tuple[int, int]]:
        """Runs of n sharing one S -> shape function (``_groups``); the drafter model walks them."""
        return iter(self._groups(t))

    def block_pieces(self, virtual: int, t: int, sa: int, sb: int) -> Iterator[Piece]:
        """C over S in [sa, sb] for virtual batch B*T (``_ctx_pieces``), for the drafter model.

        With t = 1 this is the block bucket of ``get_habana_paged_attn_buffers(..., batch_size=B)``
        for a block list of S entries (contiguous PA: highest id + 1), fmc cap and fallback
        included.
        """
        return self._ctx_pieces(virtual, t, sa, sb)

    def _groups(self, t: int) -> list[tuple[int, int]]:
        """Runs of n whose steps map S to shapes through the same function.

        B depends on n only through the first seed and full rows at or above n, and through
        the fallback bs when some S of n falls past every row; so n in 1..12 of config A's
        seeds (rows 1, 2, 4, 8, 12, ...) split into 1, 2, 3..4, 5..8, 9..12. They depend on T
        only through T > 1 (seed-first lookups, ``_group_key``), so they are found once for each.
        """
        seeded = t > 1
        runs = self._group_runs.get(seeded)
        if runs is None:
            runs = self._group_runs[seeded] = list(self._find_groups(t))
        return runs

    def _find_groups(self, t: int) -> Iterator[tuple[int, int]]:
        """``_groups``, walking every n."""
        start, previous = 1, None
        for n in range(1, self.space.max_num_seqs + 1):
            key = self._group_key(n, t)
            if previous is not None and key != previous:
                yield start, n - 1
                start = n
            previous = key
        yield start, self.space.max_num_seqs

    def _group_key(self, n: int, t: int) -> tuple[int, int, int]:
        seeded = bisect_left(self._seed_bs, n) if t > 1 and self._seed_rows else -1
        reach = min(self.space.total_blocks(n)[1], self.fmc)
        falls = reach > self._stairs(False, n).top
        return seeded, bisect_left(self._row_bs, n), self._fallback_bs(n) if falls else 0

    def pieces(self, n: int, t: int, lo: int, hi: int) -> Iterator[tuple[int, int, Bucket]]:
        """(S low, S high, shape) for n sequences of T tokens, S ascending."""
        for sa, sb, padded in _merge(self._batch_pieces(n, t, lo, hi)):
            virtual = padded * t
            for a, b, ctx in self._ctx_pieces(virtual, t, sa, sb):
                yield a, b, (virtual, 1, ctx)

    # -- padded batch B ----------------------------------------------------------------------

    def _batch_pieces(self, n: int, t: int, lo: int, hi: int) -> Iterator[Piece]:
        """B over S in [lo, hi]: nblocks is capped at fmc first, so S > fmc behaves as fmc."""
        top = min(hi, self.fmc)
        if lo <= top:
            yield from self._batch_x(n, t, lo, top)
        if hi > top:
            for _, _, padded in self._batch_x(n, t, self.fmc, self.fmc):
                yield max(lo, top + 1), hi, padded

    def _batch_x(self, n: int, t: int, lo: int, hi: int) -> Iterator[Piece]:
        """Seed-first when T > 1 (PR #624), then the full list, then the fallback bs."""
        if t > 1 and self._seed_rows:
            for a, b, hit in self._stairs(True, n).pieces(lo, hi):
                if hit is not None:
                    yield a, b, hit[0]
                else:
                    yield from self._batch_full(n, a, b)
        else:
            yield from self._batch_full(n, lo, hi)

    def _batch_full(self, n: int, lo: int, hi: int) -> Iterator[Piece]:
        for a, b, hit in self._stairs(False, n).pieces(lo, hi):
            # The fallback bs is min(cf(n, 2), max_num_seqs); only its bs is used for padding.
            yield a, b, hit[0] if hit is not None else self._fallback_bs(n)

    def _fallback_bs(self, n: int) -> int:
        return min(fallback_value(n, FALLBACK_BS_BASE), self.mns)

    # -- block bucket C ----------------------------------------------------------------------

    def _ctx_pieces(self, virtual: int, t: int, sa: int, sb: int) -> Iterator[Piece]:
        """C over S in [sa, sb] for virtual batch B*T; contiguous PA looks up S, not T*S."""
        mult = 1 if self.contiguous else t
        split = self.fmc // mult  # above it, min(mult*S, fmc) is fmc
        if sa <= min(sb, split):
            yield from self._ctx_x(virtual, mult, sa, min(sb, split))
        if sb > split:
            for _, _, ctx in self._ctx_x(virtual, 1, self.fmc, self.fmc):
                yield from self._post(max(sa, split + 1), sb, ctx)

    def _ctx_x(self, virtual: int, mult: int, sa: int, sb: int) -> Iterator[Piece]:
        """Pieces where the lookup target is mult*S (uncapped)."""
        for xa, xb, hit in self._stairs(False, virtual).pieces(mult * sa, mult * sb):
            a, b = max(sa, -(-xa // mult)), min(sb, xb // mult)
            if a > b:
                continue
            if hit is not None:
                yield from self._post(a, b, hit[2])
                continue
            for fa, fb, value in fallback_pieces(mult * a, mult * b, FALLBACK_BLOCKS_BASE):
                pa, pb = max(a, -(-fa // mult)), min(b, fb // mult)
                if pa <= pb:
                    yield from self._post(pa, pb, self._fallback_ctx(value))

    def _fallback_ctx(self, value: int) -> int:
        """cf(nblocks, 32) capped at fmc; 0 when the KV block count is unknown (doc section 3.4)."""
        return 0 if self.nhb is None else min(value, self.fmc)

    def _post(self, a: int, b: int, ctx: int) -> list[Piece]:
        """Contiguous PA runs max(C, S) (capped at num_gpu_blocks + 1 on main); others run C.

        A list, not a generator: it is one piece but for contiguous PA, and it is asked for
        every piece of every proof.
        """
        if not self.contiguous or ctx >= b:
            return [(a, b, self._cap(ctx))]
        head = [(a, ctx, self._cap(ctx))] if a <= ctx else []
        return head + [(s, s, self._cap(s)) for s in range(max(a, ctx + 1), b + 1)]

    def _cap(self, ctx: int) -> int:
        """main caps the contiguous-PA block bucket at num_gpu_blocks + 1; v0.26.0 does not."""
        if self.contiguous and self.nhb is not None and self.caps:
            return min(ctx, self.nhb + 1)
        return ctx


def _merge(pieces: Iterator[Piece]) -> Iterator[Piece]:
    """Join adjacent pieces with the same value (seed rows split S finer than B changes)."""
    current: list[int] | None = None
    for a, b, v in pieces:
        if current is not None and current[2] == v and current[1] + 1 == a:
            current[1] = b
            continue
        if current is not None:
            yield current[0], current[1], current[2]
        current = [a, b, v]
    if current is not None:
        yield current[0], current[1], current[2]
