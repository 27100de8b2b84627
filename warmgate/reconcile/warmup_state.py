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

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from warmgate.api import Manifest
from warmgate.api.constants import ANNOTATION_WARMUP_FAILED, Reason
from warmgate.api.status import REASON_PATTERN, Condition, WarmupSummary
from warmgate.reconcile.pending import time_of, why_pending
from warmgate.reconcile.verdict import MESSAGE_LIMIT, Verdict


@dataclass(frozen=True)
class DrafterRun:
    """The runner summary's ``drafter``: hook state, planned and driven graphs, probe compiles."""

    hook: str
    verified: bool | None
    expected: int
    driven: int

    @classmethod
    def parse(cls, data: Any) -> DrafterRun | None:
        """None when the run had no drafter check (or the field is not the runner's)."""
        if not isinstance(data, dict) or not isinstance(data.get("hook"), str):
            return None
        verified = data.get("verified")
        counts = [data.get(k) for k in ("expected", "driven")]
        expected, driven = (c if isinstance(c, int) and c >= 0 else 0 for c in counts)
        return cls(data["hook"], verified if isinstance(verified, bool) else None, expected, driven)

    def describe(self) -> str:
        """'; drafter: 77 of 77 planned graphs compiled in the sweep, none in the probe'."""
        if self.hook == "off":
            return (
                f"; drafter: the sweep ran, {self.expected} planned graphs, not verified (no hook)"
            )
        if self.verified is not True:
            return "; drafter not verified: the compile hook did not attach (see the report)"
        return (
            f"; drafter: {self.driven} of {self.expected} planned graphs compiled in the sweep, "
            "none in the probe"
        )


@dataclass(frozen=True)
class RunnerSummary:
    """The fields of the runner's termination summary that the operator reads."""

    outcome: str
    reason: str
    key: str | None
    unwarmed: tuple[str, ...]
    kv_blocks: int | None
    # The compile hook's check of the drafter's graphs (runner summary "drafter", issue 16).
    drafter: DrafterRun | None = None
    # Lines for the plan's known-unwarmable shapes the engine logged (runner summary
    # "known_gaps"): reported, not failed (CoverageProven reason UnwarmableShapes).
    known_gaps: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> RunnerSummary | None:
        """The summary, or None when the message is not the runner's JSON."""
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("outcome"), str):
            return None
        unwarmed = data.get("unwarmed") or []
        known = data.get("known_gaps") or []
        kv = data.get("kv_blocks")
        return cls(
            outcome=data["outcome"],
            reason=str(data.get("reason") or ""),
            key=data.get("key") if isinstance(data.get("key"), str) else None,
            unwarmed=tuple(str(u) for u in unwarmed) if isinstance(unwarmed, list) else (),
            kv_blocks=kv if isinstance(kv, int) else None,
            drafter=DrafterRun.parse(data.get("drafter")),
            known_gaps=tuple(str(k) for k in known) if isinstance(known, list) else (),
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
    summary_of_run: RunnerSummary | None = None
    stop: bool = False
    rerun: bool = False


def _condition(job: Manifest, type_: str) -> Manifest | None:
    conditions = (job.get("status") or {}).get("conditions") or []
    return next(
        (c for c in conditions if c.get("type") == type_ and c.get("status") == "True"), None
    )


def owned_pods(job: Manifest, pods: list[Manifest]) -> list[Manifest]:
    """The Pods the Job controls: a controller owner reference with the Job's UID.

    The `job-name` label alone is no proof: any Pod can carry it, e.g. one a user created to
    fake a runner summary.
    """
    uid = job["metadata"].get("uid")
    return [
        pod
        for pod in pods
        if any(
            ref.get("controller") and ref.get("uid") == uid
            for ref in pod["metadata"].get("ownerReferences") or []
        )
    ]


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
        attempts=attempts,
        start_time=started,
        completion_time=done,
        duration_seconds=int((done - started).total_seconds()) if started and done else None,
        cache_key=key,
    )


@dataclass(frozen=True)
class Observed:
    """What the sync read about the warmup besides the Job: its Events, the clock, the limit."""

    events: tuple[Manifest, ...] = ()
    now: datetime | None = None
    pending_limit_s: int | None = None


def evaluate_warmup(
    job: Manifest | None, pods: list[Manifest], key: str, seen: Observed | None = None
) -> WarmupState:
    """The Warmed verdict from the Job of this plan and the Pods it controls."""
    if job is None:
        return WarmupState(
            Verdict("False", Reason.WARMUP_PENDING, "Creating the warmup Job"),
            WarmupSummary(cache_key=key),
        )
    seen = seen or Observed()
    summary = job_summary(job, key)
    pods = owned_pods(job, pods)
    run = next((s for s in map(RunnerSummary.parse, runner_messages(pods)) if s), None)
    stopped = (job["metadata"].get("annotations") or {}).get(ANNOTATION_WARMUP_FAILED)
    if stopped:
        reason, _, message = stopped.partition(": ")
        if not re.fullmatch(REASON_PATTERN, reason):  # a hand-made annotation
            reason, message = Reason.WARMUP_FAILED, stopped
        return WarmupState(Verdict("False", reason, message[:MESSAGE_LIMIT]), summary, True, run)
    if _condition(job, "Complete"):
        if not pods:
            return _lost(summary)
        return _completed(summary, run, key)
    failed = _condition(job, "Failed")
    if failed is not None:
        return _failed(summary, run, failed)
    return _active(job, pods, summary, run, seen)


def _newest(pods: list[Manifest]) -> Manifest | None:
    return max(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "", default=None)


def _active(
    job: Manifest,
    pods: list[Manifest],
    summary: WarmupSummary,
    run: RunnerSummary | None,
    seen: Observed,
) -> WarmupState:
    """A Job still working: the runner runs, its Pod waits (and why), or it retries."""
    pod = _newest(pods)
    phase = ((pod or {}).get("status") or {}).get("phase")
    attempt = max(summary.attempts or 1, 1)
    if phase == "Running":
        message = f"Job {summary.job_name} is warming the plan (attempt {attempt})"
        return WarmupState(Verdict("False", Reason.WARMUP_RUNNING, message), summary, False, run)
    if phase in ("Succeeded", "Failed"):
        found = f"{run.outcome}: {run.reason}" if run else "no runner summary"
        message = (
            f"Job {summary.job_name}: attempt {attempt} ended ({found}); the Job controller "
            "starts the next one after its backoff"
        )
        return WarmupState(Verdict("False", Reason.WARMUP_PENDING, message), summary, False, run)
    pending = why_pending(job, pod, list(seen.events))
    limit, now = seen.pending_limit_s, seen.now
    if limit is not None and now is not None and pending.since is not None:
        waited = int((now - pending.since).total_seconds())
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


def _completed(summary: WarmupSummary, run: RunnerSummary | None, key: str) -> WarmupState:
    if run is None or run.outcome != "verified" or run.key != key:
        found = "no runner summary" if run is None else f"outcome {run.outcome!r}, key {run.key}"
        message = (
            f"Job {summary.job_name} completed but the runner did not verify key {key}: {found}"
        )
        return WarmupState(Verdict("False", Reason.WARMUP_FAILED, message), summary, True, run)
    message = "The engine warmed every planned bucket and logged no unwarmed shape"
    if run.known_gaps:
        message += (
            f" but {len(run.known_gaps)} known gap(s), shapes no warmup can compile "
            f"(CoverageProven UnwarmableShapes), e.g. {run.known_gaps[0]}"
        )
    message += f" (Job {summary.job_name})"
    if run.kv_blocks is not None:
        message += f"; KV blocks {run.kv_blocks}"
    update: dict[str, Any] = {"kv_blocks": run.kv_blocks}
    if run.drafter is not None:
        message += run.drafter.describe()
        update.update(drafter_driven=run.drafter.driven, drafter_verified=run.drafter.verified)
    summary = summary.model_copy(update=update)
    return WarmupState(Verdict("True", Reason.WARMUP_SUCCEEDED, message), summary, False, run)


def remembered(
    warmed: Condition | None, summary: WarmupSummary | None, key: str, claim_uid: str | None
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
    verdict = Verdict("True", Reason.WARMUP_SUCCEEDED, warmed.message)
    run = RunnerSummary("verified", "recorded in status", key, (), summary.kv_blocks)
    return WarmupState(verdict, summary, False, run)


def _failed(summary: WarmupSummary, run: RunnerSummary | None, failed: Manifest) -> WarmupState:
    if run is None:
        why = f"{failed.get('reason', '')}: {failed.get('message', '')}".strip(": ")
        message = f"Job {summary.job_name} failed ({why}) without a runner summary"
    else:
        message = f"Job {summary.job_name} failed: {run.outcome}: {run.reason}"
        if run.unwarmed:
            message += f"; unwarmed: {', '.join(run.unwarmed[:5])}"
    return WarmupState(
        Verdict("False", Reason.WARMUP_FAILED, message[:MESSAGE_LIMIT]), summary, True, run
    )
