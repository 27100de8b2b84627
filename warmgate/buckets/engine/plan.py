"""The bucket plan: vllm-gaudi's prompt, seed and spec decode lists plus pure runtime lookups."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

from warmgate.buckets.engine.bucket_file import format_bucket_file, parse_bucket_file
from warmgate.buckets.engine.config import EngineShapeConfig
from warmgate.buckets.engine.generate import (
    Bucket,
    generate_decode,
    generate_prompt,
    select_file_buckets,
)
from warmgate.buckets.engine.lazy import cached_property
from warmgate.buckets.engine.lookup import (
    FALLBACK_BLOCKS_BASE,
    FALLBACK_BS_BASE,
    FALLBACK_QUERY_BASE,
    BucketIndex,
    DecodeRows,
    Lookup,
    fallback_value,
)
from warmgate.buckets.engine.spec import expand_spec

__all__ = ["BucketPlan", "DecodeStep", "plan_buckets"]

_NO_CAP = 1 << 62  # larger than any block count


@dataclass(frozen=True, slots=True)
class DecodeStep:
    """How one decode step maps to shapes (reference doc section 3.6).

    ``shape`` is the bucket the forward runs, i.e. the engine's ``('decode', B*T, 1, C)``.
    ``batch`` is the padded-batch lookup (seed-first when T > 1), ``blocks`` the block lookup
    with the virtual batch B*T. ``shape_planned``: ``shape`` is a planned decode bucket (warmup
    graphs exactly those). ``warmed`` is stricter: planned and neither lookup fell back, since
    warmgate counts any fallback as unwarmed (config A, 65 sequences, 10 blocks: the batch
    lookup falls back to (64, 1, 96), the step then runs the planned (64, 1, 64)).
    """

    shape: Bucket
    padded_batch: int
    tokens_per_seq: int
    batch: Lookup
    blocks: Lookup
    shape_planned: bool
    warmed: bool

    @property
    def fallback(self) -> bool:
        """Whether either lookup produced a fallback bucket."""
        return self.batch.fallback or self.blocks.fallback


@dataclass(frozen=True, eq=False)
class BucketPlan:
    """The buckets vllm-gaudi generates for ``config``, and the shapes steps run with them.

    Lists are tuples internally; the public properties return fresh sorted lists. Lookups are
    pure: the engine appends each fallback bucket to its list (so later lookups may hit it),
    warmgate never mutates the plan and treats every fallback as an unwarmed shape.
    """

    config: EngineShapeConfig
    _prompt: tuple[Bucket, ...]
    _seeds: tuple[Bucket, ...]
    _decode: tuple[Bucket, ...]
    omitted_prompt: tuple[Bucket, ...] = ()
    omitted_decode: tuple[Bucket, ...] = ()
    skipped_file_lines: tuple[tuple[int, str, str], ...] = ()

    @property
    def prompt_buckets(self) -> list[Bucket]:
        """Sorted (bs, query, ctx_blocks) prompt buckets."""
        return list(self._prompt)

    @property
    def seed_decode_buckets(self) -> list[Bucket]:
        """Sorted (bs, 1, blocks) decode buckets before the spec expansion."""
        return list(self._seeds)

    @property
    def decode_buckets(self) -> list[Bucket]:
        """Sorted decode buckets after the spec expansion (== seeds when k == 0)."""
        return list(self._decode)

    @property
    def warmed_prompt_buckets(self) -> list[Bucket]:
        """The prompt buckets warmup runs a dummy for: it skips query > max_num_batched_tokens.

        Only merged-prefill bucket files can plan such buckets (no bs * query filter there),
        e.g. config A merged with a file line (1, 4096, 0): planned, never warmed. What the
        dummies compile is ``warmup_shapes.warmed_prompt_shapes``: not always the bucket.
        """
        mbt = self.config.max_num_batched_tokens
        return [b for b in self._prompt if b[1] <= mbt]

    @property
    def spec_added(self) -> int:
        """How many decode buckets the spec expansion added."""
        return len(self._decode) - len(self._seeds)

    @cached_property
    def fallback_max_ctx(self) -> int:
        """``_fallback_max_ctx``: largest decode blocks (spec rows included); lookups cap at it."""
        return max(c for _, _, c in self._decode)

    @cached_property
    def digest(self) -> str:
        """sha256 over the profile and the sorted lists: a stable cache key for the shape set."""
        payload = json.dumps(
            [self.config.profile, self._prompt, self._seeds, self._decode], separators=(",", ":")
        )
        return hashlib.sha256(payload.encode()).hexdigest()

    @cached_property
    def _prompt_index(self) -> BucketIndex:
        return BucketIndex(self._prompt)

    @cached_property
    def _seed_index(self) -> DecodeRows:
        return DecodeRows(self._seeds)

    @cached_property
    def _decode_index(self) -> DecodeRows:
        return DecodeRows(self._decode)

    @cached_property
    def _decode_set(self) -> frozenset[Bucket]:
        return frozenset(self._decode)

    @cached_property
    def _prompt_set(self) -> frozenset[Bucket]:
        return frozenset(self._prompt)

    # -- lookups -----------------------------------------------------------------------------

    def find_prompt_bucket(self, batch_size: int, query_len: int, ctx_blocks: int = 0) -> Lookup:
        """``find_prompt_bucket``: first fit over the prompt list, else the engine's fallback.

        e.g. config A (1, 300, 3) -> (1, 384, 4); a synthetic (2, 128, 0) with bs-1 buckets only
        falls back to (4, 192, 0). Pure: the fallback is not added to the plan.
        """
        hit = self._prompt_index.find(batch_size, query_len, ctx_blocks)
        if hit is not None:
            return Lookup(hit, fallback=False, planned=True)
        bucket = self._prompt_fallback(batch_size, query_len, ctx_blocks)
        return Lookup(bucket, fallback=True, planned=bucket in self._prompt_set)

    def find_decode_bucket(self, batch_size: int, num_blocks: int, seed: bool = False) -> Lookup:
        """``find_decode_bucket(bs, nblocks, seed_buckets)``: seed-first when asked, else fallback.

        ``num_blocks`` above ``fallback_max_ctx`` is capped first. e.g. config A, k=0:
        (12, 500) -> (22, 1, 640); (65, 10) -> fallback (64, 1, 96). Pure: the engine would append
        the fallback to its decode list; the plan stays unchanged.
        """
        return self._find_decode(batch_size, num_blocks, seed, None)

    def _find_decode(self, bs: int, nblocks: int, seed: bool, extra: Bucket | None) -> Lookup:
        """find_decode_bucket, optionally with one fallback appended earlier in the same step."""
        fmc = self.fallback_max_ctx
        if fmc > 0 and nblocks > fmc:
            nblocks = fmc
        if seed and self._seeds:
            hit = self._seed_index.find(bs, nblocks)
            if hit is not None:
                return Lookup(hit, fallback=False, planned=True)
        hit = self._decode_index.find(bs, nblocks)
        if (
            extra is not None
            and extra[0] >= bs
            and extra[2] >= nblocks
            and (hit is None or extra < hit)
        ):
            return Lookup(extra, fallback=True, planned=extra in self._decode_set)
        if hit is not None:
            return Lookup(hit, fallback=False, planned=True)
        bucket = self._decode_fallback(bs, nblocks)
        return Lookup(bucket, fallback=True, planned=bucket in self._decode_set)

    def _prompt_fallback(self, bs: int, query: int, ctx: int) -> Bucket:
        """generate_fallback_bucket for a prompt: ctx capped at ceil((mml - 1) / block).

        The engine rounds ctx only once it knows num_hpu_blocks, which initialize_kv_cache sets
        before warmup and serving (hpu_model_runner.py 6869 at v0.26.0, 6944 at main), so a
        runtime fallback always has it, pinned or not: (1, 8160, 1) -> (1, 8192, 1), never the
        planned (1, 8192, 0) that would hide it.
        """
        cfg = self.config
        cap = math.ceil((cfg.max_model_len - 1) / cfg.block_size)
        new_ctx = min(fallback_value(ctx, FALLBACK_BLOCKS_BASE), cap)
        return (self._fallback_bs(bs), self._fallback_query(query), new_ctx)

    def _decode_fallback(self, bs: int, nblocks: int) -> Bucket:
        """generate_fallback_bucket for decode: blocks capped at ``fallback_max_ctx``."""
        new_ctx = 0
        if self.config.num_gpu_blocks is not None:
            new_ctx = fallback_value(nblocks, FALLBACK_BLOCKS_BASE)
            if self.fallback_max_ctx > 0:
                new_ctx = min(new_ctx, self.fallback_max_ctx)
        return (self._fallback_bs(bs), self._fallback_query(1), new_ctx)

    def _fallback_bs(self, bs: int) -> int:
        """min(cf(bs, 2), max_num_seqs): may be *below* the request, e.g. 65 -> min(70, 64)."""
        return min(fallback_value(bs, FALLBACK_BS_BASE), self.config.max_num_seqs)

    def _fallback_query(self, query: int) -> int:
        """min(cf(query, 32), max_num_batched_tokens); decode (query 1) stays 1."""
        return min(fallback_value(query, FALLBACK_QUERY_BASE), self.config.max_num_batched_tokens)

    # -- step shapes -------------------------------------------------------------------------

    def decode_step(self, num_seqs: int, total_blocks: int, tokens_per_seq: int = 1) -> DecodeStep:
        """The lookups and shape of a decode step of ``num_seqs`` sequences.

        ``total_blocks`` is S = sum of ceil((computed + 1) / block) over the sequences; with
        contiguous PA it is the highest block id + 1 (used for both lookups, which is exact for
        generated plans because every contiguous-PA row has the same columns).
        ``tokens_per_seq`` is T: 1 without drafts, 1 + k with full drafts, between for partial.

        Config A, k=2, 8 sequences of 3000 tokens (S = 8 * 24 = 192), T = 3: seed lookup
        (8, 192) -> B = 8; block lookup (24, 576) -> (24, 1, 576), which is planned and warmed.
        """
        self._check_step(num_seqs, total_blocks, tokens_per_seq)
        t = tokens_per_seq
        batch = self._find_decode(num_seqs, total_blocks, t > 1, None)
        padded = batch.bucket[0]
        extra = batch.bucket if batch.fallback and not batch.planned else None
        if self.config.contiguous_pa:
            blocks = self._find_decode(padded * t, total_blocks, False, extra)
            ctx = min(max(blocks.bucket[2], total_blocks), self._cpa_cap)
        else:
            blocks = self._find_decode(padded * t, t * total_blocks, False, extra)
            ctx = blocks.bucket[2]
        shape = (padded * t, 1, ctx)
        planned = shape in self._decode_set
        warmed = planned and not (batch.fallback or blocks.fallback)
        return DecodeStep(shape, padded, t, batch, blocks, planned, warmed)

    def _check_step(self, num_seqs: int, total_blocks: int, tokens_per_seq: int) -> None:
        """Reject steps the engine cannot run with this configuration."""
        if num_seqs < 1:
            raise ValueError(f"num_seqs must be at least 1, got {num_seqs}")
        if total_blocks < 0:
            raise ValueError(f"total_blocks must not be negative, got {total_blocks}")
        if not 1 <= tokens_per_seq <= self.config.tokens_per_step:
            raise ValueError(
                f"tokens_per_seq must be in [1, 1 + k = {self.config.tokens_per_step}], "
                f"got {tokens_per_seq}"
            )

    def decode_shape(self, num_seqs: int, total_blocks: int, tokens_per_seq: int = 1) -> Bucket:
        """(B*T, 1, C): the decode bucket the step runs, i.e. ``('decode', B*T, 1, C)``.

        Config A, k=3, 8 x 3000 tokens with a partial T=3 -> (24, 1, 768), which is not warmed.
        Same answer as ``decode_step(...).shape``; the common case (no fallback) skips building
        the lookup records, for throughput.
        """
        t = tokens_per_seq
        if num_seqs < 1 or total_blocks < 0 or t < 1 or t > self._t:
            return self.decode_step(num_seqs, total_blocks, t).shape
        fmc = self.fallback_max_ctx
        hit = None
        if t > 1 and self._seeds:
            hit = self._seed_index.find(num_seqs, min(total_blocks, fmc))
        if hit is None:
            hit = self._decode_index.find(num_seqs, min(total_blocks, fmc))
        if hit is not None:
            contiguous = self.config.contiguous_pa
            wanted = total_blocks if contiguous else t * total_blocks
            blocks = self._decode_index.find(hit[0] * t, min(wanted, fmc))
            if blocks is not None:
                ctx = min(max(blocks[2], total_blocks), self._cpa_cap) if contiguous else blocks[2]
                return (hit[0] * t, 1, ctx)
        return self.decode_step(num_seqs, total_blocks, t).shape

    @cached_property
    def _cpa_cap(self) -> int:
        """The contiguous-PA block bucket's cap: the KV blocks + 1 on main, none on v0.26.0.

        get_habana_paged_attn_buffers caps it at _PAD_BLOCK_ID + 1 = num_blocks + 1 on main
        (hpu_model_runner.py 2455-2471 at 091bbadd); v0.26.0 has no cap (2426-2433 at b059f9c9).
        """
        nhb = self.config.num_gpu_blocks
        return nhb + 1 if nhb is not None and self.config.caps_contiguous_blocks else _NO_CAP

    @cached_property
    def _t(self) -> int:
        return self.config.tokens_per_step

    def prompt_shape(self, batch_size: int, query_len: int, ctx_blocks: int = 0) -> Bucket:
        """(bs', query', ctx'): the prompt bucket a prefill batch runs (fallback included)."""
        return self.find_prompt_bucket(batch_size, query_len, ctx_blocks).bucket

    # -- export ------------------------------------------------------------------------------

    def to_bucket_file(self) -> str:
        """Seed-only ``VLLM_BUCKETING_FROM_FILE`` text; re-planning with it reproduces the plan.

        Raises ValueError for plans with prompt buckets of query 1 (VLLM_PROMPT_QUERY_BUCKET_MIN=1):
        the engine reads every query-1 line as decode.
        """
        cfg = self.config
        header = (
            f"warmgate bucket plan {self.digest[:16]} (vllm-gaudi profile {cfg.profile})",
            f"max_num_seqs={cfg.max_num_seqs} max_model_len={cfg.max_model_len} "
            f"max_num_batched_tokens={cfg.max_num_batched_tokens} block_size={cfg.block_size}",
            f"seed decode buckets only: the engine expands them for k={cfg.num_speculative_tokens}",
        )
        return format_bucket_file(self._prompt, self._seeds, header)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary: config, lists, counts and digest."""
        return {
            "profile": self.config.profile,
            "digest": self.digest,
            "config": self.config.model_dump(mode="json"),
            "counts": {
                "prompt": len(self._prompt),
                "seed_decode": len(self._seeds),
                "decode": len(self._decode),
                "spec_added": self.spec_added,
            },
            "fallback_max_ctx": self.fallback_max_ctx,
            "prompt_buckets": [list(b) for b in self._prompt],
            "seed_decode_buckets": [list(b) for b in self._seeds],
            "decode_buckets": [list(b) for b in self._decode],
            "omitted_prompt": [list(b) for b in self.omitted_prompt],
            "omitted_decode": [list(b) for b in self.omitted_decode],
        }


def plan_buckets(config: EngineShapeConfig) -> BucketPlan:
    """Generate the engine's bucket lists for ``config`` (strategy, or bucket file when given).

    Raises ``BucketPlanError`` (a ValueError) where the engine refuses the configuration.
    """
    if config.bucket_file is not None:
        return _plan_from_file(config, config.bucket_file)
    seeds = generate_decode(config)
    return BucketPlan(
        config, tuple(generate_prompt(config)), tuple(seeds), tuple(expand_spec(config, seeds))
    )


def _plan_from_file(config: EngineShapeConfig, text: str) -> BucketPlan:
    """File buckets replace the strategy for both phases; spec expansion still applies."""
    parsed = parse_bucket_file(text)
    prompt, omitted_prompt = select_file_buckets(config, parsed.prompt, is_prompt=True)
    seeds, omitted_decode = select_file_buckets(config, parsed.decode, is_prompt=False)
    return BucketPlan(
        config,
        tuple(prompt),
        tuple(seeds),
        tuple(expand_spec(config, seeds)),
        tuple(omitted_prompt),
        tuple(omitted_decode),
        tuple(parsed.skipped),
    )
