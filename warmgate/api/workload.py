"""The warmup and serving sections: the Job that fills the recipe cache, then the Deployment."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, WithJsonSchema

from warmgate.api.base import ApiModel, Rule
from warmgate.api.constants import PREFIX
from warmgate.api.kube import (
    AnnotationValue,
    ClaimTemplate,
    LabelValue,
    MapKey,
    Name,
    Placement,
    Resources,
    keys_rule,
    quantity_value,
)

MIB = 2**20
MAX_SHARDS = 8
AUTO = "auto"


def _check_shards(value: int | str) -> int | str:
    if isinstance(value, bool) or (isinstance(value, str) and value != AUTO):
        raise ValueError(f"{value!r} is neither an integer 1..{MAX_SHARDS} nor {AUTO!r}")
    if isinstance(value, int) and not 1 <= value <= MAX_SHARDS:
        raise ValueError(f"{value} is not in 1..{MAX_SHARDS} (or {AUTO!r})")
    return value


# spec.warmup.shards: an integer 1..8 or "auto". The bounds apply to integers only and the
# pattern to strings only (JSON schema), so the server names the field either way.
ShardCount = Annotated[
    int | str,
    AfterValidator(_check_shards),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "minimum": 1,
            "maximum": MAX_SHARDS,
            "pattern": f"^{AUTO}$",
            "x-kubernetes-int-or-string": True,
        }
    ),
]


def _cache_fits(cache: RecipeCache) -> bool:
    template = cache.claim_template
    return template is None or quantity_value(template.size) >= cache.max_size_mb * MIB


class RecipeCache(ApiModel):
    """Where the HPU recipe cache (PT_HPU_RECIPE_CACHE_CONFIG) lives between warmup and serving.

    Neither existingClaim nor claimTemplate: the cache is an emptyDir, so nothing is reused
    across processes and every serving replica compiles its graphs again at start.
    """

    existing_claim: Name | None = Field(
        default=None, description="An existing PersistentVolumeClaim to keep the cache on."
    )
    claim_template: ClaimTemplate | None = Field(
        default=None, description="A claim the operator creates (and owns) for the cache."
    )
    max_size_mb: int = Field(
        default=8192,
        ge=64,
        le=1048576,
        alias="maxSizeMB",
        description="Recipe cache size cap in MiB (max_MB of PT_HPU_RECIPE_CACHE_CONFIG).",
    )
    retain_entries: int = Field(
        default=3,
        ge=1,
        le=64,
        description=(
            "Cache entries (one per verified plan) this object keeps on the claim: after "
            "publishing, the runner deletes this object's older entries beyond the count."
        ),
    )

    cel_rules = (
        Rule(
            cel="!(has(self.existingClaim) && has(self.claimTemplate))",
            message="existingClaim and claimTemplate are mutually exclusive",
            check=lambda s: s.existing_claim is None or s.claim_template is None,
            field_path=".claimTemplate",
            reason="FieldValueForbidden",
        ),
        Rule(
            cel=(
                "!has(self.claimTemplate) || !isQuantity(self.claimTemplate.size) || "
                "quantity(self.claimTemplate.size).asApproximateFloat() >= "
                "double(self.maxSizeMB) * 1048576.0"
            ),
            message="maxSizeMB must fit in claimTemplate.size",
            check=_cache_fits,
            field_path=".maxSizeMB",
        ),
    )


DrafterVerification = Literal["Required", "BestEffort"]


class DrafterWarmup(ApiModel):
    """What the warmup must prove about the draft model's graphs (eagle, eagle3, mtp)."""

    verification: DrafterVerification = Field(
        default="Required",
        description=(
            "Required: Warmed=True only with evidence for every planned drafter shape (warmed "
            "in the warmup, as the engine's compile hook saw, and none compiled in the probe); "
            "a hook the engine did not load, a proposer class or method not found, an "
            "unreadable compile metric, a shape never reached, or drafter graphs the planner "
            "cannot model leave Warmed=False with reason DrafterUnverified. BestEffort: the "
            "warmup may pass without that evidence; Warmed=True then says what was not "
            "verified and status.warmup.drafterUnverified counts the shapes. ngram (no draft "
            "model) is unaffected."
        ),
    )


class WarmupSpec(ApiModel):
    """The warmup Job: compiles every planned bucket once and fills the recipe cache."""

    placement: Placement | None = Field(
        default=None, description="Node selector, tolerations and affinity of the warmup Pod."
    )
    resources: Resources | None = Field(
        default=None,
        description="Resources of the warmup container; habana.ai/gaudi defaults to the TP size.",
    )
    timeout_seconds: int = Field(
        default=3600, ge=60, le=86400, description="activeDeadlineSeconds of one warmup attempt."
    )
    pending_timeout_seconds: int = Field(
        default=1800,
        ge=60,
        le=86400,
        description=(
            "How long a warmup Pod may stay Pending (not created, not scheduled, pulling its "
            "image, waiting for a Secret or volume) before the warmup fails with the reason it "
            "waited for."
        ),
    )
    retries: int = Field(
        default=2, ge=0, le=10, description="Attempts after the first (the Job's backoffLimit)."
    )
    cache: RecipeCache = Field(
        default_factory=RecipeCache, description="Recipe cache volume and its size cap."
    )
    probe_workload: bool = Field(
        default=True,
        description=(
            "After warmup, replay a short synthetic load over the planned shapes and fail if "
            "the engine logs a shape that was not warmed up."
        ),
    )
    drafter: DrafterWarmup = Field(
        default_factory=DrafterWarmup,
        description="The draft model's graphs: how strictly the warmup must verify them.",
    )
    shards: ShardCount = Field(
        default=1,
        description=(
            "Engine processes that warm slices of the plan side by side (an Indexed Job, each "
            "Pod with the engine's cards), merged into one recipe cache entry and probed once; "
            "1 warms in one process. An integer 1..8, or `auto`: as many as the free "
            "habana.ai/gaudi cards of the best node allow for the engine's TP, at most 8. "
            "Capped at what the plan allows (a prompt bucket and a decode seed per shard), and "
            "at the free cards when the Job is made (fewer shards, never a Pending one), decided "
            "then and kept with the Job. Needs a recipe-cache claim: the slices share their "
            "recipes on it."
        ),
    )

    cel_rules = (
        Rule(
            cel=(
                "!has(self.shards) || self.shards == 1 || (has(self.cache) && "
                "(has(self.cache.existingClaim) || has(self.cache.claimTemplate)))"
            ),
            message=(
                "shards other than 1 needs a recipe-cache claim (cache.existingClaim or "
                "cache.claimTemplate): the slices share their recipes on it"
            ),
            check=lambda s: (
                s.shards == 1
                or s.cache.existing_claim is not None
                or s.cache.claim_template is not None
            ),
            field_path=".shards",
            reason="FieldValueInvalid",
        ),
    )


def _unprefixed(keys: dict[str, str] | None) -> bool:
    return not any(key.startswith(PREFIX) for key in keys or {})


class ServingSpec(ApiModel):
    """The serving Deployment and Service, started once warmup has succeeded."""

    replicas: int = Field(
        default=1, ge=0, le=256, description="Serving replicas (the scale subresource; HPA-able)."
    )
    placement: Placement | None = Field(
        default=None, description="Node selector, tolerations and affinity of serving Pods."
    )
    resources: Resources | None = Field(
        default=None,
        description="Resources of the vLLM container; habana.ai/gaudi defaults to the TP size.",
    )
    port: int = Field(default=8000, ge=1, le=65535, description="HTTP port of the OpenAI API.")
    service_type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = Field(
        default="ClusterIP", description="Type of the Service in front of the replicas."
    )
    pod_labels: dict[MapKey, LabelValue] | None = Field(
        default=None, max_length=32, description="Extra labels on serving Pods."
    )
    pod_annotations: dict[MapKey, AnnotationValue] | None = Field(
        default=None, max_length=32, description="Extra annotations on serving Pods."
    )

    cel_rules = (
        keys_rule("podLabels", "label keys"),
        keys_rule("podAnnotations", "annotation keys"),
        Rule(
            cel=f"!has(self.podLabels) || self.podLabels.all(k, !k.startsWith('{PREFIX}'))",
            message=f"podLabels must not use the operator's {PREFIX} prefix",
            check=lambda s: _unprefixed(s.pod_labels),
            field_path=".podLabels",
            reason="FieldValueForbidden",
        ),
        Rule(
            cel=(
                f"!has(self.podAnnotations) || "
                f"self.podAnnotations.all(k, !k.startsWith('{PREFIX}'))"
            ),
            message=f"podAnnotations must not use the operator's {PREFIX} prefix",
            check=lambda s: _unprefixed(s.pod_annotations),
            field_path=".podAnnotations",
            reason="FieldValueForbidden",
        ),
    )
