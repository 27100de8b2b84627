"""The warmup part of a decision: the plan's children, its warmup Job, and the Warmed verdict.

The Job and its plan.json are named after their content, so a spec change that touches the
warmup (timeout, retries, placement, resources, the cache claim) gets a new Job: an
unsucceeded Job of the same plan with other content is deleted first (it may hold Gaudi
cards), then the new one is created. A Job whose Pod waited past the pending deadline is
stopped (suspended) and marked with its verdict, so it is not retried until the spec changes.

Only children this object controls count: a Job, ConfigMap or claim of the wanted name that
something else holds is reported (Stalled, reason NotOwned) and never read, mounted or written.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from warmgate.api import Manifest, SpecDecodeDeployment, SpecDecodeDeploymentStatus
from warmgate.api.conditions import get_condition
from warmgate.api.constants import (
    ANNOTATION_CACHE_CLAIM_UID,
    ANNOTATION_CACHE_KEY,
    ANNOTATION_SHARDS_ASKED,
    ANNOTATION_WARMUP_FAILED,
    WARMED,
    Reason,
)
from warmgate.api.status import Condition, WarmupSummary
from warmgate.contract.board import WarmupBoard
from warmgate.contract.summary import TerminationSummary
from warmgate.reconcile.planning.proven_plan import total_buckets
from warmgate.reconcile.planning.verdict import Verdict, not_owned, one_line
from warmgate.reconcile.sync.actions import Action, Create, Delete, Event, EventType, Patch
from warmgate.reconcile.sync.observed import Controlled, Observed, controlled_by, name_of, uid_of
from warmgate.reconcile.sync.pod_template import job_mismatch
from warmgate.reconcile.sync.progress import plan_phases, progress_of, running_pod, throttled
from warmgate.reconcile.sync.served import ServedRecord
from warmgate.reconcile.sync.shard_cards import asked, choose_shards
from warmgate.reconcile.sync.subject import Identity, Subject
from warmgate.reconcile.sync.warmup_shards import job_shards
from warmgate.reconcile.sync.warmup_state import (
    WarmupSeen,
    WarmupState,
    evaluate_warmup,
    owned_pods,
    remembered,
)
from warmgate.resources import Children, PlanBundle, desired_children
from warmgate.resources.cache_claim import made_from
from warmgate.resources.warmup_shards import shard_cap
from warmgate.settings import Settings


@dataclass(frozen=True)
class WarmupDecision:
    """The warmup's verdict, the current plan's children, the verified ones, the writes."""

    state: WarmupState | None = None
    children: Children | None = None
    verified: Children | None = None
    actions: tuple[Action, ...] = ()


def recorded_verdict(sdd: SpecDecodeDeployment, key: str, claim_uid: str | None) -> bool:
    """The status records a verified warmup of ``key`` on this claim: nothing to read."""
    old = sdd.status or SpecDecodeDeploymentStatus()
    warmed = get_condition(old.conditions, WARMED)
    required = drafter_required(sdd)
    return remembered(warmed, old.warmup, key, claim_uid, drafter_required=required) is not None


def drafter_required(sdd: SpecDecodeDeployment) -> bool:
    """spec.warmup.drafter.verification is Required: no Warmed without drafter evidence."""
    return sdd.spec.warmup.drafter.verification == "Required"


def claim_uid(ids: Identity, seen: Observed) -> str | None:
    """The UID of the recipe-cache claim the warmup publishes to (None without one): the
    user's existing claim, or the operator's own from the template (only when it controls it)."""
    foreign = seen.claim is not None and not controlled_by(seen.claim, ids.uid)
    return _claim_uid(ids, seen, foreign=foreign)


def _claim_uid(ids: Identity, seen: Observed, *, foreign: bool) -> str | None:
    """`claim_uid`, ``foreign``: the claim read is not this object's."""
    if ids.claim_name is None or seen.claim is None:
        return None
    if ids.claim is not None and foreign:
        return None
    return uid_of(seen.claim)


def adoptable(sdd: SpecDecodeDeployment, claim: Manifest) -> bool:
    """A claim an earlier build made under `<parent>-recipe-cache`, kept as this object's: it
    controls it, it is not being deleted, and it was made from the template the spec has."""
    template = sdd.spec.warmup.cache.claim_template
    return (
        template is not None
        and controlled_by(claim, sdd.metadata.uid or "")
        and not claim["metadata"].get("deletionTimestamp")
        and made_from(claim, template)
    )


def claim_in_use(ids: Identity, seen: Observed) -> str | None:
    """The claim name the children mount when it is not the spec's (an adopted one), or None."""
    template = ids.claim
    if template is None or seen.claim is None or name_of(seen.claim) == name_of(template):
        return None
    return name_of(seen.claim)


def kept_shards(sdd: SpecDecodeDeployment, jobs: list[Manifest], key: str) -> int | None:
    """The shard count of this plan's newest Job (of ``jobs``, the object's: `warmup_jobs`)
    made for what spec.warmup.shards asks now (its Pod template's annotation, which cannot
    change after the Job is made), within what the spec and plan allow; None: no such Job, so
    the count is decided from the free cards."""
    target = asked(sdd)
    same = [
        job
        for job in jobs
        if key_of(job) == key and _template_annotation(job, ANNOTATION_SHARDS_ASKED) == target
    ]
    if not same:
        return None
    newest = max(same, key=lambda job: job["metadata"].get("creationTimestamp") or "")
    return job_shards(newest)


def _template_annotation(job: Manifest, name: str) -> str | None:
    template = ((job.get("spec") or {}).get("template") or {}).get("metadata") or {}
    value = (template.get("annotations") or {}).get(name)
    return value if isinstance(value, str) else None


def decide_shards(
    sdd: SpecDecodeDeployment, seen: Observed, jobs: list[Manifest], key: str, to_run: PlanBundle
) -> tuple[PlanBundle, Event | None]:
    """The plan with its warmup's shard count (issue 38): kept from this plan's Job (of
    ``jobs``, the object's), else
    decided from the free cards read for a new Job (with an Event to post when the Job is
    made, when fewer shards than asked run, or what auto chose); unchanged when the spec and
    plan allow one shard only, or nothing was read (no Job is made this sync)."""
    kept = kept_shards(sdd, jobs, key)
    cap = shard_cap(sdd, to_run.buckets)
    if cap <= 1:  # the count does not depend on the free cards (`shard_cards.wants_cards`)
        return to_run, None
    if kept is not None:
        return replace(to_run, shards=kept), None
    if not seen.cards_read:
        return to_run, None
    choice = choose_shards(sdd, cap, seen.free_cards)
    event = None
    if choice.note is not None:
        kind: EventType = "Warning" if choice.warning else "Normal"
        reason = "ShardsReduced" if choice.warning else "ShardsChosen"
        event = Event(kind, reason, choice.note, log=choice.note)
    return replace(to_run, shards=choice.count), event


def _announced(actions: tuple[Action, ...], event: Event | None) -> tuple[Action, ...]:
    """The Job's Create carries the shard decision's Event (posted once the Job is made)."""
    if event is None:
        return actions
    return tuple(
        replace(a, done=event) if isinstance(a, Create) and a.manifest["kind"] == "Job" else a
        for a in actions
    )


def decide_warmup(
    sdd: SpecDecodeDeployment, seen: Observed, settings: Settings, of: Subject
) -> WarmupDecision:
    """The warmup state of the plan, its children (for serving once verified), the writes;
    ``of``: the plan to warm, the object's names, what of ``seen`` it controls, its served
    record."""
    target = of.target
    if target is None:
        return WarmupDecision()
    to_run, key = target
    ids, jobs = of.ids, list(of.mine.jobs)
    foreign = seen.claim is not None and not of.mine.claim
    claim = _claim_uid(ids, seen, foreign=foreign)
    to_run = replace(to_run, cache_claim_name=claim_in_use(ids, seen))
    if "warmup" in seen.failed:
        no_claim = ids.claim_name is None
        return _last_known(sdd, seen, to_run, settings, key=key, claim=claim, no_claim=no_claim)
    taken = _taken_claim(ids, seen, foreign=foreign)
    if taken is not None:
        return WarmupDecision(WarmupState(taken, WarmupSummary(cache_key=key), stalled=True))
    if ids.claim is not None and seen.claim is None:
        verdict = Verdict("False", Reason.WARMUP_PENDING, "Creating the recipe-cache claim")
        state = WarmupState(verdict, WarmupSummary(cache_key=key))
        return WarmupDecision(state, actions=(Create("warmup", ids.claim),))
    users = None if seen.cache_users is None else seen.cache_users.with_user(ids.uid, key)
    to_run = replace(to_run, cache_claim_uid=claim, cache_users=users)
    to_run, shards_event = decide_shards(sdd, seen, jobs, key, to_run)
    try:
        children = desired_children(sdd, to_run, settings)
    except ValueError as exc:  # the same spec and plan always fail: no retry helps
        verdict = Verdict("False", Reason.BUILD_FAILED, f"Cannot build the warmup: {one_line(exc)}")
        return WarmupDecision(WarmupState(verdict, WarmupSummary(cache_key=key), stalled=True))
    state, actions = _warmup(sdd, seen, children, to_run, jobs=jobs, of=of)
    actions = _announced(actions, shards_event)
    if not state.verdict.holds:
        return WarmupDecision(state, children, None, actions)
    measured = state.summary_of_run.kv_blocks if state.summary_of_run else None
    verified = children
    if measured != to_run.kv_blocks:  # verified just now: serving pins what the runner measured
        verified = desired_children(sdd, replace(to_run, kv_blocks=measured), settings)
    return WarmupDecision(state, children, verified, actions)


def _taken_claim(ids: Identity, seen: Observed, *, foreign: bool) -> Verdict | None:
    """The template's claim name held by an object this one does not control (``foreign``:
    the claim read is not this object's)."""
    if ids.claim is None:
        return None
    name = name_of(ids.claim)
    holder = seen.taken.get(("PersistentVolumeClaim", name))
    if holder is None and not foreign:
        return None
    return not_owned("PersistentVolumeClaim", name, holder)


def _last_known(
    sdd: SpecDecodeDeployment,
    seen: Observed,
    to_run: PlanBundle,
    settings: Settings,
    *,
    key: str,
    claim: str | None,
    no_claim: bool,
) -> WarmupDecision:
    """A failed read or write: what the status said about this plan stays (and serving with
    it); with no record of this plan, Warmed is Unknown and says what failed. Serving rolls to
    the recorded plan only when its claim is known to be the one the record vouches for: after
    a changed claim template (a new claim name), the Deployment would otherwise move to a claim
    without the entry; it keeps what it has until a sync reads the claim."""
    old = sdd.status or SpecDecodeDeploymentStatus()
    warmed = get_condition(old.conditions, WARMED)
    message = seen.failed["warmup"]
    if warmed is not None and old.warmup is not None and old.warmup.cache_key == key:
        verdict = Verdict(warmed.status, warmed.reason, warmed.message)
        state = WarmupState(verdict, old.warmup)
        recorded = old.warmup.cache_claim_uid
        same_claim = seen.claim is not None and claim == recorded
        no_claim = no_claim and recorded is None
        if not verdict.holds or not (same_claim or no_claim):
            return WarmupDecision(state)
        kept = replace(to_run, cache_claim_uid=old.warmup.cache_claim_uid)
        return WarmupDecision(state, verified=desired_children(sdd, kept, settings))
    verdict = Verdict("Unknown", Reason.WARMUP_PENDING, message)
    return WarmupDecision(WarmupState(verdict, WarmupSummary(cache_key=key)))


def _warmup(
    sdd: SpecDecodeDeployment,
    seen: Observed,
    children: Children,
    to_run: PlanBundle,
    *,
    jobs: list[Manifest],
    of: Subject,
) -> tuple[WarmupState, tuple[Action, ...]]:
    """The recorded verdict of this plan, else the verdict of its Job (created when missing)."""
    key, old, claim = (
        children.cache_key,
        sdd.status or SpecDecodeDeploymentStatus(),
        to_run.cache_claim_uid,
    )
    warmed = get_condition(old.conditions, WARMED)
    known = remembered(warmed, old.warmup, key, claim, drafter_required=drafter_required(sdd))
    if known is not None:
        return known, ()
    taken = _taken_child(of.mine, children, seen)
    if taken is not None:
        return WarmupState(taken, WarmupSummary(cache_key=key), stalled=True), ()
    job = _current_job(sdd, seen, jobs, children, warmed)
    evaluated = _evaluate(sdd, seen, job, key, warmed) if job is not None else None
    served = _served_verdict(of.record.record, key, claim)  # the plan serving now: no warmup again
    if served is not None and (evaluated is None or evaluated[0].rerun):
        return served, ()
    if job is None or evaluated is None:
        return evaluate_warmup(None, [], key), (
            *_replace_stale(jobs, children),
            *_create(children, seen),
        )
    state, pods = evaluated
    state = _with_progress(sdd, seen, state, pods, to_run)
    actions: tuple[Action, ...] = _missing_configmaps(job, children, seen)
    if state.stop:
        actions = (_stop(job, state.verdict),)
    if state.rerun:
        reason = "VerdictLost" if state.untrusted is None else "UntrustedPod"
        event = Event("Warning", reason, state.verdict.message)
        actions = (Delete("warmup", "Job", job, event),)
    if state.verdict.holds:  # the runner checked every planned bucket against the engine's log
        update = {"warmed_buckets": total_buckets(to_run.buckets), "cache_claim_uid": claim}
        state = replace(state, summary=state.summary.model_copy(update=update))
    return state, actions


def _served_verdict(record: ServedRecord | None, key: str, claim: str | None) -> WarmupState | None:
    """The verdict the served plan's record keeps: the spec went back to the plan serving now
    (whose warmup Pods may be gone), and it is not warmed again."""
    if record is None or record.warmup.cache_key != key or record.warmup.cache_claim_uid != claim:
        return None
    job = record.warmup.job_name or "its warmup Job"
    message = f"Verified by {job}: the plan serving now (its record {name_of(record.manifest)})"
    verdict = Verdict("True", Reason.WARMUP_SUCCEEDED, message)
    run = TerminationSummary(
        "verified", "recorded for the plan serving now", key=key, kv_blocks=record.warmup.kv_blocks
    )
    return WarmupState(verdict, record.warmup, False, run)


def _missing_configmaps(job: Manifest, children: Children, seen: Observed) -> tuple[Action, ...]:
    """The running warmup's ConfigMaps, created again when deleted by hand (its Pod mounts
    them: a retry would wait for them forever)."""
    if seen.configmaps is None or succeeded(job) or _failed(job):
        return ()
    have = {name_of(c) for c in seen.configmaps}
    wanted = (children.plan_configmap, children.warmup_configmap)
    return tuple(Create("warmup", m) for m in wanted if name_of(m) not in have)


def _failed(job: Manifest) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Failed" and c.get("status") == "True" for c in conditions)


def _taken_child(mine: Controlled, children: Children, seen: Observed) -> Verdict | None:
    """A warmup child's name (ConfigMaps, the Job) that another object holds: a create found it
    taken, or it is listed (by label, which anyone sets) without this object as its controller.
    A listed ConfigMap of the name would otherwise count as made, and the Job would mount it."""
    listed = {("Job", name_of(j)): j for j in seen.jobs}
    listed |= {("ConfigMap", name_of(c)): c for c in seen.configmaps or ()}
    for manifest in children.warmup:
        kind, name = str(manifest["kind"]), name_of(manifest)
        holder = seen.taken.get((kind, name))
        found = listed.get((kind, name))
        if holder is not None or (kind, name) in mine.foreign:
            return not_owned(kind, name, holder)
        forged = found is not None and kind == "Job" and job_mismatch(found, manifest)
        if forged:
            return not_owned(kind, name, f"not the operator's Job (its pod template: {forged})")
    return None


def _create(children: Children, seen: Observed) -> tuple[Action, ...]:
    """The warmup's children that the snapshot does not hold yet (the Job last)."""
    have = {("PersistentVolumeClaim", name_of(seen.claim))} if seen.claim is not None else set()
    have |= {("ConfigMap", name_of(c)) for c in seen.configmaps or ()}
    return tuple(
        Create("warmup", m) for m in children.warmup if (m["kind"], name_of(m)) not in have
    )


def warmup_jobs(uid: str, seen: Observed) -> list[Manifest]:
    """The warmup Jobs of the object ``uid``: those it controls, whatever their labels say."""
    return [job for job in seen.jobs if controlled_by(job, uid)]


def key_of(job: Manifest) -> str | None:
    return (job["metadata"].get("annotations") or {}).get(ANNOTATION_CACHE_KEY)


def _current_job(
    sdd: SpecDecodeDeployment,
    seen: Observed,
    jobs: list[Manifest],
    children: Children,
    warmed: Condition | None,
) -> Manifest | None:
    """The Job of the desired content, else one of this plan that the runner verified (the
    record of a warmup whose status was lost, with since-changed timeouts)."""
    name = name_of(children.warmup_job)
    same = [job for job in jobs if key_of(job) == children.cache_key]
    desired = next((job for job in same if name_of(job) == name), None)
    if desired is not None:
        return desired
    claim = _claim_of(children.warmup_job)
    for job in same:  # only one that published to the claim in use: a new claim is empty
        if (
            _claim_of(job) == claim
            and job_mismatch(job, children.warmup_job) is None
            and _evaluate(sdd, seen, job, children.cache_key, warmed)[0].verdict.holds
        ):
            return job
    return None


def _claim_of(job: Manifest) -> str | None:
    return (job["metadata"].get("annotations") or {}).get(ANNOTATION_CACHE_CLAIM_UID)


def _replace_stale(jobs: list[Manifest], children: Children) -> tuple[Action, ...]:
    """Delete the unfinished or failed Jobs of this plan whose content the spec changed."""
    return tuple(
        Delete(
            "warmup",
            "Job",
            job,
            Event(
                "Normal",
                "Replaced",
                f"Deleted Job {name_of(job)}: the spec changed what the warmup runs",
            ),
        )
        for job in jobs
        if key_of(job) == children.cache_key and not succeeded(job)
    )


def succeeded(job: Manifest) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Complete" and c.get("status") == "True" for c in conditions)


def _evaluate(
    sdd: SpecDecodeDeployment, seen: Observed, job: Manifest, key: str, warmed: Condition | None
) -> tuple[WarmupState, list[Manifest]]:
    """The verdict of the Job from its Pods and, while none runs, its Events (``warmed``: the
    status' Warmed condition); and the Pods."""
    found = list(seen.pods_of(job))
    limit = sdd.spec.warmup.pending_timeout_seconds
    old = sdd.status.warmup if sdd.status else None
    since = old.pending_since if old is not None and old.job_uid == uid_of(job) else None
    stopped = None
    if warmed is not None and old is not None and old.job_uid == uid_of(job):
        stopped = (warmed.reason, warmed.message or "")
    observed = WarmupSeen(
        seen.events_of(job),
        seen.at,
        limit,
        since,
        accept_cpu=sdd.spec.engine.accept_cpu_engine,
        stopped=stopped,
        drafter_required=drafter_required(sdd),
        holes_allowed=not sdd.spec.buckets.coverage.complete,
    )
    return evaluate_warmup(job, found, key, observed), owned_pods(job, found)


def _with_progress(
    sdd: SpecDecodeDeployment,
    seen: Observed,
    state: WarmupState,
    pods: list[Manifest],
    to_run: PlanBundle,
) -> WarmupState:
    """The running warmup's progress in its summary (rate-limited); the last one read kept
    while the same Job's verdict is still to come; other states unchanged."""
    old_warmup = sdd.status.warmup if sdd.status else None
    if state.verdict.reason != Reason.WARMUP_RUNNING:
        return _kept_progress(old_warmup, state)
    old = old_warmup.progress if old_warmup else None
    key = state.summary.cache_key or ""
    if old_warmup is not None and old_warmup.cache_key != key:
        old = None  # another plan's progress
    pod = running_pod(pods)
    doc = seen.doc_of(pod) if pod is not None else None
    fresh = None
    if isinstance(doc, WarmupBoard):
        planned = total_buckets(to_run.buckets)
        fresh = progress_of(
            doc,
            planned=planned,
            estimate_s=to_run.estimated_warmup_s,
            key=key,
            at=seen.at,
            phases=plan_phases(to_run.buckets),
        )
    progress = throttled(old, fresh, seen.at)
    if progress is None:
        return state
    update = {"progress": progress, "warmed_buckets": progress.warmed_buckets}
    return replace(state, summary=state.summary.model_copy(update=update))


def _kept_progress(old: WarmupSummary | None, state: WarmupState) -> WarmupState:
    """The last progress of this Job's runner, until the Job's verdict (issue 37 item 4).

    Between the runner's end and the Job controller's count of it (the Pod's tracking
    finalizer gone, `status.succeeded` not yet 1) the sync sees no Pod of the Job: without
    this, status.warmup lost warmedBuckets and the progress there (223 -> 0 -> 223 buckets).
    A verdict (Warmed, a failure that stalls), a stop or a re-run drops it, as before.
    """
    summary = state.summary
    done = state.verdict.status == "True" or state.stalled or state.stop or state.rerun
    if old is None or old.progress is None or done:
        return state
    if old.job_uid is None or old.job_uid != summary.job_uid or old.cache_key != summary.cache_key:
        return state
    update = {"progress": old.progress, "warmed_buckets": old.warmed_buckets}
    return replace(state, summary=summary.model_copy(update=update))


def _stop(job: Manifest, verdict: Verdict) -> Action:
    """Suspend the Job (its Pods go) and record why on it, so the verdict outlives them."""
    body: Manifest = {
        "metadata": {
            "annotations": {ANNOTATION_WARMUP_FAILED: f"{verdict.reason}: {verdict.message}"}
        },
        "spec": {"suspend": True},
    }
    return Patch("warmup", "Job", job, body, Event("Warning", verdict.reason, verdict.message))
