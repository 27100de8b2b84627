"""Test-side simulation of vllm-gaudi's warmup dummies, step by step as the engine's code runs.

Written from the engine (R = vllm_gaudi/v1/worker/hpu_model_runner.py at b059f9c9 / 091bbadd),
not from ``warmgate.buckets.engine.warmup_shapes``, so the two can be compared:

- ``warmup_graphs`` (R 5418-5456 / 5466-5504): buckets in reverse order, skip query > mbt;
- ``_prepare_dummy_scenario`` (R 5575-5640 / 5623-5698): the requests' token counts;
- ``_add_dummy_request`` (R 5459-5521 / 5507-5569): prompt ids = range(total), scheduled =
  prompt length - computed;
- ``execute_model`` returns before any forward when nothing is scheduled (R 4105 / 4160);
- ``_extract_prefill_batch_contents`` + ``_can_merge_prefill_contents`` (R 2548-2646 / 2586-2698);
- ``_form_prefill_batch`` -> ``_bucketize_2d_prompt`` (R 2672-2712, 2533-2540 / 2724-2764,
  2571-2578).

Decode: the dummy's block ids (R 5620-5639 / 5678-5697) and ``_generate_seq_lengths``.
"""

from __future__ import annotations

from warmgate.buckets import BucketPlan
from warmgate.buckets.engine.lookup import first_fit

Bucket = tuple[int, int, int]
Request = tuple[int, int]  # (computed tokens, scheduled tokens)


def shortenings_in_scope(plan: BucketPlan) -> tuple[int, ...]:
    """``use_eagle()`` for eagle, eagle3 and mtp; an unknown method may be either."""
    cfg = plan.config
    k = cfg.num_speculative_tokens
    method = cfg.speculative_method
    if k == 0 or method == "ngram":
        return (0,)
    return (k,) if method is not None else (0, k)


def simulated_prompt_warmup(plan: BucketPlan) -> set[Bucket]:
    """Prompt shapes the warmup compiles under every method in scope (the intersection)."""
    sets = [_Warmup(plan, eagle_k).prompt() for eagle_k in shortenings_in_scope(plan)]
    return set.intersection(*sets)


class _Warmup:
    def __init__(self, plan: BucketPlan, eagle_k: int) -> None:
        self.plan = plan
        self.cfg = plan.config
        self.eagle_k = eagle_k
        self.buckets = sorted(plan.prompt_buckets)  # the manager's list; fallbacks get appended

    def prompt(self) -> set[Bucket]:
        cfg = self.cfg
        if cfg.merged_prefill:  # not simulated: the merged dummy splits over max_num_seqs
            return {b for b in self.plan.prompt_buckets if b[1] <= cfg.max_num_batched_tokens}
        graphed: set[Bucket] = set()
        compiled: set[Bucket] = set()
        for bucket in reversed(list(self.buckets)):
            if bucket[1] > cfg.max_num_batched_tokens or bucket in graphed:
                continue
            graphed.add(bucket)
            requests = self._dummy(bucket)
            scheduled = [s for _, s in requests]
            if sum(scheduled) == 0 or min(scheduled) <= 0:
                continue  # no forward (or an invalid one): nothing compiled
            for batch in self._batches(requests):
                query = max(s for _, s in batch)
                blocks = max(-(-c // cfg.block_size) for c, _ in batch)
                compiled.add(self._find(len(batch), query, blocks))
        return compiled

    def _dummy(self, bucket: Bucket) -> list[Request]:
        cfg = self.cfg
        bs, query, num_blocks = bucket
        totals = [query + num_blocks * cfg.block_size]
        contexts = [num_blocks]
        if cfg.max_model_len < sum(totals):
            capped = max(0, (cfg.max_model_len - query) // cfg.block_size)
            contexts = [capped]
            totals = [capped * cfg.block_size + query]
        requests: list[Request] = []
        for _ in range(bs):
            for tokens, context in zip(totals, contexts, strict=True):
                total = tokens - self.eagle_k
                computed = context * cfg.block_size
                requests.append((computed, len(range(total)) - computed))
        return requests

    def _batches(self, requests: list[Request]) -> list[list[Request]]:
        batches: list[list[Request]] = [[]]
        for request in requests:
            if self._can_merge(batches[-1], request):
                batches[-1].append(request)
            else:
                batches.append([request])
        return [b for b in batches if b]

    def _can_merge(self, lhs: list[Request], rhs: Request) -> bool:
        if lhs and rhs[0] > 0:
            return False
        if any(c > 0 for c, _ in lhs):
            return False
        tokens = [s for _, s in lhs] + [rhs[1]]
        max_prefill = self.cfg.prompt_bs_max or 1
        if len(tokens) > max_prefill:
            return False  # BucketingFailedException
        b, q, _ = self._find(len(tokens), max(tokens), 0)
        return b <= max_prefill and b * q <= self.cfg.max_num_batched_tokens

    def _find(self, bs: int, query: int, ctx: int) -> Bucket:
        hit = first_fit(self.buckets, (bs, query, ctx))
        # find_prompt_bucket would append a fallback to the list warmup_graphs is iterating;
        # the bucket being warmed dominates every lookup its dummy makes, so it never happens.
        assert hit is not None, f"a dummy lookup {(bs, query, ctx)} missed every bucket"
        return hit


def simulated_decode_warmup(plan: BucketPlan) -> set[Bucket]:
    """Decode shapes the warmup compiles under every method in scope: each bucket's dummy step.

    Dummies carry no drafts (T = 1). Contiguous PA: block id min(blocks, num_blocks) - 1, so the
    highest block id + 1 is min(blocks, num_blocks). Otherwise ``_generate_seq_lengths`` spreads
    the blocks over bs sequences of min(b * block - L, mml - L) computed tokens, L = 1 + k for
    eagle-type methods, and each holds ceil((computed + 1) / block) blocks at its position.
    """
    sets = [_decode(plan, eagle_k) for eagle_k in shortenings_in_scope(plan)]
    return set.intersection(*sets)


def _decode(plan: BucketPlan, eagle_k: int) -> set[Bucket]:
    cfg = plan.config
    out: set[Bucket] = set()
    for bs, _, num_blocks in plan.decode_buckets:
        if cfg.contiguous_pa:
            assert cfg.num_gpu_blocks is not None
            total = min(num_blocks, cfg.num_gpu_blocks)
        else:
            lookahead = 1 + eagle_k
            per_seq = [num_blocks // bs] * bs
            for i in range(num_blocks - sum(per_seq)):
                per_seq[i] += 1
            lengths = [
                min(b * cfg.block_size - lookahead, cfg.max_model_len - lookahead) for b in per_seq
            ]
            if min(lengths) < 0:
                continue  # a negative context: no valid dummy
            total = sum(-(-(length + 1) // cfg.block_size) for length in lengths)
        out.add(plan.decode_step(bs, total, 1).shape)
    return out
