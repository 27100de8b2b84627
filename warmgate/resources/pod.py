"""Pod pieces the warmup Job and the serving Deployment share: volumes, placement, security."""

from __future__ import annotations

from typing import Final

from warmgate.api import Manifest, Placement, SpecDecodeDeployment
from warmgate.resources.mounts import (
    BUCKET_FILE,
    CACHE_DIR,
    LOCAL_DIR,
    PLAN_DIR,
    PLAN_FILE,
    WEIGHTS_DIR,
)
from warmgate.resources.names import COMPONENT_CACHE, child_name, parent_name

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
    it. With ``spec.runAsUser`` every container runs as that user, and volumes that support
    it (emptyDir, most claims) are group-owned by it (fsGroup), so the non-root engine can
    write the recipe cache the init containers restored.
    """
    security: Manifest = {"seccompProfile": {"type": "RuntimeDefault"}}
    user = sdd.spec.run_as_user
    if user is not None:
        security.update(runAsNonRoot=True, runAsUser=user, fsGroup=user)
    return {
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "securityContext": security,
    }


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
        return child_name(parent_name(sdd), COMPONENT_CACHE)
    return None


def cache_volume(sdd: SpecDecodeDeployment, *, read_only: bool) -> Manifest:
    """The recipe cache volume; an emptyDir without a claim (docs/api.md: nothing is reused)."""
    claim = cache_claim_name(sdd)
    if claim is None:
        return {"name": VOLUME_CACHE, "emptyDir": {}}
    source = {"claimName": claim, "readOnly": read_only}
    return {"name": VOLUME_CACHE, "persistentVolumeClaim": source}


def plan_volume(configmap: str, *, plan: bool) -> Manifest:
    """The plan ConfigMap: plan.json for the runner, the seed bucket file for serving."""
    key = PLAN_FILE if plan else BUCKET_FILE
    items = [{"key": key, "path": key}]
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

    Without ``spec.runAsUser`` the user stays the image's own (root in the vLLM-Gaudi images
    we know of) with the runtime's default capabilities, which "baseline" allows. With it the
    container also drops every capability and must run as non-root: "restricted".
    """
    security: Manifest = {"allowPrivilegeEscalation": False}
    if sdd.spec.run_as_user is not None:
        security.update(runAsNonRoot=True, capabilities={"drop": ["ALL"]})
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
