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

A recipe-cache claim this object made from a template is deleted when it is not the claim of
the current template (the template changed or went) and nothing of the object mounts it: not
the desired children, not the Deployment's template (the last verified plan serves from it
while a new one warms), not the served record, not a serving Pod (a Pod of the old template
may still run while the new one rolls out). A finished Job that mounted it runs no Pod again.
A user's existingClaim never carries this object's controller reference: never a candidate.
"""

from __future__ import annotations

from warmgate.api import Manifest, SpecDecodeDeployment
from warmgate.api.constants import ANNOTATION_CACHE_KEY, COMPONENT_WARMUP, LABEL_COMPONENT
from warmgate.reconcile.sync.actions import Action, Delete, Event
from warmgate.reconcile.sync.decide_warmup import key_of, succeeded
from warmgate.reconcile.sync.observed import Observed, name_of
from warmgate.reconcile.sync.subject import Subject
from warmgate.resources import Children
from warmgate.resources.cache_claim import build_cache_claim
from warmgate.resources.names import COMPONENT_PLAN


def decide_collect(of: Subject, seen: Observed, current: Children | None) -> tuple[Action, ...]:
    """Delete this object's superseded Jobs and unreferenced ConfigMaps: only after a sync
    that read everything (an object's first sync has nothing superseded: no ConfigMaps listed).
    ``of``: the object's names, what of ``seen`` it controls, its served record."""
    if seen.failed or seen.configmaps is None:
        return ()
    deployment = seen.deployment if of.mine.deployment else None
    served = _annotation(deployment, ANNOTATION_CACHE_KEY)
    keys = {k for k in (current.cache_key if current else None, served) if k is not None}
    desired = name_of(current.warmup_job) if current else None
    kept: list[Manifest] = []
    actions: list[Action] = []
    for job in of.mine.jobs:
        name = name_of(job)
        if name == desired or (key_of(job) in keys and succeeded(job)):
            kept.append(job)
        else:
            done = Event("Normal", "Deleted", f"Deleted superseded warmup Job {name}")
            actions.append(Delete("collect", "Job", job, done))
    mounted = _mounted([*kept, *([deployment] if deployment else [])], seen.serving_pods, current)
    record = of.record.record
    if record is not None:  # the served plan's seed file, to restore its Deployment with
        mounted.add(name_of(record.configmap))
    for configmap in of.mine.configmaps:
        component = (configmap["metadata"].get("labels") or {}).get(LABEL_COMPONENT)
        if component not in (COMPONENT_PLAN, COMPONENT_WARMUP) or name_of(configmap) in mounted:
            continue
        actions.append(Delete("collect", "ConfigMap", configmap))
    # A kept Job is finished (or is the desired one, among the children): it mounts nothing.
    serving = [*([deployment] if deployment else []), *([record.deployment] if record else [])]
    return (*actions, *_claims(of, seen, serving, current))


def _claims(
    of: Subject, seen: Observed, owners: list[Manifest], current: Children | None
) -> tuple[Action, ...]:
    """Delete this object's recipe-cache claims that no longer serve it (module docstring)."""
    wanted = {name_of(of.ids.claim) if of.ids.claim is not None else None}
    if seen.claim is not None:  # the template's, or an earlier build's it adopted
        wanted.add(name_of(seen.claim))
    children = [current.warmup_job, current.serving_deployment] if current else []
    in_use = _claims_in(_pod_specs([*owners, *children], seen.serving_pods))
    actions: list[Action] = []
    for claim in of.mine.claims:
        name = name_of(claim)
        gone = bool(claim["metadata"].get("deletionTimestamp"))  # deleted, Pods still on it
        if name in wanted or name in in_use or gone:
            continue
        done = Event("Normal", "Deleted", f"Deleted recipe-cache claim {name}: no longer used")
        actions.append(Delete("collect", "PersistentVolumeClaim", claim, done))
    return tuple(actions)


def claims_to_list(sdd: SpecDecodeDeployment, seen: Observed) -> bool:
    """Whether the sync lists the object's recipe-cache claims: with a claim template (its
    claim may have been made from an older template), or when a Job, the Deployment, a
    ReplicaSet or a serving Pod names a claim that is neither the template's, the user's
    existingClaim nor the weights': what names an old claim finds it, and an object that never
    had one pays no request (the idle resync's reads, docs/benchmarks.md)."""
    template = build_cache_claim(sdd)
    if template is not None:
        return True
    weights = sdd.spec.model.weights
    wanted = {sdd.spec.warmup.cache.existing_claim, weights.claim_name if weights else None}
    owners = [*seen.jobs, *seen.replica_sets, *([seen.deployment] if seen.deployment else [])]
    return bool(_claims_in(_pod_specs(owners, seen.serving_pods)) - wanted)


def _pod_specs(owners: list[Manifest], pods: tuple[Manifest, ...]) -> list[Manifest]:
    """The Pod specs of workloads (their templates) and of Pods."""
    specs = [(o.get("spec") or {}).get("template", {}).get("spec") or {} for o in owners]
    return specs + [p.get("spec") or {} for p in pods]


def _claims_in(specs: list[Manifest]) -> set[str]:
    return {
        volume["persistentVolumeClaim"]["claimName"]
        for spec in specs
        for volume in spec.get("volumes") or []
        if "persistentVolumeClaim" in volume
    }


def _mounted(
    owners: list[Manifest], pods: tuple[Manifest, ...], current: Children | None
) -> set[str]:
    """ConfigMap names the desired children, the kept workloads or the serving Pods use."""
    specs = _pod_specs(owners, pods)
    names = {
        volume["configMap"]["name"]
        for spec in specs
        for volume in spec.get("volumes") or []
        if "configMap" in volume
    }
    if current is not None:
        names |= {name_of(current.plan_configmap), name_of(current.warmup_configmap)}
    return names


def _annotation(obj: Manifest | None, key: str) -> str | None:
    return None if obj is None else (obj["metadata"].get("annotations") or {}).get(key)
