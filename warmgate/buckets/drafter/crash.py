"""Reachable states in which vllm-gaudi's drafter crashes the engine: the block table is too short.

The request block table has ``ceil(max_model_len / block)`` columns (``hpu_input_batch.py`` 122
at both pinned commits), and ``HpuEagleProposer.prepare_attn_metadata`` asserts that each
sequence's slice has ``ceil((position + 1) / block)`` blocks (``hpu_eagle.py`` 190-196). Call
j = 2..k of ``propose`` looks j - 1 positions past the last accepted token, so:

- a decode step of a sequence with c computed tokens, d drafts (vLLM's scheduler keeps
  c + d <= max_model_len - 2) and a accepted ones needs ceil((c + a + k) / block) columns, also
  with d = 0 when another sequence of the step drafts (every decode sequence is in the table);
- a prefill that ends at L tokens (a completing prompt, or with structured output any chunk)
  needs ceil((L + k - 1) / block) columns.

With W = ceil(max_model_len / block) * block tokens of table, the decode assert fails when
c + a >= W - k + 1 and the prefill's when L >= W - k + 2. Both are ordinary traffic (a long
prompt; full acceptance near the end of a long generation), and neither compiles anything: the
engine process dies. ``prove_drafter`` leaves these states out; ``drafter_crash`` names them and
what avoids them (docs/coverage.md, "Drafter graphs", fact 16).

e.g. max_model_len 4096, block 128, k = 3: W = 4096; decode when c + a = 4094 (a sequence at
4091-4093 that accepts every draft, or one at 4094, the last step of a length-capped request,
next to one that drafts: 4 (c, d, a) cases) and prompts of 4095 tokens. max_model_len 4094
(k - 1 below the block boundary) or k = 2 avoids both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from warmgate.buckets.engine.config import DRAFT_MODEL_METHODS, EngineShapeConfig

__all__ = ["DrafterCrash", "drafter_crash"]


@dataclass(frozen=True, slots=True)
class DrafterCrash:
    """The crashing states of one configuration and the changes that avoid them.

    ``positions`` is the inclusive range of c + a (the last accepted token's position, 0-based)
    in which a decode step crashes, ``decode_cases`` the (c, d, a) triples of one sequence that
    reach it; ``prompts`` the inclusive range of prefill lengths that crash (prompts vLLM admits,
    up to max_model_len - 1); ``at_max_len``: a prompt of exactly max_model_len tokens crashes
    too, on vLLM versions that admit one.
    """

    k: int
    block_size: int
    max_model_len: int
    positions: tuple[int, int] | None
    decode_cases: int
    prompts: tuple[int, int] | None
    at_max_len: bool

    @property
    def table_tokens(self) -> int:
        """Tokens the block table holds: ceil(max_model_len / block) * block."""
        return -(-self.max_model_len // self.block_size) * self.block_size

    @property
    def safe_max_model_len(self) -> int | None:
        """The largest max_model_len at or below this one with no crashing state: k - 1 tokens
        below the block boundary. None when k - 1 >= the block: no length leaves that room."""
        if self.k - 1 >= self.block_size:
            return None
        return min(self.max_model_len, self.table_tokens - (self.k - 1))

    @property
    def safe_k(self) -> int:
        """The largest k with no crashing state at this max_model_len (0: none)."""
        slack = self.table_tokens - self.max_model_len
        return max(0, min(2 + slack, self.k - 1))

    def describe(self) -> str:
        """The states, the crash and the changes that avoid it, in one paragraph."""
        parts = []
        if self.positions is not None:
            lo, hi = self.positions
            span = f"{lo}" if lo == hi else f"{lo}-{hi}"
            parts.append(
                f"a decode step in which a sequence's last accepted token is at position {span} "
                "(full acceptance near the end, or the last step of a length-capped request "
                f"next to one that drafts: {self.decode_cases} (computed, drafts, accepted) "
                "cases)"
            )
        if self.prompts is not None:
            lo, hi = self.prompts
            parts.append(f"a prefill ending at {lo} tokens" if lo == hi else
                         f"a prefill ending at {lo}-{hi} tokens")  # fmt: skip
        if self.at_max_len:
            parts.append(f"a prompt of exactly {self.max_model_len} tokens on vLLM versions that "
                         "admit one")  # fmt: skip
        return (
            f"with maxModelLen {self.max_model_len} and block {self.block_size} the block table "
            f"holds {self.table_tokens} tokens, and the drafter's calls 2..{self.k} look up to "
            f"{self.k - 1} positions past the last accepted token: {'; '.join(parts)} fails "
            "vllm-gaudi's assert len(seq_block_table) == n (hpu_eagle.py prepare_attn_metadata) "
            f"and the engine process crashes; warmgate's proof leaves these states out. Avoid "
            f"them with {self._remedy()}"
        )

    def _remedy(self) -> str:
        fewer = f"numSpeculativeTokens {self.safe_k} or less"
        if self.safe_max_model_len is None:
            return fewer
        return (
            f"maxModelLen {self.safe_max_model_len} or less (k - 1 tokens below a block "
            f"boundary) or {fewer}"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "k": self.k,
            "block_size": self.block_size,
            "max_model_len": self.max_model_len,
            "table_tokens": self.table_tokens,
            "decode_positions": list(self.positions) if self.positions else None,
            "decode_cases": self.decode_cases,
            "prompt_lengths": list(self.prompts) if self.prompts else None,
            "prompt_at_max_model_len": self.at_max_len,
            "safe_max_model_len": self.safe_max_model_len,
            "safe_k": self.safe_k,
            "message": self.describe(),
        }


def drafter_crash(cfg: EngineShapeConfig, method: str | None) -> DrafterCrash | None:
    """The crashing states of ``cfg`` with a draft-model ``method``, or None when there are none
    (ngram, k < 2, or enough room at the end of the block table)."""
    k = cfg.num_speculative_tokens
    if method not in DRAFT_MODEL_METHODS or k < 2:
        return None
    mml, block = cfg.max_model_len, cfg.block_size
    table = -(-mml // block) * block
    lo = table - k + 1  # the first c + a whose call k runs past the table
    hi = mml - 2  # the scheduler keeps every scheduled position below max_model_len - 1
    positions = (lo, hi) if lo <= hi else None
    cases = sum(_cases(p, k, mml) for p in range(lo, hi + 1)) if positions else 0
    first = table - k + 2  # the first prefill length whose call k runs past the table
    prompts = (first, mml - 1) if first <= mml - 1 else None
    at_max = first <= mml
    if positions is None and prompts is None:
        return None
    return DrafterCrash(k, block, mml, positions, cases, prompts, at_max)


def _cases(position: int, k: int, mml: int) -> int:
    """(c, d, a) with c + a = position, 0 <= d <= k, a <= d and c + d <= mml - 2."""
    return sum(1 for d in range(k + 1) for a in range(d + 1)
               if position >= a and position - a + d <= mml - 2)  # fmt: skip
