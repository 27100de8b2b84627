"""The buckets section: vllm-gaudi bucketing knobs, explicit seeds and the coverage policy."""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import Field

from warmgate.api.base import ApiModel, Rule
from warmgate.buckets.engine.config import Strategy

BIG: Final = 1 << 27  # generous cap so CEL cost estimates stay finite; far above any real bucket
Dim = tuple[str, str]
DIMENSIONS: Final[tuple[Dim, ...]] = (
    ("prompt", "bs"),
    ("prompt", "query"),
    ("prompt", "ctx"),
    ("decode", "bs"),
    ("decode", "block"),
)
RANGE_FIELDS: Final = ("min", "step", "max")
PAD_FIELDS: Final = ("padMax", "padPercent")
# What the exp strategy still reads (vllm-gaudi exponential.py; bucketing reference §2.2):
# VLLM_PROMPT_BS_BUCKET_MAX, VLLM_PROMPT_QUERY_BUCKET_MIN (only the value 1) and
# VLLM_PROMPT_CTX_BUCKET_MAX. It logs "will be overwritten" for every other range variable.
EXP_HONOURED: Final = {
    ("prompt", "bs", "max"),
    ("prompt", "query", "min"),
    ("prompt", "ctx", "max"),
}


class BucketRange(ApiModel):
    """One bucket dimension: VLLM_{PHASE}_{DIM}_BUCKET_{MIN,STEP,MAX,PAD_MAX,PAD_PERCENT}."""

    min: int | None = Field(default=None, ge=0, le=BIG, description="Smallest value (_MIN).")
    step: int | None = Field(default=None, ge=1, le=BIG, description="Linear step (_STEP).")
    max: int | None = Field(default=None, ge=1, le=BIG, description="Largest value (_MAX).")
    pad_max: int | None = Field(
        default=None, ge=1, le=BIG, description="pad strategy only: largest padding (_PAD_MAX)."
    )
    pad_percent: int | None = Field(
        default=None, ge=0, le=50, description="pad strategy only: padding percent (_PAD_PERCENT)."
    )

    cel_rules = (
        Rule(
            cel="!has(self.min) || !has(self.max) || self.min <= self.max",
            message="min must be less than or equal to max",
            check=lambda s: s.min is None or s.max is None or s.min <= s.max,
            field_path=".min",
        ),
    )


class PromptRanges(ApiModel):
    """Prompt (prefill) bucket dimensions; unset fields keep the strategy's defaults."""

    bs: BucketRange | None = Field(default=None, description="Prompt batch size.")
    query: BucketRange | None = Field(default=None, description="Prompt query length in tokens.")
    ctx: BucketRange | None = Field(default=None, description="Prompt context in KV blocks.")


class DecodeRanges(ApiModel):
    """Decode bucket dimensions (seed buckets, before the 1+k spec-decode expansion)."""

    bs: BucketRange | None = Field(default=None, description="Decode batch size.")
    block: BucketRange | None = Field(default=None, description="Decode KV blocks in the batch.")


BucketValue = Annotated[int, Field(ge=0, le=BIG)]
SeedTuple = Annotated[list[BucketValue], Field(min_length=3, max_length=3)]


class BucketSeeds(ApiModel):
    """Explicit seed buckets, written to VLLM_BUCKETING_FROM_FILE (replaces the strategy).

    Write seeds, not expanded buckets: the engine still expands decode seeds by 1+k.
    """

    prompt: list[SeedTuple] = Field(
        min_length=1,
        max_length=1024,
        description="Prompt buckets [bs, queryLen, ctxBlocks].",
    )
    decode: list[SeedTuple] = Field(
        min_length=1, max_length=1024, description="Decode seed buckets [batchSize, 1, numBlocks]."
    )

    cel_rules = (
        Rule(
            cel="self.prompt.all(t, size(t) != 3 || (t[0] >= 1 && t[1] >= 2))",
            message=(
                "each prompt seed must be [batchSize >= 1, queryLen >= 2, ctxBlocks] "
                "(a query of 1 marks a decode bucket in the engine's file format)"
            ),
            check=lambda s: all(t[0] >= 1 and t[1] >= 2 for t in s.prompt),
            field_path=".prompt",
        ),
        Rule(
            cel="self.decode.all(t, size(t) != 3 || (t[0] >= 1 && t[1] == 1 && t[2] >= 1))",
            message="each decode seed must be [batchSize >= 1, 1, numBlocks >= 1]",
            check=lambda s: all(t[0] >= 1 and t[1] == 1 and t[2] >= 1 for t in s.decode),
            field_path=".decode",
        ),
    )


class CoveragePolicy(ApiModel):
    """What the coverage proof must show before any Gaudi time is spent."""

    partial_drafts: bool = Field(
        default=True,
        description=(
            "Also prove steps with partial drafts (1 < 1+accepted < 1+k), which the engine's "
            "warmup does not cover by itself."
        ),
    )
    complete: bool = Field(
        default=True,
        description=(
            "Require every reachable shape to be covered: true completes the plan and blocks "
            "warmup on holes it cannot close (CoverageProven=False); false reports them and "
            "continues. Holes no bucket the engine's warmup compiles can serve do not block "
            "(reason UnwarmableShapes): the completed plan is warmed."
        ),
    )
    max_extra_buckets: int = Field(
        default=64,
        ge=0,
        le=4096,
        description="Cap on buckets the planner adds beyond the engine's own to close holes.",
    )
    optimize_for: Literal["ServingSpeed", "WarmupTime"] = Field(
        default="ServingSpeed",
        description=(
            "What completion trades. ServingSpeed: after closing the holes, add decode buckets "
            "below each row's largest until the mean decode KV-block padding is within 1.05x of "
            "the engine plan's (more warmup; these buckets are not counted in maxExtraBuckets). "
            "WarmupTime: add only the buckets coverage needs (fewest warmup seconds) and report "
            "the padding they cost (status.plan.decodePadding)."
        ),
    )


def _path_cel(phase: str, dim: str, attr: str) -> str:
    return f"(has(self.{phase}) && has(self.{phase}.{dim}) && has(self.{phase}.{dim}.{attr}))"


def _value(buckets: Any, phase: str, dim: str, attr: str) -> Any:
    ranges = getattr(buckets, phase)
    rng = getattr(ranges, dim, None) if ranges is not None else None
    name = {"padMax": "pad_max", "padPercent": "pad_percent"}.get(attr, attr)
    return getattr(rng, name, None) if rng is not None else None


_PAD_SET: Final = [(p, d, a) for p, d in DIMENSIONS for a in PAD_FIELDS]
_EXP_IGNORED: Final = [
    (p, d, a) for p, d in DIMENSIONS for a in RANGE_FIELDS if (p, d, a) not in EXP_HONOURED
]
_PAD_CEL: Final = " || ".join(_path_cel(*t) for t in _PAD_SET)
_EXP_CEL: Final = " || ".join(
    [_path_cel(*t) for t in _EXP_IGNORED]
    + [f"({_path_cel('prompt', 'query', 'min')} && self.prompt.query.min != 1)"]
)


def _pad_ok(s: Any) -> bool:
    return bool(s.strategy == "pad" or all(_value(s, *t) is None for t in _PAD_SET))


def _exp_ok(s: Any) -> bool:
    if s.strategy != "exp":
        return True
    query_min = _value(s, "prompt", "query", "min")
    return all(_value(s, *t) is None for t in _EXP_IGNORED) and query_min in (None, 1)


class BucketsSpec(ApiModel):
    """How vllm-gaudi generates buckets, and the coverage policy the planner proves."""

    strategy: Strategy = Field(
        default="exp", description="VLLM_BUCKETING_STRATEGY: exp (default), lin or pad."
    )
    contiguous_pa: bool = Field(
        default=False,
        alias="contiguousPA",
        description="VLLM_CONTIGUOUS_PA: contiguous paged attention (turns off prefix caching).",
    )
    merged_prefill: bool = Field(default=False, description="VLLM_MERGED_PREFILL.")
    prompt: PromptRanges | None = Field(
        default=None, description="Prompt range overrides (VLLM_PROMPT_*_BUCKET_*)."
    )
    decode: DecodeRanges | None = Field(
        default=None, description="Decode range overrides (VLLM_DECODE_*_BUCKET_*); lin/pad only."
    )
    seeds: BucketSeeds | None = Field(
        default=None, description="Explicit seed buckets; exclusive with prompt/decode ranges."
    )
    coverage: CoveragePolicy = Field(
        default_factory=CoveragePolicy, description="Coverage policy of the shape proof."
    )

    cel_rules = (
        Rule(
            cel=f"self.strategy == 'pad' || !({_PAD_CEL})",
            message="padMax and padPercent apply only when strategy is pad",
            check=_pad_ok,
            field_path=".strategy",
        ),
        Rule(
            cel=f"self.strategy != 'exp' || !({_EXP_CEL})",
            message=(
                "strategy exp only honours prompt.bs.max, prompt.query.min (= 1) and "
                "prompt.ctx.max; use strategy lin or pad for other range fields"
            ),
            check=_exp_ok,
            field_path=".strategy",
        ),
        Rule(
            cel="!has(self.seeds) || (!has(self.prompt) && !has(self.decode))",
            message="seeds replace the strategy: do not combine them with prompt or decode ranges",
            check=lambda s: s.seeds is None or (s.prompt is None and s.decode is None),
            field_path=".seeds",
            reason="FieldValueForbidden",
        ),
    )

    def bucket_file(self) -> str | None:
        """The VLLM_BUCKETING_FROM_FILE text for the seeds, one `(bs, query, ctx)` per line."""
        if self.seeds is None:
            return None
        rows = [*self.seeds.prompt, *self.seeds.decode]
        return "".join(f"({b}, {q}, {c})\n" for b, q, c in rows)
