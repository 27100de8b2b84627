"""The serving children: the gated vLLM Deployment and the Service in front of it."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Final

from warmgate.api import Manifest, SpecDecodeDeployment, container_resources
from warmgate.api.constants import (
    ANNOTATION_APPLIED_HASH,
    ANNOTATION_CACHE_KEY,
    ANNOTATION_PLAN_HASH,
    COMPONENT_SERVING,
    READINESS_GATE,
)
from warmgate.contract.drafterwarm import DRAFTER_WARMUP_FILE
from warmgate.contract.engine import LOGGING_ENV, engine_command, recipe_cache_config
from warmgate.contract.order import EngineLaunch
from warmgate.resources.mounts import (
    BUCKET_FILE,
    CACHE_DIR,
    LOCAL_DIR,
    PLAN_DIR,
    RECIPE_DIR,
    RUNNER_DIR,
)
from warmgate.resources.names import child_name, metadata, parent_name, selector_labels
from warmgate.resources.plan_bundle import PlanBundle
from warmgate.resources.pod import (
    VOLUME_LOCAL,
    cache_claim_name,
    cache_mount,
    cache_volume,
    engine_mounts,
    engine_security,
    operator_container,
    placement_fields,
    plan_volume,
    pod_defaults,
    shared_volumes,
)
from warmgate.resources.runner_plan import direct_warmup
from warmgate.resources.vllm_engine import SERVING_HOST, container_env
from warmgate.resources.warmup_children import (
    RUNNER_PATH,
    STATUS_PORT,
    VOLUME_RUNNER,
    configmap_name,
    runner_copy,
)

CONTAINER: Final = "vllm"
PORT_NAME: Final = "http"
PROBE_PERIOD_S: Final = 10
# Seconds before the warmup starts: model load from a claim, or a download from the Hub
# (a 70B BF16 checkpoint is ~140 GB). Not measured on hardware: a generous allowance.
LOAD_ALLOWANCE_S: Final = {True: 600, False: 1800}
# Serving warms again from the restored cache (§4.6: only the graph-compiler stage is skipped);
# the budget is the cost model's uncached upper end times this margin, so even a cache miss fits.
BUDGET_MARGIN: Final = 1.5


def serving_name(sdd: SpecDecodeDeployment) -> str:
    """`<parent>-serving`: the Deployment's and the Service's name (status.serving)."""
    return child_name(parent_name(sdd), COMPONENT_SERVING)


def serving_selector(sdd: SpecDecodeDeployment) -> str:
    """The serving Pods' label selector as a string, for status.serving.selector (the scale
    subresource's labelSelectorPath, which an HPA reads)."""
    labels = selector_labels(sdd, COMPONENT_SERVING)
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def startup_budget_s(sdd: SpecDecodeDeployment, plan: PlanBundle) -> int:
    """Seconds a serving Pod may take to answer /health (field.md §4 item 8).

    e.g. the eagle3 example (189 decode + 34 prompt buckets, estimate 337 s, weights from the
    Hub): 1800 + 1.5 * 337 = 2306 s -> the startupProbe allows 231 checks of 10 s.
    """
    load = LOAD_ALLOWANCE_S[sdd.spec.model.weights is not None]
    return math.ceil(load + BUDGET_MARGIN * plan.estimated_warmup_s)


def serving_launch(plan: PlanBundle, warmup: EngineLaunch) -> EngineLaunch:
    """The warmup's engine on all interfaces, pinning the KV blocks its warmup measured.

    The plan's own count wins, as in the planner (docs/api.md "numGpuBlocks"); without one, the
    count the runner reported (``plan.kv_blocks``) keeps serving's decode shapes the warmed ones.
    """
    blocks = plan.buckets.config.num_gpu_blocks or plan.kv_blocks
    return replace(warmup, host=SERVING_HOST, num_gpu_blocks_override=blocks)


def _engine_env(sdd: SpecDecodeDeployment, launch: EngineLaunch) -> list[Manifest]:
    """What the runner gives the engine (docs/runner.md), with the restored cache reused."""
    size = sdd.spec.warmup.cache.max_size_mb
    owned = {
        "VLLM_BUCKETING_FROM_FILE": f"{PLAN_DIR}/{BUCKET_FILE}",
        "VLLM_SKIP_WARMUP": "false",
        # DELETE=False keeps the restored recipes (§4.6); without a claim there is nothing to
        # restore and the engine fills an empty folder.
        "PT_HPU_RECIPE_CACHE_CONFIG": recipe_cache_config(
            Path(RECIPE_DIR), cache_claim_name(sdd) is not None, size
        ),
        "PYTHONUNBUFFERED": "1",
        **LOGGING_ENV,  # the runner's logging settings: the API reserves these variables
    }
    values = {**launch.env, **owned}
    return [{"name": k, "value": v} for k, v in values.items()] + container_env(sdd)


# The engine runs under the runner's serve mode (docs/runner.md, "Serve mode"): output passed
# through unchanged, unwarmed shapes counted and served on the status port; "$@" is the engine.
_SERVE_PREFIX: Final = (
    f"{RUNNER_PATH} exec python3 -m warmgate.warmup --serve "
    f"--status-port {STATUS_PORT['containerPort']} "
    f"--state-file {LOCAL_DIR}/serve/observed.json "
)
SERVE_COMMAND: Final = _SERVE_PREFIX + '-- "$@"'
# With a drafter: the engine plugin warms every planned drafter shape in each serving process
# before /health answers, from the plan ConfigMap's document (issue 33 item 2).
SERVE_COMMAND_DIRECT: Final = (
    _SERVE_PREFIX + f'--drafter-warmup {PLAN_DIR}/{DRAFTER_WARMUP_FILE} -- "$@"'
)


def served_command(launch: EngineLaunch, direct: bool = False) -> list[str]:
    """`sh -c SERVE_COMMAND sh vllm serve ...`: the engine's own argv, under serve mode;
    ``direct``: with the direct drafter warmup (SERVE_COMMAND_DIRECT)."""
    command = SERVE_COMMAND_DIRECT if direct else SERVE_COMMAND
    return ["/bin/sh", "-c", command, "sh", *engine_command(launch)]


def _probe(path: str, period: int, failures: int) -> Manifest:
    return {
        "httpGet": {"path": path, "port": PORT_NAME},
        "periodSeconds": period,
        "timeoutSeconds": 5,
        "failureThreshold": failures,
    }


def _direct(sdd: SpecDecodeDeployment, plan: PlanBundle) -> bool:
    return direct_warmup(sdd, plan.drafter_sweep, plan.drafter_warmup) is not None


def _vllm_container(sdd: SpecDecodeDeployment, plan: PlanBundle, launch: EngineLaunch) -> Manifest:
    budget = startup_budget_s(sdd, plan)
    return {
        "name": CONTAINER,
        "image": sdd.spec.image,
        "command": served_command(launch, _direct(sdd, plan)),
        "env": _engine_env(sdd, launch),
        "ports": [
            {"name": PORT_NAME, "containerPort": sdd.spec.serving.port, "protocol": "TCP"},
            dict(STATUS_PORT),
        ],
        "resources": container_resources(
            sdd.spec.serving.resources, sdd.spec.engine.tensor_parallel_size
        ),
        "volumeMounts": [
            *engine_mounts(sdd),
            {"name": VOLUME_RUNNER, "mountPath": RUNNER_DIR, "readOnly": True},
        ],
        "startupProbe": _probe("/health", PROBE_PERIOD_S, math.ceil(budget / PROBE_PERIOD_S)),
        "readinessProbe": _probe("/health", PROBE_PERIOD_S, 3),
        "livenessProbe": _probe("/health", 30, 5),
        "securityContext": engine_security(sdd),
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def _restore(key: str, operator_image: str) -> Manifest:
    """`--restore-cache VOLUME KEY DEST`: copy the verified entry to local disk (§4.6, NFS
    lacks locking). Fails the init container when the entry is missing or corrupt, so a Pod
    never starts on a cache the operator did not verify."""
    command = ["python", "-m", "warmgate.warmup", "--restore-cache", CACHE_DIR, key, RECIPE_DIR]
    mounts = [cache_mount(read_only=True), {"name": VOLUME_LOCAL, "mountPath": LOCAL_DIR}]
    return operator_container("restore-cache", operator_image, command, mounts)


def _pod_spec(
    sdd: SpecDecodeDeployment, plan: PlanBundle, key: str, launch: EngineLaunch, operator_image: str
) -> Manifest:
    serving = sdd.spec.serving
    volumes = [
        # with a direct drafter warmup, its document too (--drafter-warmup reads it there)
        plan_volume(
            configmap_name(sdd, key),
            plan=False,
            also=(DRAFTER_WARMUP_FILE,) if _direct(sdd, plan) else (),
        ),
        {"name": VOLUME_RUNNER, "emptyDir": {}},
        *shared_volumes(sdd),
    ]
    init: list[Manifest] = [runner_copy(operator_image)]
    if cache_claim_name(sdd) is not None:
        volumes.append(cache_volume(sdd, read_only=True, claim_name=plan.cache_claim_name))
        init.append(_restore(key, operator_image))
    spec: Manifest = {
        # Ready only once the operator sets this Pod condition (docs/resources.md).
        "readinessGates": [{"conditionType": READINESS_GATE}],
        **placement_fields(serving.placement),
        **pod_defaults(sdd),
        "containers": [_vllm_container(sdd, plan, launch)],
        "volumes": volumes,
        "terminationGracePeriodSeconds": 60,
    }
    spec["initContainers"] = init
    return spec


def build_serving_deployment(
    sdd: SpecDecodeDeployment,
    plan: PlanBundle,
    *,
    key: str,
    launch: EngineLaunch,
    operator_image: str,
) -> Manifest:
    """The serving Deployment of a verified plan: gated Pods, the warmup Job's engine.

    ``launch`` is the serving engine (``serving_launch``). The `warmgate.dev/applied-hash`
    annotation digests the spec and labels, so the operator rewrites the Deployment only when
    what it wants changed.
    """
    serving = sdd.spec.serving
    digest = plan.buckets.digest
    annotations = {ANNOTATION_PLAN_HASH: digest, ANNOTATION_CACHE_KEY: key}
    meta = metadata(
        sdd, serving_name(sdd), COMPONENT_SERVING, plan_digest=digest, annotations=annotations
    )
    pod_labels = {**(serving.pod_labels or {}), **meta["labels"]}
    pod_annotations = {**(serving.pod_annotations or {}), **annotations}
    spec: Manifest = {
        "replicas": serving.replicas,
        # Never the plan hash: Pods of the last verified plan keep matching (docs/resources.md).
        "selector": {"matchLabels": selector_labels(sdd, COMPONENT_SERVING)},
        # No ready replica is given up before a new, gated one is Ready.
        "strategy": {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
        },
        "progressDeadlineSeconds": startup_budget_s(sdd, plan) + 600,
        "revisionHistoryLimit": 3,
        "template": {
            "metadata": {"labels": pod_labels, "annotations": pod_annotations},
            "spec": _pod_spec(sdd, plan, key, launch, operator_image),
        },
    }
    meta["annotations"][ANNOTATION_APPLIED_HASH] = applied_hash(spec, meta["labels"])
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}


def applied_hash(spec: Manifest, labels: dict[str, str]) -> str:
    """Digest of what the operator wants the Deployment to be (spec plus its own labels)."""
    wanted = {"spec": spec, "labels": labels}
    return hashlib.sha256(json.dumps(wanted, sort_keys=True).encode()).hexdigest()[:32]


def build_service(sdd: SpecDecodeDeployment) -> Manifest:
    """The Service in front of the serving Pods; it only routes to Pods that passed the gate."""
    serving = sdd.spec.serving
    port = {"name": PORT_NAME, "port": serving.port, "targetPort": PORT_NAME, "protocol": "TCP"}
    spec = {
        "type": serving.service_type,
        "selector": selector_labels(sdd, COMPONENT_SERVING),
        "ports": [port],
    }
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(sdd, serving_name(sdd), COMPONENT_SERVING),
        "spec": spec,
    }
