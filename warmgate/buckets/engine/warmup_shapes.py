"""What vllm-gaudi's warmup compiles: the shapes its dummy requests actually run, per bucket.

``warmup_graphs`` runs one dummy scenario per bucket, and the runner buckets the dummy like any
step, so the graph it compiles is the first fit of the dummy, not always the bucket itself.
Prompt facts (R = vllm_gaudi/v1/worker/hpu_model_runner.py, lines at v0.26.0 b059f9c9 / main
091bbadd; the code is the same at both):

- buckets with query > max_num_batched_tokens are skipped (R 5428 / 5476);
- the dummy of (bs, q, ctx) holds bs requests of ctx blocks of computed tokens and q new ones, but
  when q + ctx * block > max_model_len its context is cut to (mml - q) // block blocks (R 5589-5603
  / 5637-5651; merged prefill splits the request instead, not modelled here);
- with a draft model (eagle, eagle3, mtp) every request is k tokens shorter, so its query is q - k
  (R 5606-5611 / 5654-5659, scheduled = prompt length - computed at R 5520 / 5568); no new token
  left means no forward (R 4105 / 4160) or an invalid one: nothing is counted as compiled;
- the runner batches them like real prefills: a request with context starts its own batch, others
  join while the joined batch's bucket passes bs <= VLLM_PROMPT_BS_BUCKET_MAX and bs * q <= mbt
  (R 2548-2580 / 2586-2632, applied at R 2641 / 2693); each batch runs find_prompt_bucket(batch
  size, longest query, most context blocks) (R 2711-2712, 2533-2540 / 2763-2764, 2571-2578).

Config A (mml 4096, mbt 2048, block 128): the dummy of (1, 2048, 31) runs (1, 2048, 16), which is
planned, so ('prompt', 1, 2048, 31) is never compiled although a 1921-token chunk after 2049
computed tokens (17 blocks) pads to it.

Decode dummies carry no drafts (T = 1) and mostly rebuild their own bucket: not when a sequence
is cut at max_model_len a block short, and not with contiguous PA above the KV blocks, where
every dummy block id is min(blocks, num_blocks) - 1 (R 5630 / 5688): see
``warmed_decode_shapes``.
"""

from __future__ import annotations

from collections.abc import Iterable

from warmgate.buckets.engine.lookup import BucketIndex
from warmgate.buckets.engine.plan import BucketPlan
from warmgate.buckets.engine.steps import Bucket, rows_of

__all__ = ["dummy_context", "dummy_shapes", "warmed_decode_shapes", "warmed_prompt_shapes"]


def dummy_context(max_model_len: int, block_size: int, query: int, ctx: int) -> int:
    """A prompt bucket dummy's context blocks: ctx, or (mml - q) // block when it overflows."""
    if query + ctx * block_size > max_model_len:
        return max(0, (max_model_len - query) // block_size)
    return ctx


def dummy_shapes(plan: BucketPlan, bucket: Bucket, shortening: int) -> tuple[Bucket, ...]:
    """The prompt shapes the warmup of ``bucket`` compiles when dummies are ``shortening`` shorter.

    Non-merged prefill only (see the module docstring). e.g. config A: (1, 2048, 31) -> (1, 2048,
    16); (1, 2048, 16) -> itself; with eagle k = 2, (1, 2048, 16) runs (1, 2046, 16) -> itself.
    """
    return _Dummies(plan, BucketIndex(plan.prompt_buckets)).shapes(bucket, shortening)


def warmed_prompt_shapes(
    plan: BucketPlan, shortenings: Iterable[int] | None = None
) -> frozenset[Bucket]:
    """The prompt shapes the engine's warmup compiles, under every dummy shortening in scope.

    ``shortenings`` defaults to ``plan.config.prompt_dummy_shortenings()`` (k for a draft model, 0
    for ngram or k = 0, both when the method is unknown). With merged prefill the dummy is split
    over max_num_seqs requests, which warmgate does not model (as it does not model the merged
    runtime lookup): every planned bucket warmup runs counts as compiled there.
    """
    cfg = plan.config
    scope = tuple(shortenings if shortenings is not None else cfg.prompt_dummy_shortenings())
    run = plan.warmed_prompt_buckets
    if cfg.merged_prefill:
        return frozenset(run)
    dummies = _Dummies(plan, BucketIndex(plan.prompt_buckets))
    sets = [{s for b in run for s in dummies.shapes(b, e)} for e in scope]
    return frozenset(set.intersection(*sets))


def warmed_decode_shapes(
    plan: BucketPlan, shortenings: Iterable[int] | None = None
) -> frozenset[Bucket]:
    """The decode shapes the engine's warmup compiles, under every dummy shortening in scope.

    A dummy (b, 1, c) spreads c blocks over b sequences of min(blocks * block - L, mml - L)
    computed tokens, L = 1 + k with a draft model (else 1), and each holds ceil((computed + 1) /
    block) blocks (R 5524-5547 / 5572-5595). That rebuilds c unless a sequence is cut at
    max_model_len and mml - L + 1 ends a block early: eagle k = 2, mml 4097, block 128 -> a
    33-block sequence computes 4094 tokens, 32 blocks. Contiguous PA: every block id is
    min(c, num_gpu_blocks) - 1, so a bucket above num_gpu_blocks runs row b's first bucket at or
    above num_gpu_blocks, capped at num_gpu_blocks + 1 on main: main, 2000 KV blocks, row 9 =
    {1000, 3000} -> (9, 1, 3000) compiles (9, 1, 2001); on v0.26.0 itself.
    """
    cfg = plan.config
    if cfg.contiguous_pa and cfg.num_gpu_blocks is not None:
        return _contiguous_decode(plan, cfg.num_gpu_blocks)
    scope = tuple(shortenings if shortenings is not None else cfg.prompt_dummy_shortenings())
    sets = [{s for b in plan.decode_buckets for s in _decode_dummy(plan, b, 1 + e)} for e in scope]
    return frozenset(set.intersection(*sets))


def _decode_dummy(plan: BucketPlan, bucket: Bucket, lookahead: int) -> tuple[Bucket, ...]:
    """The shape the non-contiguous dummy of ``bucket`` runs (nothing if it cannot be built)."""
    cfg = plan.config
    bs, _, blocks = bucket
    block, mml = cfg.block_size, cfg.max_model_len
    if -(-blocks // bs) * block <= mml and lookahead <= block:
        return (bucket,)  # no sequence reaches max_model_len: the dummy rebuilds the bucket
    per_seq = [blocks // bs + (1 if i < blocks % bs else 0) for i in range(bs)]
    computed = [min(b * block - lookahead, mml - lookahead) for b in per_seq]
    if min(computed) < 0:
        return ()  # a negative context: the engine's dummy is invalid
    total = sum(-(-(c + 1) // block) for c in computed)
    return (plan.decode_step(bs, total, 1).shape,)


def _contiguous_decode(plan: BucketPlan, nhb: int) -> frozenset[Bucket]:
    """Contiguous PA: up to nhb a bucket compiles itself; above, its row's first at nhb or more."""
    caps = plan.config.caps_contiguous_blocks
    out: set[Bucket] = set()
    for (b, q), ctxs in rows_of(plan.decode_buckets):
        out.update((b, q, c) for c in ctxs if c <= nhb)
        above = [c for c in ctxs if c >= nhb]
        if above:
            out.add((b, q, min(above[0], nhb + 1) if caps else above[0]))
    return frozenset(out)


class _Dummies:
    """The engine's dummy requests for a prompt bucket, batched and looked up like the runner."""

    def __init__(self, plan: BucketPlan, index: BucketIndex) -> None:
        cfg = plan.config
        self.plan = plan
        self.index = index
        self.mml = cfg.max_model_len
        self.block = cfg.block_size
        self.mbt = cfg.max_num_batched_tokens
        self.batch_max = cfg.max_num_prefill_seqs

    def shapes(self, bucket: Bucket, shortening: int) -> tuple[Bucket, ...]:
        bs, query, ctx = bucket
        if query > self.mbt:
            return ()  # warmup_graphs skips it
        cut = dummy_context(self.mml, self.block, query, ctx)
        if bs == 1 and shortening == 0 and cut == ctx:
            return (bucket,)  # the dummy is the bucket itself, its own first fit
        ctx, query = cut, query - shortening
        if query < 1:
            return ()  # no new token: no forward (or an invalid one)
        if ctx > 0:
            # Every request has context, so each runs alone.
            return (self._find(1, query, ctx),) * bs
        return tuple(self._find(m, query, 0) for m in self._batch_sizes(bs, query))

    def _batch_sizes(self, count: int, query: int) -> list[int]:
        """Greedy joins of ``count`` context-free requests, as _can_merge_prefill_contents."""
        sizes = [1]
        for _ in range(count - 1):
            size = sizes[-1] + 1
            if size <= self.batch_max:
                b, q, _ = self._find(size, query, 0)
                if b <= self.batch_max and b * q <= self.mbt:
                    sizes[-1] = size
                    continue
            sizes.append(1)
        return sizes

    def _find(self, bs: int, query: int, ctx: int) -> Bucket:
        hit = self.index.find(bs, query, ctx)
        # A planned bucket dominates every dummy lookup (bs, query and ctx only shrink), so the
        # engine never builds a fallback here; keep the planner's answer should that change.
        return hit if hit is not None else self.plan.prompt_shape(bs, query, ctx)
