"""API names, `warmgate.dev/` keys, condition types and reasons: the decided vocabulary."""

from __future__ import annotations

from typing import Final

GROUP: Final = "warmgate.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "SpecDecodeDeployment"
LIST_KIND: Final = f"{KIND}List"
PLURAL: Final = "specdecodedeployments"
SINGULAR: Final = "specdecodedeployment"
SHORT_NAMES: Final = ("sdd",)
CATEGORIES: Final = ("warmgate",)
CRD_NAME: Final = f"{PLURAL}.{GROUP}"
CRD_FILE: Final = f"crds/{GROUP}_{PLURAL}.yaml"

# Every label and annotation is prefixed with the API group (kopf docs,
# "configuration": name them after your own group so they never clash with other operators).
PREFIX: Final = f"{GROUP}/"
LABEL_NAME: Final = f"{PREFIX}name"
LABEL_COMPONENT: Final = f"{PREFIX}component"
LABEL_PLAN_HASH: Final = f"{PREFIX}plan-hash"
ANNOTATION_PLAN_HASH: Final = f"{PREFIX}plan-hash"
ANNOTATION_CACHE_KEY: Final = f"{PREFIX}cache-key"
# On the serving Deployment: a digest of what the operator last wrote into it.
ANNOTATION_APPLIED_HASH: Final = f"{PREFIX}applied-hash"
READINESS_GATE: Final = f"{PREFIX}warmed"
# The runner's read-only status endpoint in warmup and serving Pods (GET /warmgate/status and
# /metrics): progress and unwarmed shapes reach the operator through it (docs/operator.md).
RUNNER_STATUS_PORT_NAME: Final = "warmgate-status"
RUNNER_STATUS_PORT: Final = 9464
# On the SpecDecodeDeployment, set by the user: any new value warms the plan again from an
# empty cache entry (it joins the cache key), like `kubectl rollout restart`'s restartedAt.
ANNOTATION_REWARM: Final = f"{PREFIX}rewarm"
# On a warmup Job the operator stopped (suspended): the Warmed reason and message it failed
# with, e.g. "Unschedulable: 0/3 nodes are available: ...".
ANNOTATION_WARMUP_FAILED: Final = f"{PREFIX}warmup-failed"
# On a warmup Job: the UID of the recipe-cache claim it publishes to (part of its content).
ANNOTATION_CACHE_CLAIM_UID: Final = f"{PREFIX}cache-claim-uid"
# On a warmup Job and its Pod template when spec.warmup.shards is not 1: what was asked ("auto"
# or N), so the shard count decided when the Job was made is kept while the ask is the same
# (reconcile/shard_cards.py; the template cannot change after the Job is made).
ANNOTATION_SHARDS_ASKED: Final = f"{PREFIX}shards-asked"
# The finalizer the operator (kopf) puts on every SpecDecodeDeployment it handles, so it can
# stop the object's resync timer before the object goes (docs/operator.md says how to remove
# it when the operator is gone).
FINALIZER: Final = f"{PREFIX}finalizer"
COMPONENT_WARMUP: Final = "warmup"
COMPONENT_SERVING: Final = "serving"

# Condition types. The four lifecycle conditions are positive-polarity ("True" is good);
# Reconciling and Stalled are the kstatus abnormal-true pair that Flux, Argo CD and kpt read
# (sigs.k8s.io/cli-utils/pkg/kstatus): present and True only while working or stuck.
BUCKETS_PLANNED: Final = "BucketsPlanned"
COVERAGE_PROVEN: Final = "CoverageProven"
WARMED: Final = "Warmed"
READY: Final = "Ready"
RECONCILING: Final = "Reconciling"
STALLED: Final = "Stalled"
LIFECYCLE_CONDITIONS: Final = (BUCKETS_PLANNED, COVERAGE_PROVEN, WARMED, READY)
CONDITION_TYPES: Final = (*LIFECYCLE_CONDITIONS, RECONCILING, STALLED)


class Reason:
    """Stable CamelCase reasons for the conditions (clients may switch on them)."""

    PENDING: Final = "Pending"
    PLANNING: Final = "Planning"
    PLAN_TOO_LARGE: Final = "PlanTooLarge"
    WARMUP_TOO_LONG: Final = "WarmupTooLong"
    INVALID_SPEC: Final = "InvalidSpec"
    PLANNED: Final = "Planned"
    PLAN_FAILED: Final = "PlanFailed"
    COVERAGE_COMPLETE: Final = "CoverageComplete"
    UNCOVERED_SHAPES: Final = "UncoveredShapes"
    UNCOVERED_SHAPES_ALLOWED: Final = "UncoveredShapesAllowed"
    EXTRA_BUCKETS_CAPPED: Final = "ExtraBucketsCapped"
    # Completion covers every state but those no bucket the engine's warmup compiles can serve
    # (docs/coverage.md, "Buckets the warmup never compiles"): warmup proceeds.
    UNWARMABLE_SHAPES: Final = "UnwarmableShapes"
    # A Warning Event: reachable states in which vllm-gaudi's drafter assert crashes the engine
    # (the block table one column short near max_model_len; docs/coverage.md, fact 16).
    DRAFTER_CRASH_REACHABLE: Final = "DrafterCrashReachable"
    WARMUP_PENDING: Final = "WarmupPending"
    WARMUP_RUNNING: Final = "WarmupRunning"
    WARMUP_SUCCEEDED: Final = "WarmupSucceeded"
    # A CPU build of vLLM ran the plan (spec.engine.acceptCPUEngine): Warmed, no Gaudi graph checked
    CPU_ENGINE: Final = "CPUEngine"
    WARMUP_FAILED: Final = "WarmupFailed"
    # Planned drafter shapes without evidence (hook not loaded or attached, proposer not found,
    # metric unreadable, drafter graphs not modelled) under spec.warmup.drafter.verification
    # Required: Warmed=False.
    DRAFTER_UNVERIFIED: Final = "DrafterUnverified"
    # The warmup children cannot be built for this plan (e.g. plan files over 1 MiB).
    BUILD_FAILED: Final = "BuildFailed"
    # Why a warmup Pod is Pending, as Kubernetes says it (scheduler, kubelet, Job controller).
    UNSCHEDULABLE: Final = "Unschedulable"
    FAILED_CREATE: Final = "FailedCreate"
    # Pending past spec.warmup.pendingTimeoutSeconds without a more specific reason.
    PENDING_TIMEOUT: Final = "PendingTimeout"
    SERVING_PROGRESSING: Final = "ServingProgressing"
    REPLICAS_READY: Final = "ReplicasReady"
    SCALED_TO_ZERO: Final = "ScaledToZero"
    # Ready stays True (the replicas serve) with this reason while the serving engines have
    # logged shapes the verified plan did not warm (post-serve drift, field.md §4 item 3).
    UNWARMED_SHAPE_OBSERVED: Final = "UnwarmedShapeObserved"
    ROLLING_OUT: Final = "RollingOut"
    PROGRESS_DEADLINE_EXCEEDED: Final = "ProgressDeadlineExceeded"
    NOT_OWNED: Final = "NotOwned"
    OPERATOR_NAMESPACE: Final = "OperatorNamespace"


class Phase:
    """The one-word status.phase summary (printer columns only; clients read conditions)."""

    PENDING: Final = "Pending"
    PLANNING: Final = "Planning"
    WARMING: Final = "Warming"
    STARTING: Final = "Starting"
    READY: Final = "Ready"
    FAILED: Final = "Failed"
