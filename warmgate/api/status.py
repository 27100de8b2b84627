"""The status the operator writes: metav1 conditions and plan/warmup/serving summaries."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, PlainSerializer, Strict, StringConstraints

from warmgate.api.base import ApiModel, add_rules

# metav1.Condition validation, copied from k8s.io/apimachinery/pkg/apis/meta/v1/types.go.
CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
MAX_UNCOVERED_LISTED = 20

# metav1.Time: RFC 3339 in UTC with second precision.
Time = Annotated[
    datetime,
    Strict(False),  # the apiserver hands timestamps back as RFC 3339 strings
    PlainSerializer(lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ"), return_type=str, when_used="json"),
]
ConditionStatus = Literal["True", "False", "Unknown"]
PhaseName = Literal["Pending", "Planning", "Warming", "Starting", "Ready", "Failed"]
Hash = Annotated[str, StringConstraints(max_length=128)]
ObjectName = Annotated[str, StringConstraints(max_length=253)]


def _message_required(schema: dict[str, Any], cls: type[Any]) -> None:
    # metav1.Condition requires message (it may be empty); Python keeps a "" default for callers.
    schema["required"] = [*schema.get("required", []), "message"]


def _tolerant(schema: dict[str, Any], cls: type[Any]) -> None:
    add_rules(schema, cls)
    schema["x-kubernetes-preserve-unknown-fields"] = True


class StatusModel(ApiModel):
    """A status object that keeps fields it does not know.

    A newer operator may write status fields this one lacks (an upgrade rolled back, two
    versions during a rolling upgrade). Refusing them would make the object unreadable, so
    every sync would fail; pydantic keeps them (``extra="allow"``, written back unchanged) and
    the CRD keeps them too (``x-kubernetes-preserve-unknown-fields``) instead of pruning them.
    """

    model_config = ConfigDict(extra="allow", json_schema_extra=_tolerant)


class Condition(ApiModel):
    """One aspect of the object's state (metav1.Condition)."""

    model_config = ConfigDict(json_schema_extra=_message_required)

    type: Annotated[str, StringConstraints(max_length=316, pattern=CONDITION_TYPE_PATTERN)] = Field(
        description="Condition type: BucketsPlanned, CoverageProven, Warmed, Ready, ..."
    )
    status: ConditionStatus = Field(description="True, False or Unknown.")
    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation the condition was computed from."
    )
    last_transition_time: Time = Field(description="When the status last changed.")
    reason: Annotated[
        str, StringConstraints(min_length=1, max_length=1024, pattern=REASON_PATTERN)
    ] = Field(description="CamelCase reason of the last transition.")
    message: Annotated[str, StringConstraints(max_length=32768)] = Field(
        default="", description="Human-readable details."
    )


class PlanSummary(StatusModel):
    """The bucket plan and its coverage proof."""

    hash: Hash | None = Field(default=None, description="Digest of the planned bucket set.")
    prompt_buckets: int | None = Field(default=None, ge=0, description="Prompt buckets.")
    decode_buckets: int | None = Field(default=None, ge=0, description="Seed decode buckets.")
    spec_decode_buckets: int | None = Field(
        default=None, ge=0, description="Decode buckets after the 1+k spec-decode expansion."
    )
    total_buckets: int | None = Field(default=None, ge=0, description="Buckets to warm.")
    extra_buckets: int | None = Field(
        default=None, ge=0, description="Buckets the planner added to close coverage holes."
    )
    uncovered_count: int | None = Field(default=None, ge=0, description="Uncovered shapes.")
    uncovered_shapes: list[Annotated[str, StringConstraints(max_length=128)]] | None = Field(
        default=None,
        max_length=MAX_UNCOVERED_LISTED,
        description=f"First {MAX_UNCOVERED_LISTED} uncovered shapes, e.g. (decode, 24, 1, 768).",
    )
    estimated_warmup_seconds: int | None = Field(
        default=None, ge=0, description="Predicted warmup duration without a cache hit."
    )
    drafter_shapes: int | None = Field(
        default=None,
        ge=0,
        description="Draft-model graphs the engine's warmup never compiles (eagle, eagle3, mtp).",
    )
    drafter_swept: int | None = Field(
        default=None, ge=0, description="Of those, the graphs the planned warmup sweep drives."
    )
    completed_by: Literal["Greedy", "Optimum"] | None = Field(
        default=None,
        description=(
            "Which completion chose the added decode seeds: Greedy (round by round) or Optimum "
            "(the exact cheapest, solved within a deterministic budget; the greedy otherwise)."
        ),
    )
    padding_buckets: int | None = Field(
        default=None,
        ge=0,
        description=(
            "Of extraBuckets, the decode buckets added to keep decode padding near the engine "
            "plan's (spec.buckets.coverage.optimizeFor: ServingSpeed)."
        ),
    )
    decode_padding_engine: float | None = Field(
        default=None,
        ge=0,
        description=(
            "Mean padded/real KV blocks over every reachable decode step with the engine's own "
            "plan (set when completion changes the decode buckets)."
        ),
    )
    decode_padding: float | None = Field(
        default=None,
        ge=0,
        description=(
            "The same mean with the plan warmgate warms: the attention work every decode step "
            "pays for the life of the deployment, against decodePaddingEngine."
        ),
    )


class WarmupProgress(StatusModel):
    """How far the running warmup is, as its runner reports it (at most one write per ~10 s)."""

    stage: Annotated[str, StringConstraints(max_length=64)] | None = Field(
        default=None, description="The runner's stage: facts, engine, warmup, probe, stopping, ..."
    )
    phase: Annotated[str, StringConstraints(max_length=32)] | None = Field(
        default=None, description="The engine's warmup phase being compiled: prompt or decode."
    )
    warmed_buckets: int | None = Field(
        default=None, ge=0, description="Buckets the engine has warmed so far (prompt + decode)."
    )
    planned_buckets: int | None = Field(
        default=None, ge=0, description="Buckets the plan warms (status.plan.totalBuckets)."
    )
    percent: int | None = Field(default=None, ge=0, le=100, description="warmed of planned, %.")
    compiled_fraction: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description=(
            "Estimated compile seconds of the buckets warmed so far over those of the whole plan "
            "(the warmup cost model, which weighs a prompt bucket more than a decode one), 0 to 1."
        ),
    )
    elapsed_seconds: int | None = Field(
        default=None, ge=0, description="Seconds since the runner of this attempt started."
    )
    estimated_remaining_seconds: int | None = Field(
        default=None,
        ge=0,
        description="Seconds left at the rate measured so far (the plan's estimate before).",
    )
    update_time: Time | None = Field(default=None, description="When the operator read it.")


class WarmupShards(StatusModel):
    """A sharded warmup's engines (more than one): how many, running, verified."""

    planned: int = Field(ge=1, le=64, description="Engine processes (Pods) of the warmup Job.")
    running: int = Field(default=0, ge=0, le=64, description="Of them, Pods running now.")
    verified: int = Field(
        default=0,
        ge=0,
        le=64,
        description=(
            "Of them, those whose runner verified their part: each slice, and Pod 0's merge of "
            "all slices with the whole plan's probe. Warmed needs all of them."
        ),
    )


class WarmupSummary(StatusModel):
    """The warmup Job of the current plan."""

    job_name: ObjectName | None = Field(default=None, description="Name of the warmup Job.")
    job_uid: Annotated[str, StringConstraints(max_length=64)] | None = Field(
        default=None, description="UID of the warmup Job (a Job made again has another)."
    )
    attempts: int | None = Field(
        default=None,
        ge=0,
        description=(
            "Attempts started so far (a sharded warmup: the Job's tries, the most Pods of any "
            "one shard, not its N Pods)."
        ),
    )
    warmed_buckets: int | None = Field(default=None, ge=0, description="Buckets warmed so far.")
    progress: WarmupProgress | None = Field(
        default=None, description="Progress of the running warmup, read from its runner."
    )
    start_time: Time | None = Field(default=None, description="When the current attempt started.")
    completion_time: Time | None = Field(default=None, description="When warmup succeeded.")
    duration_seconds: int | None = Field(default=None, ge=0, description="Warmup wall time.")
    cache_key: Hash | None = Field(default=None, description="Recipe-cache key of the plan.")
    cache_hit: bool | None = Field(
        default=None, description="True when a cache for this key already existed."
    )
    kv_blocks: int | None = Field(
        default=None,
        ge=0,
        description="KV-cache blocks the verified warmup measured; serving pins this count.",
    )
    cache_claim_uid: Annotated[str, StringConstraints(max_length=64)] | None = Field(
        default=None,
        description=(
            "UID of the recipe-cache claim the verified entry was published on; a replaced "
            "claim means the entry is gone and the plan is warmed again."
        ),
    )
    pending_since: Time | None = Field(
        default=None,
        description=(
            "When the operator first saw the current warmup Pod waiting, on its own clock: "
            "spec.warmup.pendingTimeoutSeconds counts from here, never from the API server's "
            "timestamps (a skewed clock neither stops a Job early nor lets it wait forever)."
        ),
    )
    drafter_driven: int | None = Field(
        default=None,
        ge=0,
        description="Draft-model graphs the warmup sweep compiled, as the compile hook saw.",
    )
    drafter_verified: bool | None = Field(
        default=None,
        description=(
            "True when the compile hook saw no graph compile during the probe after the sweep; "
            "false when it could not attach."
        ),
    )
    drafter_unverified: int | None = Field(
        default=None,
        ge=0,
        description=(
            "Planned drafter shapes Warmed=True stands without evidence for: accepted by "
            "spec.warmup.drafter.verification BestEffort (or, for shapes never reached, "
            "spec.buckets.coverage.complete false), or not checked on a CPU engine; the Warmed "
            "message says why. Absent or 0: every planned drafter shape was verified."
        ),
    )
    engine_kind: Literal["gaudi", "cpu"] | None = Field(
        default=None,
        description=(
            "The engine the verified warmup ran on, as its runner reported: gaudi, or cpu (a CPU "
            "build of vLLM accepted by spec.engine.acceptCPUEngine: no Gaudi graph verified)."
        ),
    )
    shards: WarmupShards | None = Field(
        default=None,
        description=(
            "A sharded warmup's engines; its wall time is durationSeconds, to compare with "
            "the single-process estimate status.plan.estimatedWarmupSeconds."
        ),
    )


# Draft positions listed: k is at most 16 (spec.speculative.numSpeculativeTokens).
MAX_DRAFT_POSITIONS = 16


class SpecDecodeAcceptance(StatusModel):
    """How well the drafts pay off, as the serving engines measure it themselves: vLLM's
    spec-decode counters (vllm:spec_decode_*), summed over the served plan's serving Pods."""

    acceptance_rate: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Draft tokens the target accepted, of those drafted (0 to 1).",
    )
    mean_acceptance_length: float | None = Field(
        default=None,
        ge=1,
        description=(
            "Tokens a request gains per target step: 1 + accepted tokens / drafts (1 to 1 + k; "
            "near 1 means k buys nothing)."
        ),
    )
    per_position_acceptance_rate: list[Annotated[float, Field(ge=0, le=1)]] | None = Field(
        default=None,
        max_length=MAX_DRAFT_POSITIONS,
        description="Per draft position i (0 first): the share of drafts whose token i was "
        "accepted.",
    )
    drafts: int | None = Field(default=None, ge=0, description="Draft proposals (steps).")
    draft_tokens: int | None = Field(default=None, ge=0, description="Draft tokens proposed.")
    accepted_tokens: int | None = Field(default=None, ge=0, description="Draft tokens accepted.")
    pods: int | None = Field(
        default=None,
        ge=0,
        description="Serving Pods whose counters are summed (each since its first start).",
    )
    update_time: Time | None = Field(default=None, description="When the operator read them.")


class ServingSummary(StatusModel):
    """The serving Deployment (scale subresource reads replicas and selector here)."""

    plan_hash: Hash | None = Field(default=None, description="Plan hash the replicas serve.")
    deployment_name: ObjectName | None = Field(default=None, description="Serving Deployment.")
    service_name: ObjectName | None = Field(default=None, description="Serving Service.")
    replicas: int | None = Field(default=None, ge=0, description="Current serving replicas.")
    ready_replicas: int | None = Field(default=None, ge=0, description="Ready serving replicas.")
    selector: Annotated[str, StringConstraints(max_length=1024)] | None = Field(
        default=None, description="Label selector of serving Pods, for the scale subresource."
    )
    spec_decode: SpecDecodeAcceptance | None = Field(
        default=None,
        description=(
            "Measured acceptance of the drafts by the serving engines (absent until an engine "
            "exports its spec-decode counters)."
        ),
    )
    record_digest: Hash | None = Field(
        default=None,
        description=(
            "sha256 of the served record ConfigMap's data as the operator wrote it; a record "
            "whose data does not hash to it is no evidence (docs/operator.md, 'Trust and "
            "failure model')."
        ),
    )


SeedRow = Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=3, max_length=3)]


class ProposedSeeds(StatusModel):
    """Seed buckets that would make the engine warm the shapes observed unwarmed."""

    prompt: list[SeedRow] | None = Field(
        default=None, max_length=MAX_UNCOVERED_LISTED, description="Prompt [bs, query, ctx]."
    )
    decode: list[SeedRow] | None = Field(
        default=None, max_length=MAX_UNCOVERED_LISTED, description="Decode [bs, 1, blocks]."
    )


class DriftSummary(StatusModel):
    """Shapes the serving engines ran without having warmed them (post-serve drift)."""

    plan_hash: Hash | None = Field(default=None, description="Plan the serving Pods ran.")
    unwarmed_shapes: int | None = Field(
        default=None, ge=0, description="Distinct shapes logged as 'was not warmed-up!'."
    )
    not_prepared: int | None = Field(
        default=None, ge=0, description="Distinct bucket lookups logged as 'was not prepared'."
    )
    shapes: list[Annotated[str, StringConstraints(max_length=128)]] | None = Field(
        default=None,
        max_length=MAX_UNCOVERED_LISTED,
        description=f"First {MAX_UNCOVERED_LISTED} shapes, e.g. ('decode', 24, 1, 768).",
    )
    first_observed_time: Time | None = Field(default=None, description="When first observed.")
    proposed_seeds: ProposedSeeds | None = Field(
        default=None,
        description="Seeds to add to spec.buckets.seeds so that warmup covers these shapes; "
        "never applied by the operator.",
    )
    proposal: Annotated[str, StringConstraints(max_length=1024)] | None = Field(
        default=None, description="What the proposal does and how to apply it."
    )


class SpecDecodeDeploymentStatus(StatusModel):
    """Observed state, written by the operator only."""

    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation the status describes."
    )
    phase: PhaseName | None = Field(
        default=None, description="One-word summary for printer columns; read conditions instead."
    )
    conditions: list[Condition] | None = Field(
        default=None,
        max_length=16,
        description="BucketsPlanned, CoverageProven, Warmed, Ready; kstatus Reconciling/Stalled.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    plan: PlanSummary | None = Field(default=None, description="Bucket plan summary.")
    warmup: WarmupSummary | None = Field(default=None, description="Warmup summary.")
    serving: ServingSummary | None = Field(default=None, description="Serving summary.")
    drift: DriftSummary | None = Field(
        default=None, description="Unwarmed shapes observed while serving, and seeds proposed."
    )
