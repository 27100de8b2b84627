"""The warmup stage, pure: the warmup Job and its Pods -> the Warmed verdict and summary.

The engine's own output decides. The runner inside the Job verifies the bucket lists and the
"was not warmed-up!" lines (docs/runner.md) and writes a compact JSON summary to its
termination message. Warmed becomes True only when the Job completed *and* that summary says
``verified`` for this plan's cache key. A Job that completed without such a summary is not
trusted, and only Pods the Job controls (owner reference with the Job's UID) are read.

Until the runner runs, the verdict says why not (`pending.why_pending`): "warming the plan"
only while it runs. A Pod that waits longer than spec.warmup.pendingTimeoutSeconds fails the
warmup with that reason; the sync then stops the Job and marks it, so the verdict survives.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from warmgate.api import Manifest
from warmgate.api.constants import ANNOTATION_WARMUP_FAILED, Reason
from warmgate.api.status import Condition, WarmupShards, WarmupSummary
from warmgate.contract.summary import DrafterCounts, TerminationSummary
from warmgate.reconcile.planning.verdict import MESSAGE_LIMIT, Verdict
from warmgate.reconcile.sync.pending import STUCK_WAITING, time_of, why_pending
from warmgate.reconcile.sync.pod_template import template_mismatch
from warmgate.reconcile.sync.warmup_shards import job_shards, read_shards

# The reasons the operator stops a Job for (`_active`: a stuck Pod past the pending deadline);
# any other word on the Job was not written by the operator.
STOP_REASONS = frozenset(
    {Reason.PENDING_TIMEOUT, Reason.UNSCHEDULABLE, Reason.FAILED_CREATE, *STUCK_WAITING}
)

# What each drafter cause (summary.DRAFTER_CAUSES) means, for the Warmed message.
CAUSES = {
    "plugin-not-loaded": "the engine loaded no compile hook (vLLM did not load the plugin)",
    "hook-not-attached": "the compile hook did not attach to vllm_gaudi's model runner",
    "metric-unreadable": "Habana's graph_compilation metric could not be read",
    "proposer-not-found": (
        "the compile hook found no drafter proposer to attach to (class or method not found)"
    ),
    "shapes-missing": "planned shapes were never reached in the warmup",
    "probe-compiles": "drafter graphs compiled during the probe",
    "direct-warmup-failed": "the engine plugin's direct drafter warmup failed planned shapes",
    "direct-warmup-incomplete": (
        "planned shapes were neither warmed by the engine plugin's direct drafter warmup nor "
        "compiled in the sweep"
    ),
}


def missing_evidence(drafter: DrafterCounts) -> str:
    """'Habana's graph_compilation metric could not be read (RuntimeError: ...): 77 of 77
    planned drafter shapes without evidence'."""
    cause = CAUSES.get(drafter.cause, "the compile hook could not tell")
    detail = f" ({drafter.detail})" if drafter.detail else ""
    count = drafter.unverified if drafter.cause else drafter.total
    return f"{cause}{detail}: {count} of {drafter.total} planned drafter shapes without evidence"


def drafter_sentence(drafter: DrafterCounts, accepted_by: str = "") -> str:
    """'; drafter: 77 of 77 planned graphs driven in the sweep, none compiled in the probe', or
    what was not verified and which spec field accepted it (``accepted_by``)."""
    if drafter.hook == "off":
        return (
            f"; drafter: the sweep ran, {drafter.expected} planned graphs, not verified (no hook)"
        )
    if drafter.verified is not True:
        return f"; drafter not verified, accepted by {accepted_by}: {missing_evidence(drafter)}"
    accepted = (
        f" ({drafter.missing} never driven: accepted by {accepted_by})" if drafter.missing else ""
    )
    return (
        f"; drafter: {drafter.driven} of {drafter.expected} planned graphs driven in the sweep"
        f"{accepted}, none compiled in the probe"
    )


@dataclass(frozen=True)
class WarmupState:
    """What the warmup stage decided.

    ``stop``: the Job must be stopped (suspended) and marked with the verdict, because its Pod
    waited past the pending deadline. ``rerun``: the Job completed but its Pods are gone, and
    the runner's verdict with them; the Job must be deleted so the warmup runs again.
    """

    verdict: Verdict
    summary: WarmupSummary
    stalled: bool = False
    summary_of_run: TerminationSummary | None = None
    stop: bool = False
    rerun: bool = False
    # The Pod whose presence made the Job's outcome untrusted (the rerun's Event names it).
    untrusted: str | None = None


def _condition(job: Manifest, type_: str) -> Manifest | None:
    conditions = (job.get("status") or {}).get("conditions") or []
    return next(
        (c for c in conditions if c.get("type") == type_ and c.get("status") == "True"), None
    )


# The Job controller puts this finalizer on every Pod it creates and removes it once it has
# counted the Pod's end in the Job's status (batch/v1 Pod tracking, Kubernetes >= 1.26).
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"


def owned_pods(job: Manifest, pods: list[Manifest]) -> list[Manifest]:
    """The Pods the Job controller created for this Job and tracks, running its template.

    A Pod counts only with all of: the controller-uid label and a controller owner reference
    with the Job's UID; either the Job controller's tracking finalizer (it is still being
    tracked) or the Job's own counts agreeing with how it ended (a Succeeded Pod of a Job that
    counted a success, a Failed one of a Job that counted a failure); and the containers of
    the Job's pod template as the operator wrote them (`pod_template.template_mismatch`).
    Labels, owner references and finalizers are anyone's to write who may create Pods: the Job
    controller adopts and counts such a Pod (docs/operator.md, "Trust and failure model").
    """
    return [pod for pod in pods if _distrust(job, pod) is None]


def refused_pods(job: Manifest, pods: list[Manifest]) -> list[tuple[Manifest, str]]:
    """The Pods that claim to be the Job's (its controller-uid label and a controller owner
    reference to it) but are not `owned_pods`, each with why."""
    refused = []
    for pod in pods:
        why = _distrust(job, pod)
        if why is not None and _claims(pod, job["metadata"].get("uid")):
            refused.append((pod, why))
    return refused


def _distrust(job: Manifest, pod: Manifest) -> str | None:
    """Why the Pod's termination message is no evidence for this Job, or None."""
    uid = job["metadata"].get("uid")
    if not _claims(pod, uid):
        return "it is not the Job's"
    if not _tracked(pod, job):
        return "the Job controller does not track it"
    why = template_mismatch(pod, (job.get("spec") or {}).get("template"))
    return None if why is None else f"it does not run the Job's pod template ({why})"


def _claims(pod: Manifest, uid: str | None) -> bool:
    meta = pod.get("metadata") or {}
    if not uid or (meta.get("labels") or {}).get(CONTROLLER_UID_LABEL) != uid:
        return False
    refs = meta.get("ownerReferences") or []
    return any(ref.get("controller") is True and ref.get("uid") == uid for ref in refs)


def _tracked(pod: Manifest, job: Manifest) -> bool:
    if JOB_TRACKING_FINALIZER in ((pod.get("metadata") or {}).get("finalizers") or []):
        return True
    status = job.get("status") or {}
    phase = str((pod.get("status") or {}).get("phase"))
    return phase in ("Succeeded", "Failed") and int(status.get(phase.lower()) or 0) > 0


def runner_messages(pods: list[Manifest], container: str = "warmup") -> list[str]:
    """Termination messages of the warmup container, newest Pod first."""
    ordered = sorted(pods, key=lambda p: p.get("metadata", {}).get("creationTimestamp") or "")
    messages = []
    for pod in reversed(ordered):
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            terminated = (status.get("state") or {}).get("terminated") or {}
            if status.get("name") == container and terminated.get("message"):
                messages.append(str(terminated["message"]))
    return messages


def job_summary(job: Manifest, key: str) -> WarmupSummary:
    """Job facts for status.warmup: name, attempts, times, cache key."""
    status = job.get("status") or {}
    started, done = time_of(status.get("startTime")), time_of(status.get("completionTime"))
    attempts = sum(int(status.get(k) or 0) for k in ("active", "succeeded", "failed"))
    return WarmupSummary(
        job_name=job["metadata"]["name"],
        job_uid=job["metadata"].get("uid"),
        attempts=attempts,
        start_time=started,
        completion_time=done,
        duration_seconds=int((done - started).total_seconds()) if started and done else None,
        cache_key=key,
    )


@dataclass(frozen=True)
class WarmupSeen:
    """What the sync read about the warmup besides the Job: its Events, the clock, the limit."""

    events: tuple[Manifest, ...] = ()
    now: datetime | None = None
    pending_limit_s: int | None = None
    # When this operator first saw this Job's runner waiting (status.warmup.pendingSince).
    pending_since: datetime | None = None
    # spec.engine.acceptCPUEngine: only then is a runner's cpu_engine outcome Warmed
    accept_cpu: bool = False
    # The Warmed reason and message the status holds for this Job (its UID), the operator's
    # own words when it stopped it: a stopped Job's verdict is told with them.
    stopped: tuple[str, str] | None = None
    # spec.warmup.drafter.verification Required: no Warmed without drafter evidence (issue 33)
    drafter_required: bool = True
    # spec.buckets.coverage.complete false: planned drafter shapes never reached are accepted
    holes_allowed: bool = False


def evaluate_warmup(
    job: Manifest | None, pods: list[Manifest], key: str, seen: WarmupSeen | None = None
) -> WarmupState:
    """The Warmed verdict from the Job of this plan and the Pods it controls."""
    if job is None:
        return WarmupState(
            Verdict("False", Reason.WARMUP_PENDING, "Creating the warmup Job"),
            WarmupSummary(cache_key=key),
        )
    seen = seen or WarmupSeen()
    summary = job_summary(job, key)
    refused = refused_pods(job, pods)
    pods = owned_pods(job, pods)
    run = next((s for s in map(TerminationSummary.from_json, runner_messages(pods)) if s), None)
    shards = read_shards(job, pods, key) if job_shards(job) > 1 else None
    if shards is not None:  # a sharded warmup (issue 38): the merge's summary speaks for it
        run = shards.merge or shards.failed or run
        counts = WarmupShards(
            planned=shards.count, running=shards.running, verified=shards.verified
        )
        # A retry replaces the Pod of one index: attempts count the Job's tries, not N Pods.
        tries = shards.attempts or min(summary.attempts or 0, 1)
        summary = summary.model_copy(update={"shards": counts, "attempts": tries})
    stopped = (job["metadata"].get("annotations") or {}).get(ANNOTATION_WARMUP_FAILED)
    if stopped:
        return WarmupState(_stopped(summary, str(stopped), seen), summary, True, run)
    failed = _condition(job, "Failed")
    complete = _condition(job, "Complete")
    if refused and (failed is not None or (complete and not _speaks_for(run, key))):
        return _untrusted(summary, refused, "failed" if failed is not None else "completed")
    if complete:
        if not pods:
            return _lost(summary)
        if shards is not None and shards.gap is not None:
            message = f"Job {summary.job_name} completed but {shards.gap}"
            verdict = Verdict("False", Reason.WARMUP_FAILED, message[:MESSAGE_LIMIT])
            return WarmupState(verdict, summary, True, run)
        return _completed(summary, run, key, seen)
    if failed is not None:
        if shards is not None and shards.gap is not None:
            why = str(failed.get("reason") or "").strip()
            said = f" ({why})" if why else ""
            message = f"Job {summary.job_name} failed{said}: {shards.gap}"
            verdict = Verdict("False", Reason.WARMUP_FAILED, message[:MESSAGE_LIMIT])
            return WarmupState(verdict, summary, True, run)
        return _failed(summary, run, failed)
    return _active(job, pods, summary, run, seen)


def _stopped(summary: WarmupSummary, annotation: str, seen: WarmupSeen) -> Verdict:
    """The verdict of a Job the operator stopped: the reason word it wrote on the Job, and its
    own message from the status when it stopped this Job, never the annotation's text (anyone
    with `edit` may annotate a Job: issue 34 case 7). A reason that is no condition reason
    (a hand-made annotation) is WarmupFailed."""
    reason = annotation.partition(": ")[0]
    if reason not in STOP_REASONS:
        reason = Reason.WARMUP_FAILED
    if seen.stopped is not None and seen.stopped[0] == reason:
        return Verdict("False", reason, seen.stopped[1][:MESSAGE_LIMIT])
    message = (
        f"Job {summary.job_name} was stopped ({reason}; the reason is on the Job, its "
        f"{ANNOTATION_WARMUP_FAILED} annotation); change the spec or set warmgate.dev/rewarm "
        "to warm the plan again"
    )
    return Verdict("False", reason, message)


def _newest(pods: list[Manifest]) -> Manifest | None:
    return max(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "", default=None)


def _active(
    job: Manifest,
    pods: list[Manifest],
    summary: WarmupSummary,
    run: TerminationSummary | None,
    seen: WarmupSeen,
) -> WarmupState:
    """A Job still working: the runner runs, its Pod waits (and why), or it retries."""
    pod = _newest(pods)
    phase = ((pod or {}).get("status") or {}).get("phase")
    attempt = max(summary.attempts or 1, 1)
    lost = _lost_pod(pod)
    if lost is not None:
        message = f"Job {summary.job_name}: {lost}; warming the plan again"
        return WarmupState(Verdict("False", Reason.WARMUP_PENDING, message), summary, rerun=True)
    if phase == "Running":
        message = f"Job {summary.job_name} is warming the plan (attempt {attempt})"
        return WarmupState(Verdict("False", Reason.WARMUP_RUNNING, message), summary, False, run)
    if phase in ("Succeeded", "Failed"):
        return _ended(summary, run, attempt, succeeded=phase == "Succeeded")
    pending = why_pending(job, pod, list(seen.events))
    limit, now = seen.pending_limit_s, seen.now
    since = seen.pending_since or now
    summary = summary.model_copy(update={"pending_since": since})
    if limit is not None and now is not None and since is not None:
        waited = int((now - since).total_seconds())
        if waited > limit:
            reason = pending.reason if pending.stuck else Reason.PENDING_TIMEOUT
            message = (
                f"{pending.message} (Pending for {waited} s, more than "
                f"spec.warmup.pendingTimeoutSeconds={limit}; the Job was stopped)"
            )
            verdict = Verdict("False", reason, message[:MESSAGE_LIMIT])
            return WarmupState(verdict, summary, True, run, stop=True)
    verdict = Verdict("False", pending.reason, pending.message[:MESSAGE_LIMIT])
    return WarmupState(verdict, summary, False, run)


def _lost_pod(pod: Manifest | None) -> str | None:
    """Why the newest Pod is lost, or None: it is being deleted and its node no longer answers
    (the node controller marked it not Ready, or evicted it for a NotReady or unreachable node):
    a kubelet that is gone never ends it, and the Job controller never replaces it."""
    if pod is None or not (pod.get("metadata") or {}).get("deletionTimestamp"):
        return None
    conditions = {c.get("type"): c for c in (pod.get("status") or {}).get("conditions") or []}
    disrupted = conditions.get("DisruptionTarget") or {}
    ready = conditions.get("Ready") or {}
    name = pod["metadata"].get("name")
    if disrupted.get("status") == "True":
        return f"Pod {name} was evicted ({disrupted.get('reason') or 'DisruptionTarget'})"
    if ready.get("status") == "False" and (
        ready.get("reason") == "NodeNotReady" or _marked_by_node_controller(conditions)
    ):
        return f"Pod {name} is being deleted on a node that stopped answering (NodeNotReady)"
    return None


def _marked_by_node_controller(conditions: dict[Any, Manifest]) -> bool:
    """Ready False while ContainersReady stays True, with no reason: the node controller's
    mark (MarkPodsNotReady sets only Ready's status). A kubelet that answers turns both False,
    with reason ContainersNotReady; ReadinessGatesNotReady is a gate, not the node."""
    ready = conditions.get("Ready") or {}
    containers = conditions.get("ContainersReady") or {}
    return containers.get("status") == "True" and ready.get("reason") in (None, "")


def _ended(
    summary: WarmupSummary, run: TerminationSummary | None, attempt: int, *, succeeded: bool
) -> WarmupState:
    """The newest Pod ended but the Job controller has not marked the Job yet.

    A Pod that succeeded is the Job's one completion, no retry follows: the warmup stays
    Warming until the Job is marked Complete (a few seconds later), so a verified warmup goes
    from Warming straight to Starting. A Pod that failed waits for the Job's retry: Pending.
    """
    found = f"{run.outcome}: {run.reason}" if run else "no runner summary"
    if succeeded:
        verified = run is not None and run.outcome == "verified" and run.key == summary.cache_key
        said = "the runner verified the plan" if verified else f"runner: {found}"
        message = (
            f"Job {summary.job_name}: attempt {attempt} succeeded, {said}; waiting for the Job "
            "controller to mark the Job complete"
        )
        return WarmupState(Verdict("False", Reason.WARMUP_RUNNING, message), summary, False, run)
    message = (
        f"Job {summary.job_name}: attempt {attempt} ended ({found}); the Job controller "
        "starts the next one after its backoff"
    )
    return WarmupState(Verdict("False", Reason.WARMUP_PENDING, message), summary, False, run)


def _speaks_for(run: TerminationSummary | None, key: str) -> bool:
    """The runner of a trusted Pod ended with a verdict on this plan that can be Warmed."""
    return run is not None and run.key == key and run.outcome in ("verified", "cpu_engine")


def _untrusted(
    summary: WarmupSummary, refused: list[tuple[Manifest, str]], ended: str
) -> WarmupState:
    """The Job ended while a Pod it adopted is not the operator's (a Pod made to look like the
    Job's): the Job controller may have counted that Pod's end and stopped the runner's, so
    the Job's outcome is nobody's verdict. Neither trusted nor condemned: warm it again (the
    sync deletes the Job, naming the Pod in a Warning Event)."""
    pod, why = refused[0]
    name = (pod.get("metadata") or {}).get("name")
    message = (
        f"Job {summary.job_name} {ended} while it counted Pod {name}, which is not the "
        f"operator's: {why}; its outcome is not the runner's verdict, warming the plan again"
    )
    verdict = Verdict("False", Reason.WARMUP_PENDING, message[:MESSAGE_LIMIT])
    return WarmupState(verdict, summary, rerun=True, untrusted=str(name))


def _lost(summary: WarmupSummary) -> WarmupState:
    """A completed Job without any Pod: the verdict went with them (a Pod deleted while or
    right after the runner finished). Nothing says the plan was verified, nor that it failed:
    warm it again rather than trust or condemn it."""
    message = (
        f"Job {summary.job_name} completed, but its Pods are gone and the runner's verdict with "
        "them; warming the plan again"
    )
    verdict = Verdict("False", Reason.WARMUP_PENDING, message)
    return WarmupState(verdict, summary, rerun=True)


def _cpu_engine(summary: WarmupSummary, run: TerminationSummary, accepted: bool) -> WarmupState:
    """A CPU build of vLLM ran this plan: Warmed only when the spec accepts a CPU engine, and
    then saying so (docs/runner.md, "A CPU engine"); never a Gaudi verification. acceptCPUEngine
    is itself the explicit opt-out of every Gaudi graph's verification, the drafter's included:
    the message and status.warmup.drafterUnverified count the planned drafter shapes."""
    vllm = run.engine.vllm if run.engine else None
    engine = f"vLLM {vllm}" if vllm else "vLLM"
    if not accepted:
        message = (
            f"Job {summary.job_name}: the engine was a CPU build ({engine}), which has no Gaudi "
            "graphs to verify, and spec.engine.acceptCPUEngine is not set"
        )
        return WarmupState(Verdict("False", Reason.WARMUP_FAILED, message), summary, True, run)
    message = (
        f"The engine was a CPU build ({engine}): it started, answered and served the probe; no "
        f"Gaudi graph was verified (Job {summary.job_name})"
    )
    update: dict[str, Any] = {"kv_blocks": None, "engine_kind": "cpu"}
    if run.drafter is not None and run.drafter.total:
        message += (
            f"; drafter: {run.drafter.total} planned drafter shapes not verified "
            "(spec.engine.acceptCPUEngine)"
        )
        update["drafter_unverified"] = run.drafter.total
    summary = summary.model_copy(update=update)
    return WarmupState(Verdict("True", Reason.CPU_ENGINE, message), summary, False, run)


def _accepted_by(drafter: DrafterCounts, seen: WarmupSeen) -> str | None:
    """The spec field that lets Warmed stand without the drafter's evidence, or None (Required:
    fail closed). complete: false accepts planned shapes never reached (uncovered shapes,
    issue 25), nothing else."""
    if drafter.verified is True and not drafter.missing:
        return ""
    if not seen.drafter_required:
        return "spec.warmup.drafter.verification=BestEffort"
    # verified with shapes missing: the runner accepted them, and nothing else lacks evidence
    if drafter.verified is True and seen.holes_allowed:
        return "spec.buckets.coverage.complete=false"
    return None


def _unverified(
    summary: WarmupSummary, run: TerminationSummary, drafter: DrafterCounts
) -> WarmupState:
    """A run whose drafter lacks evidence under verification Required: not Warmed (issue 33)."""
    message = (
        f"Job {summary.job_name}: drafter not verified: {missing_evidence(drafter)}; "
        "spec.warmup.drafter.verification is Required (BestEffort would serve without it)"
    )
    if run.outcome == "verified":  # the runner let it pass: its summary is not the evidence
        message += "; the runner's summary said verified"
    summary = summary.model_copy(
        update={"drafter_driven": drafter.driven, "drafter_verified": drafter.verified}
    )
    verdict = Verdict("False", Reason.DRAFTER_UNVERIFIED, message[:MESSAGE_LIMIT])
    return WarmupState(verdict, summary, True, run)


def _completed(
    summary: WarmupSummary, run: TerminationSummary | None, key: str, seen: WarmupSeen
) -> WarmupState:
    if run is not None and run.outcome == "cpu_engine" and run.key == key:
        return _cpu_engine(summary, run, seen.accept_cpu)
    if run is None or run.outcome != "verified" or run.key != key:
        found = "no runner summary" if run is None else f"outcome {run.outcome!r}, key {run.key}"
        message = (
            f"Job {summary.job_name} completed but the runner did not verify key {key}: {found}"
        )
        return WarmupState(Verdict("False", Reason.WARMUP_FAILED, message), summary, True, run)
    accepted_by = _accepted_by(run.drafter, seen) if run.drafter is not None else ""
    if run.drafter is not None and accepted_by is None:
        return _unverified(summary, run, run.drafter)
    message = "The engine warmed every planned bucket and logged no unwarmed shape"
    if run.known_gaps:
        message += (
            f" but {len(run.known_gaps)} known gap(s), shapes no warmup can compile "
            f"(CoverageProven UnwarmableShapes), e.g. {run.known_gaps[0]}"
        )
    message += f" (Job {summary.job_name})"
    if run.kv_blocks is not None:
        message += f"; KV blocks {run.kv_blocks}"
    kind = run.engine.kind if run.engine else None
    update: dict[str, Any] = {"kv_blocks": run.kv_blocks, "engine_kind": kind}
    if run.drafter is not None:
        message += drafter_sentence(run.drafter, accepted_by or "")
        update.update(
            drafter_driven=run.drafter.driven,
            drafter_verified=run.drafter.verified,
            drafter_unverified=_unverified_count(run.drafter),
        )
    summary = summary.model_copy(update=update)
    return WarmupState(Verdict("True", Reason.WARMUP_SUCCEEDED, message), summary, False, run)


def _unverified_count(drafter: DrafterCounts) -> int:
    """Planned drafter shapes without evidence (a summary before issue 33 has no ``cause``:
    every planned shape when the hook could not see, else the missing ones)."""
    if drafter.cause:
        return drafter.unverified
    if drafter.verified is True:
        return drafter.missing
    return drafter.total


def remembered(
    warmed: Condition | None,
    summary: WarmupSummary | None,
    key: str,
    claim_uid: str | None,
    *,
    drafter_required: bool = True,
) -> WarmupState | None:
    """A verdict this operator already recorded for the key, so verification survives the Job.

    The status is the record: Warmed=True with status.warmup.cacheKey equal to the key means
    the runner verified exactly this plan on this stack (the key hashes both). Job Pods may be
    cleaned up afterwards; the plan stays verified and its measured KV blocks stay pinned.
    The record vouches for an entry on one recipe-cache claim: when the claim is gone or was
    replaced (another UID), the entry is gone too and the plan is warmed again.
    """
    if warmed is None or warmed.status != "True" or summary is None or summary.cache_key != key:
        return None
    if summary.cache_claim_uid != claim_uid:
        return None
    # A record Warmed without the drafter's evidence (an operator before issue 33 passed an
    # unattached hook) is no record under verification Required: the plan is warmed again.
    cpu = warmed.reason == Reason.CPU_ENGINE
    if drafter_required and summary.drafter_verified is False and not cpu:
        return None
    # A CPU engine's record keeps its reason: its key holds acceptCPUEngine, so it never
    # stands for a Gaudi plan (resources/cache_key.py).
    verdict = Verdict("True", Reason.CPU_ENGINE if cpu else Reason.WARMUP_SUCCEEDED, warmed.message)
    outcome = "cpu_engine" if cpu else "verified"
    run = TerminationSummary(outcome, "recorded in status", key=key, kv_blocks=summary.kv_blocks)
    return WarmupState(verdict, summary, False, run)


def _failed(
    summary: WarmupSummary, run: TerminationSummary | None, failed: Manifest
) -> WarmupState:
    if run is None:
        why = f"{failed.get('reason', '')}: {failed.get('message', '')}".strip(": ")
        message = f"Job {summary.job_name} failed ({why}) without a runner summary"
    elif run.outcome == "drafter_unverified" and run.drafter is not None:
        return _unverified(summary, run, run.drafter)
    else:
        message = f"Job {summary.job_name} failed: {run.outcome}: {run.reason}"
        if run.unwarmed:
            message += f"; unwarmed: {', '.join(run.unwarmed[:5])}"
        if run.drafter is not None and run.drafter.cause:
            message += f"; drafter not verified: {missing_evidence(run.drafter)}"
    return WarmupState(
        Verdict("False", Reason.WARMUP_FAILED, message[:MESSAGE_LIMIT]), summary, True, run
    )
