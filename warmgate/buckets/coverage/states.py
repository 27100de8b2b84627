"""The reachable step space of a running engine: decode (n, S, T) and prompt (bs, query, ctx)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from warmgate.buckets.engine.config import EngineShapeConfig

__all__ = ["StateSpace"]


@dataclass(frozen=True, slots=True)
class StateSpace:
    """Bounds of every step the engine can run, as defined in docs/coverage.md.

    Decode: n in 1..max_num_seqs sequences, S total blocks, T tokens per sequence. Without
    contiguous PA, S = sum of per-sequence blocks b_i in 1..ceil(mml/bs), so n <= S <= n*ceil;
    when blocks cannot be shared (no prefix caching) also S <= num_gpu_blocks. With contiguous
    PA, S is the highest block id + 1 (doc section 3.6), which any allocation may push up to
    num_gpu_blocks, so n <= S <= num_gpu_blocks whatever the lengths (prefix caching is off: the
    platform forces it off with contiguous PA, doc section 2.2). T = 1 + k with full drafts, and
    every T in 1..1+k when partial drafts are in scope (doc section 5.3).

    Prompt: bs = 1 steps with query 1..min(mbt, mml) and ctx blocks 0..ceil((mml - 1 - q)/block);
    bs >= 2 batches only when the prompt batch limit allows them, always without context (a
    request with context starts its own batch, doc section 3.6), query <= mbt - (bs - 1).
    """

    max_num_seqs: int
    max_model_len: int
    max_num_batched_tokens: int
    block_size: int
    num_gpu_blocks: int | None
    k: int
    contiguous_pa: bool
    prefix_caching: bool
    partial_drafts: bool
    prompt_bs_max: int

    @classmethod
    def of(
        cls, cfg: EngineShapeConfig, *, partial_drafts: bool, prefix_caching: bool | None = None
    ) -> StateSpace:
        """The space of a config; prefix caching None = engine default (on unless contiguous)."""
        sharing = (not cfg.contiguous_pa) if prefix_caching is None else prefix_caching
        return cls(
            max_num_seqs=cfg.max_num_seqs,
            max_model_len=cfg.max_model_len,
            max_num_batched_tokens=cfg.max_num_batched_tokens,
            block_size=cfg.block_size,
            num_gpu_blocks=cfg.num_gpu_blocks,
            k=cfg.num_speculative_tokens,
            contiguous_pa=cfg.contiguous_pa,
            prefix_caching=sharing and not cfg.contiguous_pa,
            partial_drafts=partial_drafts,
            # Merged prefill packs prompts into one bs-1 bucket (doc section 3.6); modelled as bs 1.
            prompt_bs_max=1 if cfg.merged_prefill else cfg.max_num_prefill_seqs,
        )

    @property
    def blocks_per_seq(self) -> int:
        """ceil(max_model_len / block_size): the most blocks one sequence holds."""
        return -(-self.max_model_len // self.block_size)

    @property
    def tokens(self) -> tuple[int, ...]:
        """The T values in scope: 1 + k alone, or 1..1+k with partial drafts."""
        if self.partial_drafts:
            return tuple(range(1, self.k + 2))
        return (self.k + 1,)

    def total_blocks(self, n: int) -> tuple[int, int]:
        """Inclusive S bounds for n decode sequences; empty when lo > hi."""
        if self.contiguous_pa:
            hi = self.num_gpu_blocks if self.num_gpu_blocks is not None else n * self.blocks_per_seq
            return n, hi
        hi = n * self.blocks_per_seq
        if not self.prefix_caching and self.num_gpu_blocks is not None:
            hi = min(hi, self.num_gpu_blocks)
        return n, hi

    def decode_count(self) -> int:
        """How many decode states the space holds."""
        per_t = 0
        for n in range(1, self.max_num_seqs + 1):
            lo, hi = self.total_blocks(n)
            per_t += max(0, hi - lo + 1)
        return per_t * len(self.tokens)

    def decode_states(self) -> Iterator[tuple[int, int, int]]:
        """Every decode state (n, S, T) in (T, n, S) order: the brute-force reference."""
        for t in self.tokens:
            for n in range(1, self.max_num_seqs + 1):
                lo, hi = self.total_blocks(n)
                for s in range(lo, hi + 1):
                    yield n, s, t

    @property
    def max_query(self) -> int:
        """The longest prompt query a step can carry."""
        return min(self.max_num_batched_tokens, self.max_model_len)

    def ctx_max(self, bs: int, query: int) -> int:
        """The most context blocks a prompt chunk of this query can hold; batches have none.

        ctx = ceil(computed / block). vLLM's scheduler trims a running request's next chunk to
        mml - 1 - computed tokens, and those are the only chunks whose computed tokens end inside
        a block (prefix-cache hits are whole blocks and a prompt is at most mml tokens), so
        ctx <= ceil((mml - 1 - query) / block): mml 4096, q 100 -> 32 (3995 computed tokens span
        32 blocks), q 128 -> 31, q 1919 -> 17 (2176 tokens; 2177 would make 4096 > 4095).
        """
        if bs > 1:
            return 0
        return max(0, -(-(self.max_model_len - 1 - query) // self.block_size))

    def ctx_run_end(self, bs: int, query: int) -> int:
        """The largest query from ``query`` on with the same ``ctx_max`` (one block of tokens)."""
        cm = self.ctx_max(bs, query)
        if cm == 0:  # batches, and the longest queries: ctx_max never grows again
            return self.query_max(bs)
        return self.max_model_len - 2 - (cm - 1) * self.block_size

    def query_max(self, bs: int) -> int:
        """The longest query in a batch of bs prompts (the others take at least a token each)."""
        return self.max_query - (bs - 1) if bs > 1 else self.max_query

    def prompt_candidates(self) -> Iterator[tuple[int, int, int]]:
        """Every prompt (bs, query, ctx) before the runner's batch check, in tuple order."""
        for bs in range(1, self.prompt_bs_max + 1):
            for q in range(1, self.query_max(bs) + 1):
                for c in range(self.ctx_max(bs, q) + 1):
                    yield bs, q, c

    def batch_allowed(self, shape: tuple[int, int, int]) -> bool:
        """The runner's join test for a multi-prompt batch: its bucket fits the limits."""
        return shape[0] <= self.prompt_bs_max and shape[0] * shape[1] <= self.max_num_batched_tokens
