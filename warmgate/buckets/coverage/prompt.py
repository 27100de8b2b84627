"""Exact prompt coverage over boxes of (query, ctx): the bucket each reachable prefill runs."""

from __future__ import annotations

from collections.abc import Iterator

from warmgate.buckets.coverage.states import StateSpace
from warmgate.buckets.engine.lookup import (
    FALLBACK_BLOCKS_BASE,
    FALLBACK_BS_BASE,
    FALLBACK_QUERY_BASE,
    fallback_value,
)
from warmgate.buckets.engine.plan import BucketPlan
from warmgate.buckets.engine.steps import (
    Bucket,
    Staircase,
    Tally,
    fallback_pieces,
    rows_of,
    tally_add,
)

__all__ = ["PromptProver"]

Box = tuple[int, int, int, int]  # query low, query high, ctx low, ctx high (inclusive)


class PromptProver:
    """Walks bs and the query intervals between planned query values (doc section 3.4).

    first_fit((bs, q, ctx)) only sees rows (b', q') with b' >= bs and q' >= q, so for q in
    (q_{i-1}, q_i] the answer is a staircase in ctx; the ctx range shrinks as q grows
    (ctx <= ceil((mml - 1 - q) / block)), which ``count`` sums in runs of one block of q.
    """

    def __init__(self, plan: BucketPlan, space: StateSpace) -> None:
        cfg = plan.config
        self.space = space
        self.rows = rows_of(plan.prompt_buckets)
        self.mns = cfg.max_num_seqs
        self.ctx_cap = -(-(cfg.max_model_len - 1) // cfg.block_size)

    def run(self, tally: Tally) -> int:
        """Add every reachable prompt state to ``tally``; return how many there were."""
        total = 0
        for bs, box, shape, _ in self.reachable():
            count, q_last = self.count(bs, box)
            total += count
            top_ctx = min(box[3], self.space.ctx_max(bs, box[0]))
            tally_add(tally, shape, count, (bs, box[0], box[2]), (bs, q_last, top_ctx))
        return total

    def reachable(self) -> Iterator[tuple[int, Box, Bucket, int]]:
        """(bs, box, shape, query row) for every non-empty box of states the runner forms."""
        for bs in range(1, self.space.prompt_bs_max + 1):
            for box, shape, q_row in self.pieces(bs):
                if bs > 1 and not self.space.batch_allowed(shape):
                    continue  # the runner does not form this batch (doc section 3.6)
                if self.space.ctx_max(bs, box[0]) >= box[2]:
                    yield bs, box, shape, q_row

    def pieces(self, bs: int) -> Iterator[tuple[Box, Bucket, int]]:
        """Boxes of (query, ctx) with one prompt bucket each, for prompt batches of size bs."""
        qmax = self.space.query_max(bs)
        bounds = sorted({q for (b, q), _ in self.rows if b >= bs})
        lo = 1
        for q_row in [*bounds, qmax]:
            hi = min(q_row, qmax)
            if lo <= hi:
                stairs = Staircase.build(self.rows, bs, q_row)
                for box, shape in self._interval(bs, lo, hi, stairs):
                    yield box, shape, q_row
            lo = max(lo, hi + 1)

    def _interval(
        self, bs: int, qa: int, qb: int, stairs: Staircase
    ) -> Iterator[tuple[Box, Bucket]]:
        cmax = self.space.ctx_max(bs, qa)  # the widest ctx range of the interval is at its low q
        for ca, cb, hit in stairs.pieces(0, cmax):
            if hit is not None:
                yield (qa, qb, ca, cb), hit
                continue
            for qpa, qpb, qv in fallback_pieces(qa, qb, FALLBACK_QUERY_BASE):
                for cpa, cpb, cv in fallback_pieces(ca, cb, FALLBACK_BLOCKS_BASE):
                    yield (qpa, qpb, cpa, cpb), self._fallback(bs, qv, cv)

    def _fallback(self, bs: int, query_value: int, ctx_value: int) -> Bucket:
        """generate_fallback_bucket: bs on 2, query on 32 capped at mbt, ctx on 32 capped.

        Always with a ctx: the engine knows num_hpu_blocks at runtime (BucketPlan._prompt_fallback).
        """
        ctx = min(ctx_value, self.ctx_cap)
        query = min(query_value, self.space.max_num_batched_tokens)
        return min(fallback_value(bs, FALLBACK_BS_BASE), self.mns), query, ctx

    def count(self, bs: int, box: Box) -> tuple[int, int]:
        """States (bs, q, c) in the box with c <= ctx_max(bs, q), and the largest such q.

        Summed in runs of q with one ctx_max (one block of tokens each).
        """
        qa, qb, ca, cb = box
        total, q = 0, qa
        space = self.space
        while q <= qb:
            cm = space.ctx_max(bs, q)
            if cm < ca:
                break  # ctx_max only shrinks as q grows
            end = min(qb, space.ctx_run_end(bs, q))
            total += (end - q + 1) * (min(cb, cm) - ca + 1)
            q = end + 1
        return total, q - 1
