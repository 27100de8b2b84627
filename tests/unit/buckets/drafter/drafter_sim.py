"""Test-side simulator of vllm-gaudi's drafter calls, written from the engine's call sequence.

It shares nothing with ``warmgate.buckets.drafter``: it takes per-request token counts, computes
the block lists the engine builds (hpu_model_runner.py ``_create_decode_input_data``,
hpu_eagle.py ``propose`` / ``prepare_attn_metadata``, ``_prepare_dummy_scenario``; lines in
docs/coverage.md) and asks the plan's ported engine lookups (``find_decode_bucket``,
``find_prompt_bucket``, ``decode_step``) for the buckets. Non-contiguous PA only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from warmgate.buckets import BucketPlan
from warmgate.buckets.coverage.states import StateSpace

Key = tuple[str, tuple[int, int, int]]
Seq = tuple[int, int, int]  # (computed tokens c, drafts scheduled d, drafts accepted a)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class EngineCalls:
    """The drafter's forward shapes for one engine step, as the engine computes them."""

    def __init__(self, plan: BucketPlan) -> None:
        cfg = plan.config
        assert not cfg.contiguous_pa, "the simulator models non-contiguous PA only"
        self.plan = plan
        self.k = cfg.num_speculative_tokens
        self.block = cfg.block_size
        self.mml = cfg.max_model_len
        self.width = cdiv(cfg.max_model_len, cfg.block_size)  # the block table's columns

    def decode(self, seqs: Sequence[Seq]) -> list[tuple[str, Key]]:
        """(call kind, graph) of every drafter forward of a decode step of ``seqs``."""
        t = 1 + max(d for _, d, _ in seqs)
        s = sum(cdiv(c + 1, self.block) for c, _, _ in seqs)
        per_call = []
        for j in range(2, self.k + 1):
            blocks = [cdiv(c + a + j, self.block) for c, _, a in seqs]
            if max(blocks) > self.width:
                per_call.append(None)  # assert len(seq_block_table) == n fails: calls stop
                break
            per_call.append(sum(blocks))
        return self.decode_from_sums(len(seqs), s, t, per_call)

    def decode_from_sums(
        self, n: int, s: int, t: int, xs: Iterable[int | None]
    ) -> list[tuple[str, Key]]:
        """Same, from n, S, T and each follow-up call's block-list length (None: crashed)."""
        if t == 1:
            return []  # spec_decode_metadata is None: propose_eagle_decode returns zeros
        step = self.plan.decode_step(n, s, t)  # call 1 reuses the target's attention metadata
        out = [("decode-first", ("decode", step.shape))]
        if self.k == 1:
            return out
        padded = step.padded_batch
        for x in xs:
            if x is None:
                break
            ctx = self.plan.find_decode_bucket(padded, x).bucket[2]
            out.append(("decode-next", ("decode", (padded, 1, ctx))))
        return out

    def prefill(self, tokens_after: int, query: int, ctx_blocks: int) -> list[tuple[str, Key]]:
        """A bs-1 prefill batch that completes a prompt of ``tokens_after`` tokens."""
        out = [("prompt-first", ("prompt", self.plan.prompt_shape(1, query, ctx_blocks)))]
        for j in range(2, self.k + 1):
            x = cdiv(tokens_after + j - 1, self.block)
            if x > self.width:
                break
            ctx = self.plan.find_decode_bucket(1, x).bucket[2]
            out.append(("prompt-next", ("decode", (1, 1, ctx))))
        return out

    def warmup(self) -> set[Key]:
        """``warmup_graphs(prompt_buckets)`` with eagle dummies (``_prepare_dummy_scenario``)."""
        out: set[Key] = set()
        mml, block, k = self.mml, self.block, self.k
        for bs, query, bucket_ctx in self.plan.warmed_prompt_buckets:
            assert bs == 1
            ctx, total = bucket_ctx, query + bucket_ctx * block
            if total > mml:  # chunked-prefill cap of the dummy's context
                ctx = max(0, (mml - query) // block)
                total = ctx * block + query
            tokens, scheduled = total - k, query - k  # eagle: leave room for k drafts
            if scheduled < 1:
                continue
            out.update(key for _, key in self.prefill(tokens, scheduled, ctx))
        return out


def brute_force_drafter(plan: BucketPlan, space: StateSpace) -> dict[Key, tuple[set[str], bool]]:
    """Every drafter graph of every realisation of every reachable state, by enumeration.

    A decode state (n, S, T) is realised by per-sequence (c, d, a): b = ceil((c + 1) / block) in
    1..ceil(mml / block), any offset in the block, d <= T - 1 drafts (one sequence at T - 1),
    a <= d accepted. Sums over sequences are enumerated exactly (sets of sums, sequence by
    sequence). Without shared blocks S stays within the KV blocks (as in ``prove_coverage``) and
    a follow-up call that would attend more blocks than the cache holds does not happen. Returns
    graph -> (call kinds, reached with full drafts).
    """
    calls = EngineCalls(plan)
    cfg = plan.config
    out: dict[Key, tuple[set[str], bool]] = {}

    def add(found: list[tuple[str, Key]], full: bool) -> None:
        for kind, key in found:
            kinds, was_full = out.get(key, (set(), False))
            out[key] = (kinds | {kind}, was_full or full)

    cap = None if space.prefix_caching else cfg.num_gpu_blocks
    for t in space.tokens:
        if t < 2:
            continue
        for n, sums in _sums_by_n(calls, space.max_num_seqs, t):
            lo, hi = space.total_blocks(n)
            for s, raw, top_d in sums:
                if top_d != t - 1 or not lo <= s <= hi:
                    continue
                xs = raw  # a call cannot attend more blocks than the cache holds
                if cap is not None:
                    xs = tuple(None if x is None or x > cap else x for x in raw)
                add(calls.decode_from_sums(n, s, t, xs), t == cfg.num_speculative_tokens + 1)
    for _, query, ctx in space.prompt_candidates():
        add(calls.prefill(ctx * cfg.block_size, query, ctx)[:1], True)
    for tokens in range(1, cfg.max_model_len + 1):
        add(calls.prefill(tokens, 1, 0)[1:], True)
    return out


Agg = tuple[int, tuple[int | None, ...], int]  # (S, follow-up X per call or None, largest d)


def _sums_by_n(calls: EngineCalls, max_n: int, t: int) -> Iterable[tuple[int, set[Agg]]]:
    """For n = 1..max_n the set of (S, X_2..X_k, max d) over all n-sequence realisations."""
    options = _one_sequence(calls, t)
    sums: set[Agg] = {(0, tuple(0 for _ in range(2, calls.k + 1)), 0)}
    for n in range(1, max_n + 1):
        sums = {
            (s + b, _add_calls(xs, ys), max(top, d)) for s, xs, top in sums for b, ys, d in options
        }
        yield n, sums


def _one_sequence(calls: EngineCalls, t: int) -> set[Agg]:
    """(b, blocks of calls 2..k or None once past the table, d) over one sequence's choices."""
    block, width = calls.block, calls.width
    found: set[Agg] = set()
    for b in range(1, width + 1):
        for offset in range(1, block + 1):
            c = (b - 1) * block + offset - 1  # computed tokens: c + 1 fills `offset` of block b
            for d in range(t):
                for a in range(d + 1):
                    xs = tuple(cdiv(c + a + j, block) for j in range(2, calls.k + 1))
                    found.add((b, tuple(x if x <= width else None for x in xs), d))
    return found


def _add_calls(xs: tuple[int | None, ...], ys: tuple[int | None, ...]) -> tuple[int | None, ...]:
    """Add per-call block counts; a call past the table stops that call and every later one."""
    out: list[int | None] = []
    for x, y in zip(xs, ys, strict=True):
        if x is None or y is None or (out and out[-1] is None):
            out.append(None)
        else:
            out.append(x + y)
    return tuple(out)
