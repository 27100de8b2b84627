"""Does a warmup Pod run the pod template the operator wrote into its Job? (issue 23 item 3)

Labels, owner references and finalizers are the creator's to set: anyone who may create Pods
in the namespace can make a Pod the Job controller adopts and counts (docs/operator.md, "Who
can forge what"). What such a Pod cannot do and still forge a verdict is run the operator's
containers: the same images, commands, arguments and environment, mounting the same plan, the
runner copied by the operator's init container. A Pod that does runs the real runner on the
real plan, and its summary is the runner's. So the verdict is read only from Pods whose
containers are the template's, compared on what the operator itself writes (never on what the
API server defaults or rewrites: pull policy, resources, tolerations, the token volume).

Containers the template does not name (a service mesh's sidecar a webhook injects) are
allowed only when they cannot reach the runner: they mount none of the volumes the template's
containers mount, the Pod shares no process namespace, and no volume is a hostPath.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from warmgate.api import Manifest

CONTAINER_LISTS = ("initContainers", "containers")
# Compared as they are: the operator writes them and the API server leaves them alone.
PLAIN_FIELDS = ("image", "command", "args", "workingDir", "lifecycle", "terminationMessagePath")
# What the API server writes where the operator wrote nothing (the Job's stored template and
# its Pods have it; the template the operator builds may not).
DEFAULTS = {"terminationMessagePath": "/dev/termination-log"}
# A volume source's reference (the ConfigMap, claim or Secret it takes its files from).
SOURCE_NAMES = {"configMap": "name", "persistentVolumeClaim": "claimName", "secret": "secretName"}


def template_mismatch(pod: Manifest, template: Manifest | None) -> str | None:
    """What in ``pod`` differs from the Job's pod ``template``, or None when it runs it."""
    want = (template or {}).get("spec") or {}
    if not want.get("containers"):
        return "its Job has no pod template"
    spec = pod.get("spec") or {}
    for kind in CONTAINER_LISTS:
        found = {c.get("name"): c for c in spec.get(kind) or []}
        for container in want.get(kind) or []:
            name = container.get("name")
            why = _container_mismatch(found.get(name), container)
            if why is not None:
                return f"container {name}: {why}"
    return _volumes_mismatch(spec, want) or _foreign_reach(spec, want)


def _container_mismatch(got: Manifest | None, want: Manifest) -> str | None:
    if got is None:
        return "missing"
    for field in PLAIN_FIELDS:
        default = DEFAULTS.get(field)
        if _canonical(got.get(field) or default) != _canonical(want.get(field) or default):
            return f"{field} differs"
    if _env(got, job_index=not _has_index(want)) != _env(want):
        return "env differs"
    if _canonical(got.get("envFrom")) != _canonical(want.get("envFrom")):
        return "envFrom differs"
    if _mounts(got) != _mounts(want):
        return "volumeMounts differ"
    return None


def _volumes_mismatch(spec: Manifest, want: Manifest) -> str | None:
    """Each volume of the template with the same source in the Pod."""
    found = {v.get("name"): _source(v) for v in spec.get("volumes") or []}
    for volume in want.get("volumes") or []:
        if found.get(volume.get("name")) != _source(volume):
            return f"volume {volume.get('name')} differs"
    return None


def _foreign_reach(spec: Manifest, want: Manifest) -> str | None:
    """A container the template does not name that could reach the runner's files or process."""
    if spec.get("shareProcessNamespace") and not want.get("shareProcessNamespace"):
        return "it shares its process namespace"
    ours = {v.get("name") for v in want.get("volumes") or []}
    for volume in spec.get("volumes") or []:
        if "hostPath" in volume and volume.get("name") not in ours:
            return f"volume {volume.get('name')} is a hostPath"
    named = {c.get("name") for kind in CONTAINER_LISTS for c in want.get(kind) or []}
    for container in _all_containers(spec):
        shared = {m.get("name") for m in container.get("volumeMounts") or []} & ours
        if container.get("name") not in named and shared:
            return f"container {container.get('name')} mounts {sorted(shared)[0]}"
    return None


def _all_containers(spec: Manifest) -> Iterator[Manifest]:
    for kind in (*CONTAINER_LISTS, "ephemeralContainers"):
        yield from spec.get(kind) or []


def _source(volume: Manifest) -> tuple[str, str, str] | None:
    """(source kind, what it refers to, which keys): ('configMap', 'x-plan', '[...]')."""
    for kind, value in volume.items():
        if kind != "name" and isinstance(value, dict):
            ref = str(value.get(SOURCE_NAMES.get(kind, ""), ""))
            return kind, ref, _canonical(value.get("items"))
    return None


# What the Job controller adds to every container of an Indexed Job's Pods (a sharded warmup,
# issue 38; k8s.io/kubernetes pkg/controller/job/indexed_job_utils.go): the Pod's completion
# index, from its own annotation (or, with the PodIndexLabel feature, label). It only tells the
# runner which slice to run; a Pod whose runner ran another slice than its index speaks for
# another key and is not counted (reconcile/sync/warmup_shards.py).
INDEX_ENV = "JOB_COMPLETION_INDEX"
INDEX_PATHS = frozenset(
    f"metadata.{kind}['batch.kubernetes.io/job-completion-index']"
    for kind in ("annotations", "labels")
)


def _has_index(container: Manifest) -> bool:
    return any(var.get("name") == INDEX_ENV for var in container.get("env") or [])


def _injected_index(var: Manifest) -> bool:
    ref = (var.get("valueFrom") or {}).get("fieldRef") or {}
    return var.get("name") == INDEX_ENV and ref.get("fieldPath") in INDEX_PATHS


def _env(container: Manifest, *, job_index: bool = False) -> list[tuple[str, str, str]]:
    """(name, value, source) per variable, in order ($(VAR) expansion depends on it); the
    fieldRef's apiVersion and the resourceFieldRef's divisor are the server's defaults.
    ``job_index``: leave out the completion index the Job controller adds (`INDEX_ENV`)."""
    variables = []
    for var in container.get("env") or []:
        if job_index and _injected_index(var):
            continue
        source = dict(var.get("valueFrom") or {})
        if "fieldRef" in source:
            source["fieldRef"] = {"fieldPath": source["fieldRef"].get("fieldPath")}
        if "resourceFieldRef" in source:
            ref = source["resourceFieldRef"]
            source["resourceFieldRef"] = {k: ref.get(k) for k in ("resource", "containerName")}
        variables.append((str(var.get("name")), str(var.get("value") or ""), _canonical(source)))
    return variables


def _mounts(container: Manifest) -> list[tuple[str, str, str, bool]]:
    """(volume, path, subPath, read-only) per mount; an omitted readOnly is false."""
    return sorted(
        (
            str(m.get("name")),
            str(m.get("mountPath")),
            str(m.get("subPath") or ""),
            bool(m.get("readOnly")),
        )
        for m in container.get("volumeMounts") or []
    )


def _canonical(value: Any) -> str:
    return json.dumps(value or None, sort_keys=True)


def job_mismatch(job: Manifest, desired: Manifest) -> str | None:
    """What in a stored Job's pod template differs from the template the operator builds for
    this plan (``desired``), or None. A Job's template cannot be changed once created, so a
    Job of this object that differs was not created by this operator from this spec (one
    made with a copied owner reference). Each Job mounts the plan.json ConfigMap named after
    itself: a Job of the same plan under another name (since-changed timeouts) matches."""
    return template_mismatch(_own_plan(job), _own_plan(desired))


def _own_plan(job: Manifest) -> Manifest:
    """The Job's pod template, its own name made neutral where a ConfigMap volume takes it."""
    name = (job.get("metadata") or {}).get("name")
    template = json.loads(json.dumps((job.get("spec") or {}).get("template") or {}))
    for volume in (template.get("spec") or {}).get("volumes") or []:
        if (volume.get("configMap") or {}).get("name") == name:
            volume["configMap"]["name"] = "<the Job's own>"
    return dict(template)
