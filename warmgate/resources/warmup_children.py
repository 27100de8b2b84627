"""The warmup children: the plan ConfigMaps and the warmup Job (the claim: `cache_claim`)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Final

from warmgate.api import Manifest, SpecDecodeDeployment, WarmupSpec, container_resources
from warmgate.api.constants import (
    ANNOTATION_CACHE_CLAIM_UID,
    ANNOTATION_CACHE_KEY,
    ANNOTATION_PLAN_HASH,
    ANNOTATION_SHARDS_ASKED,
    COMPONENT_WARMUP,
    RUNNER_STATUS_PORT,
    RUNNER_STATUS_PORT_NAME,
)
from warmgate.buckets import BucketPlan
from warmgate.contract.drafterwarm import DRAFTER_WARMUP_FILE, DrafterWarmupSpec
from warmgate.contract.shardspec import shard_file
from warmgate.resources.cache_key import key_hash
from warmgate.resources.mounts import BUCKET_FILE, PLAN_DIR, PLAN_FILE, RUNNER_DIR
from warmgate.resources.names import (
    COMPONENT_PLAN,
    child_name,
    metadata,
    parent_name,
    short_hash,
)
from warmgate.resources.pod import (
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
from warmgate.resources.runner_plan import OUTSIDE_CONTENT, TERMINATION_LOG
from warmgate.resources.vllm_engine import container_env
from warmgate.resources.warmup_shards import (
    SHARD_COMMAND_FLAG,
    indexed_job_fields,
    one_node_affinity,
)

CONTAINER: Final = "warmup"
VOLUME_RUNNER: Final = "runner"
# A ConfigMap holds at most 1 MiB (etcd's object limit); a plan above it cannot be mounted.
CONFIGMAP_LIMIT: Final = 1024 * 1024
# Seconds a warmup Pod may take to stop after SIGTERM (the runner writes its report first).
TERMINATION_GRACE_S: Final = 90
# The Job controller's pod-failure backoff (see pod_failure_backoff_s).
BACKOFF_BASE_S: Final = 10
BACKOFF_MAX_S: Final = 600
# Room for the Job controller's own resync and API latency in the Job's deadline.
CONTROLLER_SLACK_S: Final = 60
# Exit codes that a retry cannot change (docs/runner.md, "Exit codes"): plan_invalid,
# unwarmed_shapes, plan_mismatch, drafter_unverified (a required compile hook that cannot attach
# to this image). They fail the Job at once instead of burning retries.
PERMANENT_EXIT_CODES: Final = (2, 3, 4, 11)
# Copies warmgate/__init__.py, the runner (warmgate/warmup/ with its sub-packages) and the
# documents it shares with the operator (warmgate/contract/), standard library only, out of the
# operator image into the emptyDir the vLLM image puts on PYTHONPATH (docs/runner.md).
_COPY_RUNNER: Final = """\
import pathlib, shutil, warmgate
src = pathlib.Path(warmgate.__file__).parent
dst = pathlib.Path("{dir}") / "warmgate"
shutil.rmtree(dst, ignore_errors=True)
for part in ("warmup", "contract"):
    shutil.copytree(src / part, dst / part, ignore=shutil.ignore_patterns("__pycache__"))
shutil.copyfile(src / "__init__.py", dst / "__init__.py")
print("Copied the warmup runner to", dst)
"""


# The runner goes in front of the image's own PYTHONPATH instead of replacing it: an `env`
# entry would clobber the image's value (Habana base images set one for their libraries), and
# Kubernetes' $(VAR) expansion only sees variables of the Pod spec, not of the image.
RUNNER_PATH: Final = f'PYTHONPATH="{RUNNER_DIR}${{PYTHONPATH:+:$PYTHONPATH}}"'
RUNNER_COMMAND: Final = (
    f"{RUNNER_PATH} exec python3 -m warmgate.warmup --plan {PLAN_DIR}/{PLAN_FILE} "
    f"--status-port {RUNNER_STATUS_PORT}"
)
# A sharded warmup's Pods (issue 38): slice $JOB_COMPLETION_INDEX, and in Pod 0 the merge.
SHARDED_COMMAND: Final = (
    f"{RUNNER_PATH} exec python3 -m warmgate.warmup {SHARD_COMMAND_FLAG} {PLAN_DIR} "
    f"--status-port {RUNNER_STATUS_PORT}"
)
# Pod 0 of a sharded warmup runs twice: its slice, then the merge (each within the timeout).
SHARDED_ATTEMPTS: Final = 2
# The runner's status endpoint: progress for the operator (docs/operator.md).
STATUS_PORT: Final = {
    "name": RUNNER_STATUS_PORT_NAME,
    "containerPort": RUNNER_STATUS_PORT,
    "protocol": "TCP",
}


def configmap_name(sdd: SpecDecodeDeployment, key: str) -> str:
    """`<parent>-plan-<hash>`: the seed bucket file of one cache key (what serving mounts)."""
    return child_name(parent_name(sdd), COMPONENT_PLAN, key_hash(key))


def job_name(sdd: SpecDecodeDeployment, content: str) -> str:
    """`<parent>-warmup-<hash>`: one Job (and its plan.json ConfigMap) per warmup content."""
    return child_name(parent_name(sdd), COMPONENT_WARMUP, content)


def _annotations(plan: BucketPlan, key: str) -> dict[str, str]:
    return {ANNOTATION_PLAN_HASH: plan.digest, ANNOTATION_CACHE_KEY: key}


def _checked(data: dict[str, str]) -> dict[str, str]:
    size = sum(len(v.encode("utf-8")) for v in data.values())
    if size > CONFIGMAP_LIMIT:
        raise ValueError(f"the plan files take {size} bytes, over a ConfigMap's 1 MiB")
    return data


def build_plan_configmap(
    sdd: SpecDecodeDeployment,
    plan: BucketPlan,
    *,
    key: str,
    drafter_warmup: DrafterWarmupSpec | None = None,
) -> Manifest:
    """The ConfigMap with buckets.txt, the seed file serving reads (one per cache key), and
    with a drafter the direct warmup's document every serving process warms from (issue 33)."""
    files = {BUCKET_FILE: plan.to_bucket_file()}
    if drafter_warmup is not None:
        files[DRAFTER_WARMUP_FILE] = json.dumps(drafter_warmup.to_json(), separators=(",", ":"))
    data = _checked(files)
    meta = metadata(
        sdd,
        configmap_name(sdd, key),
        COMPONENT_PLAN,
        plan_digest=plan.digest,
        annotations=_annotations(plan, key),
    )
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def copy_runner_script(into: str) -> str:
    """The init container's script: the runner and the contract, copied under ``into``."""
    return _COPY_RUNNER.format(dir=into)


def runner_copy(operator_image: str) -> Manifest:
    command = ["python", "-c", copy_runner_script(RUNNER_DIR)]
    mounts = [{"name": VOLUME_RUNNER, "mountPath": RUNNER_DIR}]
    return operator_container("copy-runner", operator_image, command, mounts)


def _warmup_container(sdd: SpecDecodeDeployment) -> Manifest:
    env = container_env(sdd)
    mounts = [*engine_mounts(sdd), cache_mount(read_only=False)]
    mounts.append({"name": VOLUME_RUNNER, "mountPath": RUNNER_DIR, "readOnly": True})
    return {
        "name": CONTAINER,
        "image": sdd.spec.image,
        "command": ["/bin/sh", "-c", RUNNER_COMMAND],
        "env": env,
        "ports": [dict(STATUS_PORT)],
        "resources": container_resources(
            sdd.spec.warmup.resources, sdd.spec.engine.tensor_parallel_size
        ),
        "volumeMounts": mounts,
        "securityContext": engine_security(sdd),
        # The runner writes its compact JSON summary here; the handler reads it from the Pod.
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "File",
    }


def _pod_spec(
    sdd: SpecDecodeDeployment,
    configmap: str,
    operator_image: str,
    claim: str | None,
    shards: int = 0,
) -> Manifest:
    # A sharded warmup's Pods read their slice's file beside plan.json (--shards /etc/warmgate).
    slices = tuple(shard_file(i) for i in range(shards))
    volumes = [
        plan_volume(configmap, plan=True, also=slices),
        {"name": VOLUME_RUNNER, "emptyDir": {}},
        cache_volume(sdd, read_only=False, claim_name=claim),
        *shared_volumes(sdd),
    ]
    return {
        "restartPolicy": "Never",
        # One attempt's limit (docs/api.md, warmup.timeoutSeconds); SIGTERM ends the runner
        # with outcome timed_out and a report.
        "activeDeadlineSeconds": sdd.spec.warmup.timeout_seconds,
        "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
        **placement_fields(sdd.spec.warmup.placement),
        **pod_defaults(sdd),
        "initContainers": [runner_copy(operator_image)],
        "containers": [_warmup_container(sdd)],
        "volumes": volumes,
    }


def _failure_policy() -> Manifest:
    """Fail fast on verdicts a retry cannot change; evictions do not count as attempts."""
    return {
        "rules": [
            {
                "action": "FailJob",
                "onExitCodes": {
                    "containerName": CONTAINER,
                    "operator": "In",
                    "values": list(PERMANENT_EXIT_CODES),
                },
            },
            {
                "action": "Ignore",
                "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
            },
        ]
    }


def pod_failure_backoff_s(failures: int) -> int:
    """Seconds the Job controller waits before the Pod that follows ``failures`` failures.

    10 s, doubled per consecutive failure, capped at 10 min (k8s.io/kubernetes v1.37
    pkg/controller/job: DefaultJobPodFailureBackOff, MaxJobPodFailureBackOff, and
    backoff_utils.go getRemainingTimeForFailuresCount).
    """
    if failures <= 0:
        return 0
    return int(min(BACKOFF_BASE_S * 2 ** (failures - 1), BACKOFF_MAX_S))


def job_deadline_s(warmup: WarmupSpec, *, sharded: bool = False) -> int:
    """The Job's activeDeadlineSeconds: every attempt at its worst, the backoffs between them.

    The Job's clock runs from its start, so it must hold, for each of the retries + 1 attempts,
    the time the Pod may stay Pending (the operator fails the warmup after
    pendingTimeoutSeconds), the attempt's own deadline and the termination grace, plus the
    controller's backoff after each failed attempt and some slack for its resyncs. e.g. the
    defaults (3600 s, 2 retries, 1800 s pending): 3 * (1800 + 3600 + 90) + 10 + 20 + 60 =
    16560 s; with retries 6 the backoffs alone are 10 + 20 + ... + 320 = 630 s.
    """
    attempts = warmup.retries + 1
    runs = SHARDED_ATTEMPTS if sharded else 1  # a sharded Pod 0: its slice, then the merge
    attempt = warmup.pending_timeout_seconds + runs * warmup.timeout_seconds + TERMINATION_GRACE_S
    backoff = sum(pod_failure_backoff_s(failures) for failures in range(1, attempts))
    return attempts * attempt + backoff + CONTROLLER_SLACK_S


@dataclass(frozen=True)
class Warmup:
    """The warmup of one plan: the Job, its plan.json ConfigMap and their shared content hash."""

    configmap: Manifest
    job: Manifest
    content: str


def plan_text(runner_plan: Manifest) -> str:
    """plan.json: one line per top-level section, each section compact JSON with sorted keys.

    Not `json.dumps(indent=2)`: Python's indenting encoder is written in Python, and it took
    3.6 ms of every sync of an eagle3 object (a 68 KB file), more than the rest of the sync;
    compact sections go through the C encoder (0.7 ms). The Job's name hashes this text (with
    the whole Job spec, which names the operator image), so the format is part of a release.
    """
    sections = [
        f"  {json.dumps(key)}: {json.dumps(runner_plan[key], sort_keys=True)}"
        for key in sorted(runner_plan)
    ]
    return "{\n" + ",\n".join(sections) + "\n}\n"


def content_text(runner_plan: Manifest) -> str:
    """plan.json as the Job's content hash sees it: without cache.users, which says who else
    uses the claim when the Job was made (a new object in the namespace is no new warmup), and
    cache.namespace (added after Jobs were named: they keep their names)."""
    cache = runner_plan.get("cache")
    if not isinstance(cache, dict) or not set(OUTSIDE_CONTENT) & set(cache):
        return plan_text(runner_plan)
    kept = {key: value for key, value in cache.items() if key not in OUTSIDE_CONTENT}
    return plan_text({**runner_plan, "cache": kept})


def build_warmup(
    sdd: SpecDecodeDeployment,
    plan: BucketPlan,
    *,
    key: str,
    runner_plan: Manifest,
    operator_image: str,
    cache_claim_uid: str | None = None,
    cache_claim: str | None = None,
    shard_plans: dict[str, Manifest] | None = None,
) -> Warmup:
    """The Job that runs `python3 -m warmgate.warmup` in the user's vLLM image on Gaudi nodes,
    and the ConfigMap with its plan.json. ``cache_claim`` replaces the spec's claim name
    (`PlanBundle.cache_claim_name`).

    Both are named after a hash of everything they contain (the runner plan but its
    cache.users, the whole Job spec, the recipe-cache claim's UID), so a changed timeout, retry
    count, placement or resource gets a new Job instead of the old one, and a new Job never
    mounts an old plan.
    """
    shard_plans = shard_plans or {}
    files = {PLAN_FILE: runner_plan, **shard_plans}
    data = _checked({name: plan_text(doc) for name, doc in files.items()})
    annotations = _annotations(plan, key)
    if cache_claim_uid is not None:
        annotations[ANNOTATION_CACHE_CLAIM_UID] = cache_claim_uid
    if sdd.spec.warmup.shards != 1:  # what was asked: the count is kept while it stays
        annotations[ANNOTATION_SHARDS_ASKED] = str(sdd.spec.warmup.shards)
    shards = len(shard_plans)
    unnamed = _job_spec(sdd, "", operator_image, cache_claim, shards)
    hashed = {name: content_text(doc) for name, doc in files.items()}
    content = short_hash(json.dumps([hashed, unnamed, annotations], sort_keys=True))
    name = job_name(sdd, content)
    meta = metadata(sdd, name, COMPONENT_WARMUP, plan_digest=plan.digest, annotations=annotations)
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": copy.deepcopy(meta)}
    configmap["data"] = data
    spec = _job_spec(sdd, name, operator_image, cache_claim, shards)
    if shards:
        one_node_affinity(spec["template"]["spec"], name)
    spec["template"]["metadata"] = {"labels": meta["labels"], "annotations": annotations}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}
    return Warmup(configmap=configmap, job=job, content=content)


def _job_spec(
    sdd: SpecDecodeDeployment,
    configmap: str,
    operator_image: str,
    claim: str | None,
    shards: int = 0,
) -> Manifest:
    warmup = sdd.spec.warmup
    pod = _pod_spec(sdd, configmap, operator_image, claim, shards)
    spec: Manifest = {
        "backoffLimit": warmup.retries,
        # Bounds all attempts together; each Pod has its own activeDeadlineSeconds.
        "activeDeadlineSeconds": job_deadline_s(warmup, sharded=bool(shards)),
        "podFailurePolicy": _failure_policy(),
        "template": {"spec": pod},
    }
    if shards:
        spec.update(indexed_job_fields(shards))
        # Pod 0 warms its slice, then waits for the others and runs the whole plan: two runs.
        pod["activeDeadlineSeconds"] = SHARDED_ATTEMPTS * warmup.timeout_seconds
        pod["containers"][0]["command"] = ["/bin/sh", "-c", SHARDED_COMMAND]
    return spec
