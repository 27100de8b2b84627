"""Prometheus metrics of the operator: plan sizes, verdicts and planning time, per object."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, start_http_server

from warmgate.api.status import PlanSummary, SpecDecodeDeploymentStatus

if TYPE_CHECKING:
    from warmgate.reconcile.planning import PlanningResult

_LABELS = ("namespace", "name")

FOLLOWER_SYNCS = Counter(
    "warmgate_follower_syncs",
    "Syncs by the objects' followers, by trigger: child (a watched child changed), resync, "
    "retry (after an API failure), echo (woken by the operator's own write: skipped).",
    ["trigger"],
)
PLAN_SECONDS = Histogram(
    "warmgate_plan_duration_seconds",
    "Wall time of one planning stage: bucket plan, coverage proof and completion.",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
)
BUCKETS = Gauge(
    "warmgate_plan_buckets",
    "Buckets in the plan to warm, by phase (prompt, decode after the spec-decode expansion).",
    [*_LABELS, "phase"],
)
EXTRA_BUCKETS = Gauge(
    "warmgate_plan_extra_buckets", "Buckets the planner added to close coverage holes.", _LABELS
)
UNCOVERED = Gauge(
    "warmgate_plan_uncovered_shapes",
    "Reachable shapes the plan would run unwarmed (0 when coverage is proven).",
    _LABELS,
)
COVERAGE_PROVEN = Gauge(
    "warmgate_coverage_proven", "1 when the CoverageProven condition is True, else 0.", _LABELS
)
WARMUP_ESTIMATE = Gauge(
    "warmgate_plan_estimated_warmup_seconds",
    "Upper end of the estimated warmup time of the plan without a recipe-cache hit.",
    _LABELS,
)


WARMED = Gauge(
    "warmgate_warmed",
    "1 when the Warmed condition is True (the runner verified the plan), else 0.",
    _LABELS,
)
WARMUP_DURATION = Gauge(
    "warmgate_warmup_duration_seconds",
    "Wall time of the last finished warmup Job of the current plan.",
    _LABELS,
)
SERVING_READY = Gauge(
    "warmgate_serving_ready_replicas", "Ready serving replicas (of a verified plan).", _LABELS
)
READY = Gauge("warmgate_ready", "1 when the Ready condition is True, else 0.", _LABELS)
WARMUP_PROGRESS = Gauge(
    "warmgate_warmup_progress_ratio",
    "Planned buckets warmed so far by the running warmup (0 to 1; 1 once verified).",
    _LABELS,
)
WARMUP_REMAINING = Gauge(
    "warmgate_warmup_estimated_remaining_seconds",
    "Seconds the running warmup needs still, at its measured rate (0 when none runs).",
    _LABELS,
)
WARMUP_ELAPSED = Gauge(
    "warmgate_warmup_elapsed_seconds",
    "Seconds the running warmup attempt has run (0 when none runs).",
    _LABELS,
)
UNWARMED_SERVING = Gauge(
    "warmgate_serving_unwarmed_shapes",
    "Distinct shapes the serving engines of the served plan ran without having warmed them.",
    _LABELS,
)
NOT_PREPARED_SERVING = Gauge(
    "warmgate_serving_not_prepared_buckets",
    "Bucket lookups the serving engines logged as not prepared (the most any Pod reported).",
    _LABELS,
)


def record_status(namespace: str, name: str, status: SpecDecodeDeploymentStatus) -> None:
    """Export the warmup and serving state the status reports."""
    conditions = {c.type: c.status for c in status.conditions or []}
    WARMED.labels(namespace, name).set(1 if conditions.get("Warmed") == "True" else 0)
    READY.labels(namespace, name).set(1 if conditions.get("Ready") == "True" else 0)
    if status.warmup and status.warmup.duration_seconds is not None:
        WARMUP_DURATION.labels(namespace, name).set(status.warmup.duration_seconds)
    ready = status.serving.ready_replicas if status.serving else None
    SERVING_READY.labels(namespace, name).set(ready or 0)
    _record_progress(namespace, name, status)
    drift = status.drift
    UNWARMED_SERVING.labels(namespace, name).set(drift.unwarmed_shapes or 0 if drift else 0)
    NOT_PREPARED_SERVING.labels(namespace, name).set(drift.not_prepared or 0 if drift else 0)


def _record_progress(namespace: str, name: str, status: SpecDecodeDeploymentStatus) -> None:
    """The running warmup's progress; 1 and 0 s remaining once Warmed, 0 before any run."""
    warmed = any(c.type == "Warmed" and c.status == "True" for c in status.conditions or [])
    progress = status.warmup.progress if status.warmup else None
    ratio, remaining, elapsed = (1.0 if warmed else 0.0), 0.0, 0.0
    if progress is not None and not warmed and progress.percent is not None:
        ratio = progress.percent / 100
        remaining = float(progress.estimated_remaining_seconds or 0)
        elapsed = float(progress.elapsed_seconds or 0)
    WARMUP_PROGRESS.labels(namespace, name).set(ratio)
    WARMUP_REMAINING.labels(namespace, name).set(remaining)
    WARMUP_ELAPSED.labels(namespace, name).set(elapsed)


def record(namespace: str, name: str, result: PlanningResult) -> None:
    """Export one object's planning result."""
    summary = result.summary or PlanSummary()
    BUCKETS.labels(namespace, name, "prompt").set(summary.prompt_buckets or 0)
    BUCKETS.labels(namespace, name, "decode").set(summary.spec_decode_buckets or 0)
    EXTRA_BUCKETS.labels(namespace, name).set(summary.extra_buckets or 0)
    UNCOVERED.labels(namespace, name).set(summary.uncovered_count or 0)
    COVERAGE_PROVEN.labels(namespace, name).set(1 if result.coverage.status == "True" else 0)
    WARMUP_ESTIMATE.labels(namespace, name).set(summary.estimated_warmup_seconds or 0)


def forget(namespace: str, name: str) -> None:
    """Remove every series of a deleted object, so dashboards and alerts stop seeing it."""
    for gauge in (EXTRA_BUCKETS, UNCOVERED, COVERAGE_PROVEN, WARMUP_ESTIMATE, WARMED):
        _remove(gauge, namespace, name)
    for gauge in (WARMUP_DURATION, SERVING_READY, READY, WARMUP_PROGRESS, WARMUP_REMAINING):
        _remove(gauge, namespace, name)
    for gauge in (WARMUP_ELAPSED, UNWARMED_SERVING, NOT_PREPARED_SERVING):
        _remove(gauge, namespace, name)
    for phase in ("prompt", "decode"):
        _remove(BUCKETS, namespace, name, phase)


def _remove(gauge: Gauge, *labels: str) -> None:
    # KeyError: never recorded (e.g. an object the operator could not read).
    with contextlib.suppress(KeyError):
        gauge.remove(*labels)


def serve(port: int) -> None:
    """Serve /metrics on all interfaces (the chart's Service and ServiceMonitor scrape it)."""
    start_http_server(port, registry=REGISTRY)
