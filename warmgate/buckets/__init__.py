"""Pure bucket math: an exact port of vllm-gaudi shape bucketing (no kopf, no kubernetes)."""

from warmgate.buckets.engine.bucket_file import (
    ParsedBucketFile,
    format_bucket_file,
    parse_bucket_file,
)
from warmgate.buckets.engine.config import (
    DEFAULT_PROFILE,
    PROFILES,
    BucketOverrides,
    BucketPlanError,
    EngineShapeConfig,
    Profile,
    SpeculativeMethod,
    Strategy,
)
from warmgate.buckets.engine.generate import Bucket
from warmgate.buckets.engine.lookup import (
    BucketIndex,
    DecodeRows,
    Lookup,
    fallback_value,
    first_fit,
)
from warmgate.buckets.engine.plan import BucketPlan, DecodeStep, plan_buckets
from warmgate.buckets.engine.ranges import exp_range, lin_range, pad_range
from warmgate.buckets.engine.spec import expand_spec

__all__ = [
    "DEFAULT_PROFILE",
    "PROFILES",
    "Bucket",
    "BucketIndex",
    "BucketOverrides",
    "BucketPlan",
    "BucketPlanError",
    "DecodeRows",
    "DecodeStep",
    "EngineShapeConfig",
    "Lookup",
    "ParsedBucketFile",
    "Profile",
    "SpeculativeMethod",
    "Strategy",
    "exp_range",
    "expand_spec",
    "fallback_value",
    "first_fit",
    "format_bucket_file",
    "lin_range",
    "pad_range",
    "parse_bucket_file",
    "plan_buckets",
]

# Coverage proof, completion and warmup cost (issue 4), after the planner they build on.
from warmgate.buckets.completion.complete import (
    CompletionError,
    PlanDiff,
    UnwarmableError,
    complete_plan,
    plan_diff,
)
from warmgate.buckets.cost import CostEstimate, ModelProfile, estimate_buckets, estimate_plan
from warmgate.buckets.coverage.prove import (
    CoverageReport,
    UncoveredShape,
    brute_force_coverage,
    prove_coverage,
)

# The draft model's own graphs and the warmup sweep that makes it run them (issue 16).
from warmgate.buckets.drafter.graphs import (
    DrafterModelError,
    DrafterReport,
    DrafterShape,
    prove_drafter,
)
from warmgate.buckets.drafter.sweep import DrafterSweep, plan_sweep
from warmgate.buckets.engine.warmup_shapes import warmed_decode_shapes, warmed_prompt_shapes

__all__ += [
    "CompletionError",
    "CostEstimate",
    "CoverageReport",
    "DrafterModelError",
    "DrafterReport",
    "DrafterShape",
    "DrafterSweep",
    "ModelProfile",
    "PlanDiff",
    "UncoveredShape",
    "UnwarmableError",
    "brute_force_coverage",
    "complete_plan",
    "estimate_buckets",
    "estimate_plan",
    "plan_diff",
    "plan_sweep",
    "prove_coverage",
    "prove_drafter",
    "warmed_decode_shapes",
    "warmed_prompt_shapes",
]
