"""The warmup stage, pure: the warmup Job and its Pods -> the Warmed verdict and summary.

The engine's own output decides. The runner inside the Job verifies the bucket lists and the
"was not warmed-up!" lines (docs/runner.md) and writes a compact JSON summary to its
termination message. Warmed becomes True only when the Job completed *and* that summary says
``verified`` for this plan's cache key. A Job that completed without such a summary is not
trusted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from warmgate.api import Manifest
from warmgate.api.constants import Reason
from warmgate.api.status import Condition, WarmupSummary
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
        kv = data.get("kv_blocks")
        return cls(
            outcome=data["outcome"],
            reason=str(data.get("reason") or ""),
            key=data.get("key") if isinstance(data.get("key"), str) else None,
            unwarmed=tuple(str(u) for u in unwarmed) if isinstance(unwarmed, list) else (),
            kv_blocks=kv if isinstance(kv, int) else None,
            drafter=DrafterRun.parse(data.get("drafter")),
        )


@dataclass(frozen=True)
class WarmupState:
    """What the warmup stage decided."""

    verdict: Verdict
    summary: WarmupSummary
    stalled: bool = False
    summary_of_run: RunnerSummary | None = None


def _condition(job: Manifest, type_: str) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") == type_ and c.get("status") == "True" for c in conditions)


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) else None


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
    started, done = _time(status.get("startTime")), _time(status.get("completionTime"))
    attempts = sum(int(status.get(k) or 0) for k in ("active", "succeeded", "failed"))
    return WarmupSummary(
        job_name=job["metadata"]["name"],
        attempts=attempts,
        start_time=started,
        completion_time=done,
        duration_seconds=int((done - started).total_seconds()) if started and done else None,
        cache_key=key,
    )


def evaluate_warmup(job: Manifest | None, pods: list[Manifest], key: str) -> WarmupState:
    """The Warmed verdict from the Job of this plan and its Pods."""
    if job is None:
        return WarmupState(
            Verdict("False", Reason.WARMUP_PENDING, "Creating the warmup Job"),
            WarmupSummary(cache_key=key),
        )
    summary = job_summary(job, key)
    run = next((s for s in map(RunnerSummary.parse, runner_messages(pods)) if s), None)
    if _condition(job, "Complete"):
        return _completed(summary, run, key)
    if _condition(job, "Failed"):
        return _failed(summary, run)
    message = (
        f"Job {summary.job_name} is warming the plan (attempt {max(summary.attempts or 1, 1)})"
    )
    return WarmupState(Verdict("False", Reason.WARMUP_RUNNING, message), summary, False, run)


def _completed(summary: WarmupSummary, run: RunnerSummary | None, key: str) -> WarmupState:
    if run is None or run.outcome != "verified" or run.key != key:
        found = "no runner summary" if run is None else f"outcome {run.outcome!r}, key {run.key}"
        message = (
            f"Job {summary.job_name} completed but the runner did not verify key {key}: {found}"
        )
        return WarmupState(Verdict("False", Reason.WARMUP_FAILED, message), summary, True, run)
    message = (
        "The engine warmed every planned bucket and logged no unwarmed shape "
        f"(Job {summary.job_name})"
    )
    if run.kv_blocks is not None:
        message += f"; KV blocks {run.kv_blocks}"
    update: dict[str, Any] = {"kv_blocks": run.kv_blocks}
    if run.drafter is not None:
        message += run.drafter.describe()
        update.update(drafter_driven=run.drafter.driven, drafter_verified=run.drafter.verified)
    summary = summary.model_copy(update=update)
    return WarmupState(Verdict("True", Reason.WARMUP_SUCCEEDED, message), summary, False, run)


def remembered(
    warmed: Condition | None, summary: WarmupSummary | None, key: str
) -> WarmupState | None:
    """A verdict this operator already recorded for the key, so verification survives the Job.

    The status is the record: Warmed=True with status.warmup.cacheKey equal to the key means
    the runner verified exactly this plan on this stack (the key hashes both). Job Pods may be
    cleaned up afterwards; the plan stays verified and its measured KV blocks stay pinned.
    """
    if warmed is None or warmed.status != "True" or summary is None or summary.cache_key != key:
        return None
    verdict = Verdict("True", Reason.WARMUP_SUCCEEDED, warmed.message)
    run = RunnerSummary("verified", "recorded in status", key, (), summary.kv_blocks)
    return WarmupState(verdict, summary, False, run)


def _failed(summary: WarmupSummary, run: RunnerSummary | None) -> WarmupState:
    if run is None:
        message = f"Job {summary.job_name} failed without a runner summary"
    else:
        message = f"Job {summary.job_name} failed: {run.outcome}: {run.reason}"
        if run.unwarmed:
            message += f"; unwarmed: {', '.join(run.unwarmed[:5])}"
    return WarmupState(
        Verdict("False", Reason.WARMUP_FAILED, message[:MESSAGE_LIMIT]), summary, True, run
    )
