"""Pod pieces the warmup Job and the serving Deployment share: volumes, placement, security."""

from __future__ import annotations

from typing import Final

from warmgate.api import Manifest, Placement, SpecDecodeDeployment
from warmgate.api.resource import DEFAULT_RUN_AS_USER
from warmgate.resources.cache_claim import template_claim_name
from warmgate.resources.mounts import (
    BUCKET_FILE,
    CACHE_DIR,
    LOCAL_DIR,
    PLAN_DIR,
    PLAN_FILE,
    WEIGHTS_DIR,
)

VOLUME_PLAN: Final = "plan"
VOLUME_CACHE: Final = "recipe-cache"
VOLUME_LOCAL: Final = "local"
VOLUME_WEIGHTS: Final = "weights"
VOLUME_SHM: Final = "shm"
# Small, fixed requests for the operator-image init containers (a copy of a few files).
INIT_RESOURCES: Final = {
    "requests": {"cpu": "50m", "memory": "64Mi"},
    "limits": {"memory": "256Mi"},
}


def pod_defaults(sdd: SpecDecodeDeployment) -> Manifest:
    """PodSpec fields both pods set: no Service links, no API token, the runtime's seccomp.

    vLLM reads every `VLLM_*` variable; a Service named `vllm` in the namespace would inject
    VLLM_PORT=tcp://... and the engine refuses to start (vLLM's Kubernetes deployment docs).
    Neither Pod talks to the API server, so no ServiceAccount token is mounted. The seccomp
    profile RuntimeDefault is what Pod Security "restricted" asks; "baseline" is met without
    it. With a user (`run_as_user`), every container runs as it, and volumes that support it
    (emptyDir, most claims) are group-owned by it (fsGroup), so the non-root engine can write
    the recipe cache the init containers restored.
    """
    security: Manifest = {"seccompProfile": {"type": "RuntimeDefault"}}
    user = run_as_user(sdd)
    if user is not None:
        security.update(runAsNonRoot=True, runAsUser=user, fsGroup=user)
    return {
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "securityContext": security,
    }


def run_as_user(sdd: SpecDecodeDeployment) -> int | None:
    """The Pods' numeric user: spec.runAsUser, else 1000 under "restricted" (issue 23 item 14:
    restricted by default), else (baseline) None, the image's own user."""
    if sdd.spec.run_as_user is not None:
        return sdd.spec.run_as_user
    return DEFAULT_RUN_AS_USER if sdd.spec.pod_security == "restricted" else None


def placement_fields(placement: Placement | None) -> Manifest:
    """nodeSelector, tolerations and affinity of a PodSpec (unset fields stay absent)."""
    if placement is None:
        return {}
    fields: Manifest = {}
    if placement.node_selector:
        fields["nodeSelector"] = dict(placement.node_selector)
    if placement.tolerations:
        fields["tolerations"] = [t.to_dict() for t in placement.tolerations]
    if placement.affinity:
        fields["affinity"] = dict(placement.affinity)
    return fields


def cache_claim_name(sdd: SpecDecodeDeployment) -> str | None:
    """The recipe-cache claim: the existing one, the operator's from the template, or None."""
    cache = sdd.spec.warmup.cache
    if cache.existing_claim is not None:
        return cache.existing_claim
    if cache.claim_template is not None:
        return template_claim_name(sdd, cache.claim_template)
    return None


def cache_volume(
    sdd: SpecDecodeDeployment, *, read_only: bool, claim_name: str | None = None
) -> Manifest:
    """The recipe cache volume; an emptyDir without a claim (docs/api.md: nothing is reused).
    ``claim_name`` replaces the spec's claim name (`PlanBundle.cache_claim_name`)."""
    claim = cache_claim_name(sdd)
    if claim is not None and claim_name is not None:
        claim = claim_name
    if claim is None:
        return {"name": VOLUME_CACHE, "emptyDir": {}}
    source = {"claimName": claim, "readOnly": read_only}
    return {"name": VOLUME_CACHE, "persistentVolumeClaim": source}


def plan_volume(configmap: str, *, plan: bool, also: tuple[str, ...] = ()) -> Manifest:
    """The plan ConfigMap: plan.json for the runner, the seed bucket file for serving, and the
    ``also`` keys (serving: the direct drafter warmup's document, issue 33)."""
    keys = [PLAN_FILE if plan else BUCKET_FILE, *also]
    items = [{"key": key, "path": key} for key in keys]
    return {"name": VOLUME_PLAN, "configMap": {"name": configmap, "items": items}}


def shared_volumes(sdd: SpecDecodeDeployment) -> list[Manifest]:
    """Local disk for the recipe cache (§4.6: never use it from NFS), /dev/shm, the weights."""
    volumes: list[Manifest] = [
        {"name": VOLUME_LOCAL, "emptyDir": {}},
        # vLLM's tensor-parallel workers exchange tensors through shared memory.
        {"name": VOLUME_SHM, "emptyDir": {"medium": "Memory"}},
    ]
    weights = sdd.spec.model.weights
    if weights is not None:
        source = {"claimName": weights.claim_name, "readOnly": True}
        volumes.append({"name": VOLUME_WEIGHTS, "persistentVolumeClaim": source})
    return volumes


def engine_mounts(sdd: SpecDecodeDeployment) -> list[Manifest]:
    """Mounts of the vLLM container: plan files, local disk, /dev/shm, the weights."""
    mounts: list[Manifest] = [
        {"name": VOLUME_PLAN, "mountPath": PLAN_DIR, "readOnly": True},
        {"name": VOLUME_LOCAL, "mountPath": LOCAL_DIR},
        {"name": VOLUME_SHM, "mountPath": "/dev/shm"},
    ]
    if sdd.spec.model.weights is not None:
        mounts.append({"name": VOLUME_WEIGHTS, "mountPath": WEIGHTS_DIR, "readOnly": True})
    return mounts


def cache_mount(*, read_only: bool) -> Manifest:
    """The shared recipe cache volume at the runner's `cache.volume_dir`."""
    return {"name": VOLUME_CACHE, "mountPath": CACHE_DIR, "readOnly": read_only}


def engine_security(sdd: SpecDecodeDeployment) -> Manifest:
    """The vLLM container: no privilege escalation (Pod Security "baseline" and more).

    Under "restricted" (the default) it also drops every capability and must run as non-root
    (`pod_defaults` names the user). Under "baseline" the user stays the image's own (root in
    the vLLM-Gaudi images we know of) with the runtime's default capabilities, unless
    spec.runAsUser names one.
    """
    security: Manifest = {"allowPrivilegeEscalation": False}
    if sdd.spec.pod_security == "restricted":
        security.update(runAsNonRoot=True, capabilities={"drop": ["ALL"]})
    elif sdd.spec.run_as_user is not None:
        security.update(runAsNonRoot=True)
    return security


def operator_security() -> Manifest:
    """Operator-image init containers: non-root (uid 65532 in the image), read-only, no caps."""
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }


def operator_container(
    name: str, image: str, command: list[str], mounts: list[Manifest]
) -> Manifest:
    """An init container running the operator image (which ships the runner package)."""
    return {
        "name": name,
        "image": image,
        "command": command,
        "volumeMounts": mounts,
        "resources": INIT_RESOURCES,
        "securityContext": operator_security(),
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
