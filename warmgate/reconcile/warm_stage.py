"""The warm step of a sync: the plan's children, its warmup Job, and the Warmed verdict.

The Job and its plan.json are named after their content, so a spec change that touches the
warmup (timeout, retries, placement, resources, the cache claim) gets a new Job: an
unsucceeded Job of the same plan with other content is deleted first (it may hold Gaudi
cards), then the new one is created. A Job whose Pod waited past the pending deadline is
stopped (suspended) and marked with its verdict, so it is not retried until the spec changes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from warmgate.api import Manifest
from warmgate.api.conditions import get_condition
from warmgate.api.constants import (
    ANNOTATION_CACHE_CLAIM_UID,
    ANNOTATION_CACHE_KEY,
    ANNOTATION_WARMUP_FAILED,
    COMPONENT_WARMUP,
    WARMED,
    Reason,
)
from warmgate.api.status import WarmupSummary
from warmgate.reconcile.cluster import CONTROLLER_UID_LABEL, ClusterError
from warmgate.reconcile.observation import with_progress
from warmgate.reconcile.plan_evaluation import total_buckets
from warmgate.reconcile.planning import PlanningResult
from warmgate.reconcile.stage import Stage, controlled_by
from warmgate.reconcile.verdict import Verdict, one_line
from warmgate.reconcile.warmup_state import (
    Observed,
    WarmupState,
    evaluate_warmup,
    owned_pods,
    remembered,
)
from warmgate.resources import Children, PlanToRun, cache_key, desired_children
from warmgate.resources.pod import cache_claim_name
from warmgate.resources.warmup_children import build_cache_claim


@dataclass(frozen=True)
class Warm:
    """What the warm step found: the verdict, the current plan's children, the verified ones."""

    state: WarmupState | None = None
    children: Children | None = None
    verified: Children | None = None


def warm(stage: Stage, result: PlanningResult) -> Warm:
    """The warmup state of the plan, and its children (for serving once verified)."""
    recorded = stage.old.warmup
    to_run = result.to_run(kv_blocks=recorded.kv_blocks if recorded else None)
    if to_run is None:
        return Warm()
    key = cache_key(stage.sdd, to_run.buckets)
    try:
        to_run = replace(to_run, cache_claim_uid=_claim_uid(stage))
        children = desired_children(stage.sdd, to_run, stage.settings)
    except ValueError as exc:  # the same spec and plan always fail: no retry helps
        verdict = Verdict("False", Reason.BUILD_FAILED, f"Cannot build the warmup: {one_line(exc)}")
        return Warm(WarmupState(verdict, WarmupSummary(cache_key=key), stalled=True))
    except ClusterError as exc:
        return _last_known(stage, key, to_run, stage.failed("Could not read the cache claim", exc))
    try:
        state = _warmup(stage, children, to_run)
    except ClusterError as exc:
        message = stage.failed("Could not create or read the warmup Job", exc)
        return _last_known(stage, key, to_run, message, children)
    if not state.verdict.holds:
        return Warm(state, children)
    measured = state.summary_of_run.kv_blocks if state.summary_of_run else None
    verified = children
    if measured != to_run.kv_blocks:  # verified just now: serving pins what the runner measured
        verified = desired_children(stage.sdd, replace(to_run, kv_blocks=measured), stage.settings)
    return Warm(state, children, verified)


def _claim_uid(stage: Stage) -> str | None:
    """The UID of the recipe-cache claim (created first from the template); None without one,
    or while an existing claim the spec names does not exist."""
    name = cache_claim_name(stage.sdd)
    if name is None:
        return None
    claim = stage.cluster.read("PersistentVolumeClaim", stage.namespace, name)
    template = build_cache_claim(stage.sdd)
    if claim is None and template is not None:
        created = stage.create((template,))
        if created:
            claim = created[0]
        else:  # someone else created it meanwhile
            claim = stage.cluster.read("PersistentVolumeClaim", stage.namespace, name)
    return str(claim["metadata"]["uid"]) if claim is not None else None


def _last_known(
    stage: Stage, key: str, to_run: PlanToRun, message: str, children: Children | None = None
) -> Warm:
    """An API failure: what the status said about this plan stays (and serving with it); with
    no record of this plan, Warmed is Unknown and says what failed."""
    old = stage.old
    warmed = get_condition(old.conditions, WARMED)
    if warmed is not None and old.warmup is not None and old.warmup.cache_key == key:
        verdict = Verdict(warmed.status, warmed.reason, warmed.message)
        state = WarmupState(verdict, old.warmup)
        if not verdict.holds:
            return Warm(state, children)
        kept = replace(to_run, cache_claim_uid=old.warmup.cache_claim_uid)
        return Warm(state, children, desired_children(stage.sdd, kept, stage.settings))
    verdict = Verdict("Unknown", Reason.WARMUP_PENDING, message)
    return Warm(WarmupState(verdict, WarmupSummary(cache_key=key)), children)


def _warmup(stage: Stage, children: Children, to_run: PlanToRun) -> WarmupState:
    """The recorded verdict of this plan, else the verdict of its Job (created when missing)."""
    key, old, claim = children.cache_key, stage.old, to_run.cache_claim_uid
    known = remembered(get_condition(old.conditions, WARMED), old.warmup, key, claim)
    if known is not None:
        return known
    job, new = _current_or_new(stage, children)
    # A Job this very sync created has no Pods or Events worth two reads yet: the Job
    # controller's first change to it wakes the object (the watch of its Jobs).
    state, pods = (evaluate_warmup(job, [], key), []) if new else _evaluate(stage, job, key)
    state = with_progress(
        stage.sdd,
        state,
        pods,
        planned=total_buckets(to_run.buckets),
        estimate_s=to_run.estimated_warmup_s,
        endpoints=stage.endpoints,
    )
    if state.stop and job is not None:
        _stop(stage, job, state.verdict)
    if state.rerun and job is not None:
        _rerun(stage, job, state.verdict)
    if state.verdict.holds:  # the runner checked every planned bucket against the engine's log
        update = {"warmed_buckets": total_buckets(to_run.buckets), "cache_claim_uid": claim}
        state = replace(state, summary=state.summary.model_copy(update=update))
    return state


def _current_or_new(stage: Stage, children: Children) -> tuple[Manifest | None, bool]:
    """The Job of this plan, created with its ConfigMaps when missing; whether this sync did."""
    jobs = warmup_jobs(stage)
    job = _current_job(stage, jobs, children)
    if job is not None:
        return job, False
    _replace_stale(stage, jobs, children)
    created = [m for m in stage.create(children.warmup) if m.get("kind") == "Job"]
    if created:
        return created[0], True
    name = children.warmup_job["metadata"]["name"]  # someone else created it meanwhile
    return stage.cluster.read("Job", stage.namespace, name), False


def warmup_jobs(stage: Stage) -> list[Manifest]:
    """This object's warmup Jobs (label and controller owner reference)."""
    jobs = stage.cluster.list_objects("Job", stage.namespace, stage.selector(COMPONENT_WARMUP))
    return [job for job in jobs if controlled_by(job, stage.uid)]


def _key_of(job: Manifest) -> str | None:
    return (job["metadata"].get("annotations") or {}).get(ANNOTATION_CACHE_KEY)


def _current_job(stage: Stage, jobs: list[Manifest], children: Children) -> Manifest | None:
    """The Job of the desired content, else one of this plan that the runner verified (the
    record of a warmup whose status was lost, with since-changed timeouts)."""
    name = children.warmup_job["metadata"]["name"]
    same = [job for job in jobs if _key_of(job) == children.cache_key]
    desired = next((job for job in same if job["metadata"]["name"] == name), None)
    if desired is not None:
        return desired
    claim = _claim_of(children.warmup_job)
    for job in same:  # only one that published to the claim in use: a new claim is empty
        if _claim_of(job) == claim and _evaluate(stage, job, children.cache_key)[0].verdict.holds:
            return job
    return None


def _claim_of(job: Manifest) -> str | None:
    return (job["metadata"].get("annotations") or {}).get(ANNOTATION_CACHE_CLAIM_UID)


def _replace_stale(stage: Stage, jobs: list[Manifest], children: Children) -> None:
    """Delete the unfinished or failed Jobs of this plan whose content the spec changed."""
    for job in jobs:
        if _key_of(job) == children.cache_key and not _succeeded(job):
            meta = job["metadata"]
            if stage.cluster.delete("Job", stage.namespace, meta["name"], meta["uid"]):
                message = f"Deleted Job {meta['name']}: the spec changed what the warmup runs"
                stage.events.post("Normal", "Replaced", message)


def _succeeded(job: Manifest) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Complete" and c.get("status") == "True" for c in conditions)


def _evaluate(stage: Stage, job: Manifest | None, key: str) -> tuple[WarmupState, list[Manifest]]:
    """Read the Job's Pods (by its UID) and, while none runs, its Events; then decide.
    Returns the verdict and the Pods the Job controls."""
    if job is None:
        return evaluate_warmup(None, [], key), []
    uid = job["metadata"]["uid"]
    pods = owned_pods(
        job, stage.cluster.list_pods(stage.namespace, f"{CONTROLLER_UID_LABEL}={uid}")
    )
    running = any((p.get("status") or {}).get("phase") == "Running" for p in pods)
    events = () if pods and running else tuple(stage.cluster.events(stage.namespace, uid))
    limit = stage.sdd.spec.warmup.pending_timeout_seconds
    return evaluate_warmup(job, pods, key, Observed(events, stage.at, limit)), pods


def _rerun(stage: Stage, job: Manifest, verdict: Verdict) -> None:
    """Delete a completed Job whose verdict is lost; the next sync creates it again."""
    meta = job["metadata"]
    if stage.cluster.delete("Job", stage.namespace, meta["name"], meta["uid"]):
        stage.events.post("Warning", "VerdictLost", verdict.message)


def _stop(stage: Stage, job: Manifest, verdict: Verdict) -> None:
    """Suspend the Job (its Pods go) and record why on it, so the verdict outlives them."""
    annotation = f"{verdict.reason}: {verdict.message}"
    body: Manifest = {
        "metadata": {"annotations": {ANNOTATION_WARMUP_FAILED: annotation}},
        "spec": {"suspend": True},
    }
    if stage.cluster.patch("Job", stage.namespace, job["metadata"]["name"], body):
        stage.events.post("Warning", verdict.reason, verdict.message)
