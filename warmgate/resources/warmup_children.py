"""The warmup children: the plan ConfigMap, the warmup Job and the recipe-cache claim."""

from __future__ import annotations

import json
from typing import Final

from warmgate.api import Manifest, SpecDecodeDeployment, container_resources
from warmgate.api.constants import (
    ANNOTATION_CACHE_KEY,
    ANNOTATION_PLAN_HASH,
    COMPONENT_WARMUP,
    RUNNER_STATUS_PORT,
    RUNNER_STATUS_PORT_NAME,
)
from warmgate.buckets import BucketPlan
from warmgate.resources.cache_key import key_hash
from warmgate.resources.mounts import BUCKET_FILE, PLAN_DIR, PLAN_FILE, RUNNER_DIR
from warmgate.resources.names import (
    COMPONENT_CACHE,
    COMPONENT_PLAN,
    child_name,
    metadata,
    parent_name,
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
from warmgate.resources.runner_plan import TERMINATION_LOG
from warmgate.resources.vllm_engine import container_env

CONTAINER: Final = "warmup"
VOLUME_RUNNER: Final = "runner"
# A ConfigMap holds at most 1 MiB (etcd's object limit); a plan above it cannot be mounted.
CONFIGMAP_LIMIT: Final = 1024 * 1024
# Exit codes that a retry cannot change (docs/runner.md, "Exit codes"): plan_invalid,
# unwarmed_shapes, plan_mismatch, drafter_unverified (a required compile hook that cannot attach
# to this image). They fail the Job at once instead of burning retries.
PERMANENT_EXIT_CODES: Final = (2, 3, 4, 11)
# Copies warmgate/__init__.py and warmgate/warmup/*.py (standard library only) out of the
# operator image into the emptyDir the vLLM image puts on PYTHONPATH (docs/runner.md).
_COPY_RUNNER: Final = """\
import pathlib, shutil, warmgate
src = pathlib.Path(warmgate.__file__).parent
dst = pathlib.Path("{dir}") / "warmgate"
shutil.rmtree(dst, ignore_errors=True)
(dst / "warmup").mkdir(parents=True)
shutil.copyfile(src / "__init__.py", dst / "__init__.py")
for f in sorted((src / "warmup").glob("*.py")):
    shutil.copyfile(f, dst / "warmup" / f.name)
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
# The runner's status endpoint: progress for the operator (docs/operator.md).
STATUS_PORT: Final = {
    "name": RUNNER_STATUS_PORT_NAME,
    "containerPort": RUNNER_STATUS_PORT,
    "protocol": "TCP",
}


def job_name(sdd: SpecDecodeDeployment, key: str) -> str:
    """`<parent>-warmup-<hash>`: one Job per cache key (stack identity + plan digest)."""
    return child_name(parent_name(sdd), COMPONENT_WARMUP, key_hash(key))


def configmap_name(sdd: SpecDecodeDeployment, key: str) -> str:
    """`<parent>-plan-<hash>`: the plan files of one cache key."""
    return child_name(parent_name(sdd), COMPONENT_PLAN, key_hash(key))


def _annotations(plan: BucketPlan, key: str) -> dict[str, str]:
    return {ANNOTATION_PLAN_HASH: plan.digest, ANNOTATION_CACHE_KEY: key}


def build_plan_configmap(
    sdd: SpecDecodeDeployment, plan: BucketPlan, *, key: str, runner_plan: Manifest
) -> Manifest:
    """The ConfigMap with plan.json (the Job's runner) and buckets.txt (serving's seed file)."""
    data = {
        PLAN_FILE: json.dumps(runner_plan, indent=2, sort_keys=True) + "\n",
        BUCKET_FILE: runner_plan["buckets"]["seed_file_text"],
    }
    size = sum(len(v.encode("utf-8")) for v in data.values())
    if size > CONFIGMAP_LIMIT:
        raise ValueError(f"the plan files take {size} bytes, over a ConfigMap's 1 MiB")
    annotations = _annotations(plan, key)
    name = configmap_name(sdd, key)
    meta = metadata(sdd, name, COMPONENT_PLAN, plan_digest=plan.digest, annotations=annotations)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def runner_copy(operator_image: str) -> Manifest:
    command = ["python", "-c", _COPY_RUNNER.format(dir=RUNNER_DIR)]
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
        "securityContext": engine_security(),
        # The runner writes its compact JSON summary here; the handler reads it from the Pod.
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "File",
    }


def _pod_spec(sdd: SpecDecodeDeployment, key: str, operator_image: str) -> Manifest:
    volumes = [
        plan_volume(configmap_name(sdd, key), plan=True),
        {"name": VOLUME_RUNNER, "emptyDir": {}},
        cache_volume(sdd, read_only=False),
        *shared_volumes(sdd),
    ]
    return {
        "restartPolicy": "Never",
        # One attempt's limit (docs/api.md, warmup.timeoutSeconds); SIGTERM ends the runner
        # with outcome timed_out and a report.
        "activeDeadlineSeconds": sdd.spec.warmup.timeout_seconds,
        "terminationGracePeriodSeconds": 90,
        **placement_fields(sdd.spec.warmup.placement),
        **pod_defaults(),
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


def build_warmup_job(
    sdd: SpecDecodeDeployment, plan: BucketPlan, *, key: str, operator_image: str
) -> Manifest:
    """The Job that runs `python3 -m warmgate.warmup` in the user's vLLM image on Gaudi nodes."""
    warmup = sdd.spec.warmup
    annotations = _annotations(plan, key)
    meta = metadata(
        sdd, job_name(sdd, key), COMPONENT_WARMUP, plan_digest=plan.digest, annotations=annotations
    )
    template_meta = {"labels": meta["labels"], "annotations": annotations}
    spec: Manifest = {
        "backoffLimit": warmup.retries,
        # Bounds all attempts together; each Pod has its own activeDeadlineSeconds.
        "activeDeadlineSeconds": warmup.timeout_seconds * (warmup.retries + 1) + 300,
        "podFailurePolicy": _failure_policy(),
        "template": {"metadata": template_meta, "spec": _pod_spec(sdd, key, operator_image)},
    }
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def build_cache_claim(sdd: SpecDecodeDeployment) -> Manifest | None:
    """The recipe-cache claim from spec.warmup.cache.claimTemplate, or None without a template.

    Not tied to a plan: every cache key is its own folder inside (docs/runner.md, "Cache"), so
    one claim serves all plans of the parent.
    """
    template = sdd.spec.warmup.cache.claim_template
    if template is None:
        return None
    spec: Manifest = {
        "accessModes": list(template.access_modes),
        "resources": {"requests": {"storage": template.size}},
        "volumeMode": "Filesystem",
    }
    if template.storage_class_name is not None:
        spec["storageClassName"] = template.storage_class_name
    meta = metadata(sdd, child_name(parent_name(sdd), COMPONENT_CACHE), COMPONENT_CACHE)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}
