"""Garbage of superseded plans: their Jobs (and so their Pods) and unreferenced ConfigMaps.

Each plan, and each change of what a warmup runs, leaves a Job and ConfigMaps; a superseded
Job may still run and hold Gaudi cards for hours. After a sync that read everything it needed,
the operator keeps:

- Jobs of the current plan's warmup content, and finished (Complete) Jobs of the current or
  of the served plan, the record of their verdict;
- ConfigMaps that the desired children, a kept Job, the Deployment's template or a running
  serving Pod mount.

Everything else this object controls is deleted, a running Job included (its Pods stop with
it, background propagation). Only objects whose controller owner reference is this object's
UID are touched. Recipe-cache entries are pruned by the runner (`warmup.cache.prune`).
"""

from __future__ import annotations

from warmgate.api import Manifest
from warmgate.api.constants import ANNOTATION_CACHE_KEY, COMPONENT_WARMUP, LABEL_COMPONENT
from warmgate.reconcile.stage import Stage, controlled_by
from warmgate.reconcile.warm_stage import warmup_jobs
from warmgate.resources import Children, serving_name, serving_selector
from warmgate.resources.names import COMPONENT_PLAN


def collect(stage: Stage, current: Children | None) -> None:
    """Delete this object's superseded Jobs and unreferenced ConfigMaps."""
    deployment = stage.cluster.read("Deployment", stage.namespace, serving_name(stage.sdd))
    if deployment is not None and not controlled_by(deployment, stage.uid):
        deployment = None
    served = _annotation(deployment, ANNOTATION_CACHE_KEY)
    keys = {k for k in (current.cache_key if current else None, served) if k is not None}
    desired = current.warmup_job["metadata"]["name"] if current else None
    kept: list[Manifest] = []
    for job in warmup_jobs(stage):
        name = job["metadata"]["name"]
        if name == desired or (_annotation(job, ANNOTATION_CACHE_KEY) in keys and _complete(job)):
            kept.append(job)
        elif stage.cluster.delete("Job", stage.namespace, name, job["metadata"]["uid"]):
            stage.events.post("Normal", "Deleted", f"Deleted superseded warmup Job {name}")
    pods = stage.cluster.list_pods(stage.namespace, serving_selector(stage.sdd))
    mounted = _mounted([*kept, *([deployment] if deployment else [])], pods, current)
    _configmaps(stage, mounted)


def _configmaps(stage: Stage, mounted: set[str]) -> None:
    for configmap in stage.cluster.list_objects("ConfigMap", stage.namespace, stage.selector()):
        meta = configmap["metadata"]
        component = (meta.get("labels") or {}).get(LABEL_COMPONENT)
        if component not in (COMPONENT_PLAN, COMPONENT_WARMUP) or meta["name"] in mounted:
            continue
        if controlled_by(configmap, stage.uid):
            stage.cluster.delete("ConfigMap", stage.namespace, meta["name"], meta["uid"])


def _mounted(owners: list[Manifest], pods: list[Manifest], current: Children | None) -> set[str]:
    """ConfigMap names the desired children, the kept workloads or the serving Pods use."""
    specs = [(o.get("spec") or {}).get("template", {}).get("spec") or {} for o in owners]
    specs += [p.get("spec") or {} for p in pods]
    names = {
        volume["configMap"]["name"]
        for spec in specs
        for volume in spec.get("volumes") or []
        if "configMap" in volume
    }
    if current is not None:
        names |= {
            current.plan_configmap["metadata"]["name"],
            current.warmup_configmap["metadata"]["name"],
        }
    return names


def _annotation(obj: Manifest | None, key: str) -> str | None:
    return None if obj is None else (obj["metadata"].get("annotations") or {}).get(key)


def _complete(job: Manifest) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Complete" and c.get("status") == "True" for c in conditions)
