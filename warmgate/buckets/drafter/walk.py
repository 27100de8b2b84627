"""The drafter's graph shapes over intervals of S: every call of every reachable step at once.

The engine's call sequence (docs/coverage.md, "Drafter graphs"; vllm-gaudi hpu_eagle.py and
hpu_model_runner.py at v0.26.0 b059f9c9 / main 091bbadd, which agree on it):

- decode call 1 reuses the target's attention metadata (``propose_eagle_decode``), so it runs the
  target step's own shape (B*T, 1, C); it only runs when some sequence carries drafts (T >= 2);
- decode calls j = 2..k run on the padded batch B (``prepare_attn_metadata``: batch_size is the
  number of last-token indices, one per padded row) with the block list of the n real sequences,
  each ceil((pos_i + 1) / block) blocks, pos_i = c_i + a_i + j - 1 (c_i computed tokens, a_i
  accepted drafts); its block bucket is ``find_decode_bucket(B, X)[2]``, X = that list's length
  (contiguous PA: highest block id + 1, then max(C, X) capped like the target);
- a prefill batch that completes one prompt of L tokens runs call 1 at the target's prompt shape,
  then calls j = 2..k at (1, 1, find_decode_bucket(1, ceil((L + j - 1) / block))[2]).

Per sequence the block count of call j exceeds the target's b_i = ceil((c_i + 1) / block) by
floor(m / block) or ceil(m / block), m = a_i + j - 1 in [1, T + k - 2]; so X runs over
[S, S + n * ceil((T + k - 2) / block)], except that no sequence holds more than
ceil(mml / block) blocks (more trips ``assert len(seq_block_table) == n`` in
``prepare_attn_metadata``: the step crashes, it compiles nothing) and, without shared blocks, X
stays within the KV blocks. Over a run of n sharing one padded batch B that union is one interval
of X, mapped to shapes with the same staircases as the target prover.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from warmgate.buckets.coverage.decode import DecodeProver
from warmgate.buckets.coverage.prompt import PromptProver
from warmgate.buckets.coverage.states import StateSpace
from warmgate.buckets.engine.plan import BucketPlan
from warmgate.buckets.engine.steps import INF, Bucket
from warmgate.buckets.engine.warmup_shapes import dummy_context

__all__ = ["DrafterWalk", "Found", "Key"]

Key = tuple[str, Bucket]  # (phase, (bs, query, blocks)): one drafter graph


@dataclass(slots=True)
class Found:
    """What the walk learnt about one drafter graph: the calls that run it and one witness."""

    calls: set[str] = field(default_factory=set)
    full_drafts: bool = False
    example: tuple[int, ...] = ()


class DrafterWalk:
    """Collects every drafter shape of every reachable step of ``space`` into ``found``."""

    def __init__(self, plan: BucketPlan, space: StateSpace) -> None:
        cfg = plan.config
        self.plan = plan
        self.space = space
        self.k = cfg.num_speculative_tokens
        self.block = cfg.block_size
        self.bps = space.blocks_per_seq
        self.contiguous = cfg.contiguous_pa
        self.decode = DecodeProver(plan, space)
        nhb = cfg.num_gpu_blocks
        if self.contiguous and nhb is not None:
            self.per_seq, self.cap = nhb, nhb
        else:
            private = not space.prefix_caching and nhb is not None
            self.per_seq, self.cap = self.bps, nhb if private and nhb is not None else INF
        self.found: dict[Key, Found] = {}

    def run(self) -> dict[Key, Found]:
        """Walk decode steps (T >= 2) and prompt steps; return the shapes found."""
        if self.k < 1:
            return self.found
        self._decode()
        self._prompt_first()
        self._prompt_next()
        return self.found

    def _add(self, key: Key, call: str, full: bool, example: tuple[int, ...]) -> None:
        entry = self.found.get(key)
        if entry is None:
            entry = self.found[key] = Found(example=example)
        entry.calls.add(call)
        entry.full_drafts = entry.full_drafts or full

    # -- decode steps ----------------------------------------------------------------------------

    def _decode(self) -> None:
        for t in self.space.tokens:
            if t < 2:
                continue  # no sequence carries drafts: propose_eagle_decode returns zeros
            for n1, n2 in self.decode.groups(t):
                for a, b, padded in self._batch_runs(n1, n2, t):
                    if self.k >= 2:  # k == 1 returns after call 1 (hpu_eagle.py:59)
                        self._next((n1, n2), t, padded, (a, b))

    def _batch_runs(self, n1: int, n2: int, t: int) -> Iterator[tuple[int, int, int]]:
        """Record call 1 of every piece; yield the runs of S sharing one padded batch B."""
        full = t == self.k + 1
        run: list[int] | None = None
        hi = self.space.total_blocks(n2)[1]
        for a, b, shape in self.decode.pieces(n1, t, n1, hi):
            valid = self.valid(a, b, n1, n2)
            if valid is None:
                continue  # unreachable pieces only trail (their S is past every n's reach)
            self._add(("decode", shape), "decode-first", full, (valid[0], max(a, valid[0]), t))
            padded = shape[0] // t
            if run is not None and run[2] == padded and run[1] + 1 == a:
                run[1] = b
                continue
            if run is not None:
                yield run[0], run[1], run[2]
            run = [a, b, padded]
        if run is not None:
            yield run[0], run[1], run[2]

    def valid(self, a: int, b: int, n1: int, n2: int) -> tuple[int, int] | None:
        """The n in [n1, n2] that reach some S in [a, b] (n <= S <= min(n * per_seq, cap))."""
        nv1 = max(n1, -(-a // self.per_seq))
        nv2 = min(n2, b, self.cap)
        return (nv1, nv2) if nv1 <= nv2 and a <= self.cap else None

    def extra(self, t: int) -> tuple[int, int]:
        """Per-sequence extra blocks of calls 2..k over the target's: (lowest, highest)."""
        return 1 // self.block, -(-(t + self.k - 2) // self.block)

    def s_top(self, n: int, b: int) -> int:
        """The largest S <= b that n sequences reach."""
        return min(b, n * self.per_seq, self.cap)

    def x_range(self, n: int, s: int, t: int) -> tuple[int, int]:
        """X of calls 2..k when n sequences hold S = s blocks at T = t (inclusive, maybe empty)."""
        lo, hi = self.extra(t)
        if self.contiguous:
            return s, (self.cap if hi >= 1 else s)
        return s + n * lo, min(s + n * hi, n * self.bps, self.cap)

    def _next(self, ns: tuple[int, int], t: int, padded: int, span: tuple[int, int]) -> None:
        """Calls 2..k for the run ``span`` = [a, b] of S with padded batch B, n in ``ns``."""
        a, b = span
        valid = self.valid(a, b, *ns)
        if valid is None:
            return
        for xa, xb in self._x_union(valid, a, b, t):
            for pa, _, ctx in self.decode.block_pieces(padded, 1, xa, xb):
                witness = self._witness(valid, a, b, t, pa)
                self._add(("decode", (padded, 1, ctx)), "decode-next", t == self.k + 1, witness)

    def _x_union(self, valid: tuple[int, int], a: int, b: int, t: int) -> list[tuple[int, int]]:
        """The union over n in ``valid`` and S in [max(a, n), s_top(n, b)] of ``x_range``.

        With blocks of 2 tokens or more the lowest extra is 0, each n's X range starts at most 1
        above the previous one, so the union is one interval; otherwise merge n by n.
        """
        nv1, nv2 = valid
        lo, _ = self.extra(t)
        if lo == 0 or self.contiguous:
            first = self.x_range(nv1, max(a, nv1), t)[0]
            return [(first, self.x_range(nv2, self.s_top(nv2, b), t)[1])]
        spans: list[tuple[int, int]] = []
        for n in range(nv1, nv2 + 1):
            xa = self.x_range(n, max(a, n), t)[0]
            xb = self.x_range(n, self.s_top(n, b), t)[1]
            if xa > xb:
                continue
            if spans and xa <= spans[-1][1] + 1:
                spans[-1] = (spans[-1][0], max(spans[-1][1], xb))
            else:
                spans.append((xa, xb))
        return spans

    def _witness(
        self, valid: tuple[int, int], a: int, b: int, t: int, x: int
    ) -> tuple[int, int, int, int]:
        """One (n, S, T, X) state whose calls 2..k reach X (the first n that can)."""
        hi = self.extra(t)[1]
        for n in range(valid[0], valid[1] + 1):
            s_lo, s_hi = max(a, n), self.s_top(n, b)
            s = max(s_lo, x - n * hi) if not self.contiguous else s_lo
            if s <= s_hi and self.x_range(n, s, t)[0] <= x <= self.x_range(n, s, t)[1]:
                return n, s, t, x
        return valid[0], max(a, valid[0]), t, x  # not reached: every X of the union has one

    # -- prompt steps ----------------------------------------------------------------------------

    def _prompt_first(self) -> None:
        """Call 1 of a completing prefill batch runs the target's prompt shape."""
        for bs, box, shape, _ in PromptProver(self.plan, self.space).reachable():
            self._add(("prompt", shape), "prompt-first", True, (bs, box[0], box[2]))

    def _prompt_next(self) -> None:
        """Calls 2..k after a prompt of L in [1, mml] tokens: X = ceil((L + j - 1) / block)."""
        if self.k < 2:
            return
        xa = -(-2 // self.block)
        xb = self.cap if self.contiguous else self.bps
        for pa, _, ctx in self.decode.block_pieces(1, 1, xa, xb):
            tokens = 1 if self.contiguous else max(1, (pa - 1) * self.block)
            self._add(("decode", (1, 1, ctx)), "prompt-next", True, (tokens, 2))

    # -- the engine's own warmup -----------------------------------------------------------------

    def warmup(self) -> set[Key]:
        """The drafter shapes ``warmup_graphs`` compiles: only its prompt buckets run the drafter.

        Per prompt bucket (1, q, ctx) the eagle dummy holds ctx blocks of context (fewer when
        q + ctx * block > mml) and q - k new tokens (``_prepare_dummy_scenario``); the drafter then
        runs that batch's prompt shape and calls 2..k at X = ceil((L + j - 1) / block),
        L = ctx * block + q - k (contiguous PA: every dummy block id is 0, so X = 1). Decode
        buckets never run it: their dummies carry no draft tokens.
        """
        out: set[Key] = set()
        if self.k < 1:
            return out
        cfg = self.plan.config
        for bs, query, bucket_ctx in dict.fromkeys(self.plan.warmed_prompt_buckets):
            if query <= self.k:
                continue  # the dummy would have no new token left; the engine's edge, not modelled
            ctx = dummy_context(cfg.max_model_len, self.block, query, bucket_ctx)
            out.add(("prompt", self.plan.prompt_shape(bs, query - self.k, ctx)))
            tokens = ctx * self.block + query - self.k
            for j in range(2, self.k + 1):
                x = 1 if self.contiguous else -(-(tokens + j - 1) // self.block)
                out.add(("decode", (bs, 1, self.next_ctx(bs, x))))
        return out

    def next_ctx(self, padded: int, x: int) -> int:
        """The block bucket of a follow-up call on batch ``padded`` over X blocks."""
        return next(iter(self.decode.block_pieces(padded, 1, x, x)))[2]
