"""Prompt completion: buckets the engine's prompt warmup compiles, for every unwarmed prefill.

A bs-1 bucket (1, Q, C) with Q + C * block > max_model_len is compiled only when it is the first
bucket of row Q at or above C0(Q) = (mml - Q) // block: its warmup dummy runs with C0 context
blocks (``warmup_shapes``). So a row serves every context up to that first bucket, and nothing
above it: a prefill that first-fits a larger bucket of the row is stuck on an uncompiled shape,
and one that needs more than the row's largest context passes on to the next row. Per round:

- a prefill passing rows that hold nothing at or above C0 gets a bucket in the first of them (it
  becomes that row's first at or above C0);
- one passing a row that does gets a new query row Q'' just above it;
- one stuck on row Q gets a new query row Q* just below Q;
- batches of bs >= 2 (no context) get (bs, row, largest ctx), as before.

A new row holds one bucket with the largest context its prefills need; one below a row also holds
that row's buckets below its own C0, since it takes most of that row's prefills (their padding
stays the engine's), while one above takes only k + 1 query values. With a draft model the
dummies are k tokens shorter, so a new row stays more than k away from the rows around it (else
its dummies land in the row below, or it catches the dummies of the row above): stuck prefills
between Q - 1 - k and Q then have no bucket the warmup compiles (config A, eagle k = 2: a
2046-token chunk after 2049 computed tokens pads to ('prompt', 1, 2048, 31)).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from warmgate.buckets.coverage.prompt import Box, PromptProver
from warmgate.buckets.coverage.states import StateSpace
from warmgate.buckets.engine.plan import BucketPlan
from warmgate.buckets.engine.steps import INF, Bucket, rows_of
from warmgate.buckets.engine.warmup_shapes import dummy_context

__all__ = ["PromptAdditions", "prompt_additions"]

State = tuple[int, int, int]


@dataclass(slots=True)
class PromptAdditions:
    """The prompt buckets a round adds, and example states no compiled bucket can serve."""

    buckets: set[Bucket] = field(default_factory=set)
    unwarmable: list[State] = field(default_factory=list)


def prompt_additions(
    plan: BucketPlan, space: StateSpace, warmed: frozenset[Bucket], shortenings: tuple[int, ...]
) -> PromptAdditions:
    """What one completion round adds for the prompt states that run unwarmed shapes."""
    return _PromptCompleter(plan, space, max(shortenings)).run(warmed)


@dataclass(slots=True)
class _NewRow:
    """A query row to add: the largest context its prefills need, and whose buckets it mirrors."""

    top: int = -1
    mirror: int | None = None  # the row above it, whose buckets below its C0 it copies


class _PromptCompleter:
    def __init__(self, plan: BucketPlan, space: StateSpace, shortening: int) -> None:
        cfg = plan.config
        self.plan = plan
        self.space = space
        self.k = shortening
        self.mml = cfg.max_model_len
        self.block = cfg.block_size
        self.last_query = min(space.query_max(1), cfg.max_num_batched_tokens)
        self.row_ctx = {q: ctxs for (b, q), ctxs in rows_of(plan.prompt_buckets) if b == 1}
        self.queries = sorted(self.row_ctx)
        self.in_row: dict[int, int] = {}  # existing row -> largest ctx to add there
        self.new_rows: dict[int, _NewRow] = {}
        # the row prefills first reach -> (query lo, query hi, lowest ctx, highest ctx) boxes
        self.below: dict[int | None, list[tuple[int, int, int, int]]] = {}

    def run(self, warmed: frozenset[Bucket]) -> PromptAdditions:
        out = PromptAdditions()
        mbt = self.plan.config.max_num_batched_tokens
        for bs, box, shape, q_row in PromptProver(self.plan, self.space).reachable():
            if shape in warmed:
                continue
            top = min(box[3], self.space.ctx_max(bs, box[0]))
            if bs > 1:
                out.buckets.add((bs, max(2, min(q_row, mbt // bs)), top))
            else:
                self._place(box, shape, top, out)
        for after, boxes in self.below.items():
            self._below(after, boxes, out)
        out.buckets.update((1, row, ctx) for row, ctx in self.in_row.items())
        for query, row in self.new_rows.items():
            c0 = self._c0(query)
            mirrored = self.row_ctx.get(row.mirror, []) if row.mirror is not None else []
            out.buckets.update((1, query, c) for c in mirrored if c < c0)
            out.buckets.add((1, query, row.top))
        return out

    def _place(self, box: Box, shape: Bucket, top: int, out: PromptAdditions) -> None:
        """The cheapest place for a box of unwarmed prefills (module docstring), else unwarmable.

        Its prefills pass every bs-1 row from their query up to the row they land on (a planned
        bucket the warmup never compiles), or all of them (a fallback).
        """
        qa, qb, ca, _ = box
        stuck = shape[0] == 1 and shape[2] in self.row_ctx.get(shape[1], ())
        land = shape[1] if stuck else INF
        passed = [r for r in self.queries if qa <= r < land]
        for row in passed:  # a passed row without a bucket at or above C0 takes one
            if row > self.k and self._first_at_or_above_c0(row) is None:
                self.in_row[row] = max(self.in_row.get(row, -1), top)
                return
        for row in passed:  # just above a passed row: it takes all of them
            query = row + self.k + 1
            if query < land and self._room(query):
                self._new_row(query, top, None)
                return
        # ctx_max(q) >= ca exactly while q <= mml - 2 - (ca - 1) * block (StateSpace.ctx_max).
        q_high = qb if ca == 0 else min(qb, self.mml - 2 - (ca - 1) * self.block)
        self.below.setdefault(self._next_row(qa - 1), []).append((qa, q_high, ca, top))

    def _below(
        self, after: int | None, boxes: list[tuple[int, int, int, int]], out: PromptAdditions
    ) -> None:
        """One row just below ``after`` (the row they first reach) for boxes placed nowhere else.

        It sits at their largest query, or at the first query above it with room (more than k
        from the row below: it still takes every one of them), but more than k below ``after``;
        prefills above it are left unwarmable (a row closer to ``after`` would catch its dummies).
        """
        limit = self.last_query if after is None else after - self.k - 1
        # A file's query is at least 2, and a dummy must keep a token after losing k.
        lowest = max(2, self.k + 1, min(max(b[1] for b in boxes), limit))
        roomy = next((q for q in range(lowest, max(lowest, limit) + 1) if self._room(q)), None)
        usable, query = roomy is not None, lowest if roomy is None else roomy
        for qa, q_high, ca, top in boxes:
            if usable and qa <= query:
                self._new_row(query, top, after)
            if not usable or q_high > query:
                out.unwarmable.append((1, max(qa, query + 1) if usable else qa, ca))

    def _new_row(self, query: int, top: int, mirror: int | None) -> None:
        row = self.new_rows.setdefault(query, _NewRow(mirror=mirror))
        row.top = max(row.top, top)

    def _room(self, query: int) -> bool:
        """A new row here keeps its dummies and its neighbours' apart (more than k tokens)."""
        if not max(2, self.k + 1) <= query <= self.last_query or query in self.row_ctx:
            return False  # a file's query is at least 2; a dummy keeps at least one token
        i = bisect_left(self.queries, query)
        before = self.queries[i - 1] if i > 0 else 0  # the last bs-1 row below it
        after = self._next_row(query)
        return query - self.k > before and (after is None or after - self.k > query)

    def _next_row(self, query: int) -> int | None:
        """The first bs-1 row above ``query``."""
        i = bisect_right(self.queries, query)
        return self.queries[i] if i < len(self.queries) else None

    def _c0(self, query: int) -> int:
        """The context a dummy of this query keeps when its bucket overflows max_model_len."""
        return dummy_context(self.mml, self.block, query, self.mml)

    def _first_at_or_above_c0(self, row: int) -> int | None:
        """The row's first ctx at or above C0: the one bucket above C0 its warmup compiles."""
        ctxs = self.row_ctx[row]
        i = bisect_left(ctxs, self._c0(row))
        return ctxs[i] if i < len(ctxs) else None
