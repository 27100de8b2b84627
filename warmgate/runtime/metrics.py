"""Prometheus metrics of the operator: plan sizes, verdicts and planning time, per object."""

from __future__ import annotations

import math
import threading
from array import array
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from prometheus_client import (
    REGISTRY,
    Counter,
    Histogram,
    disable_created_metrics,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from warmgate.api.status import PlanSummary, SpecDecodeDeploymentStatus

if TYPE_CHECKING:
    from warmgate.reconcile.planning.evaluate import PlanningResult

FOLLOWER_SYNCS = Counter(
    "warmgate_follower_syncs",
    "Syncs by the objects' followers, by trigger: object (new, or its spec, labels or "
    "annotations changed), child (a watched child changed), resync, "
    "retry (after an API failure), echo (woken by the operator's own write: skipped).",
    ["trigger"],
)
SYNC_FAILURES = Counter(
    "warmgate_sync_failures",
    "Syncs that failed, by reason: api (an API error: the object is synced again after a "
    "backoff) or error (the sync raised: a bug, logged with its traceback).",
    ["reason"],
)
for _reason in ("api", "error"):
    SYNC_FAILURES.labels(_reason)  # exported as 0 from the start: a rate needs a first sample
PLAN_SECONDS = Histogram(
    "warmgate_plan_duration_seconds",
    "Wall time of one planning stage: bucket plan, coverage proof and completion.",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
)
# The per-object gauges: (metric, help, the phase label's value or None). One collector holds
# every object's values in one small array instead of a prometheus_client child per series
# (about 9 KB per object for 16 series, measured at 1,000 objects: docs/benchmarks.md).
_SERIES: Final = (
    (
        "warmgate_plan_buckets",
        "Buckets in the plan to warm, by phase (prompt, decode after the spec-decode expansion).",
        "prompt",
    ),
    ("warmgate_plan_buckets", "", "decode"),
    ("warmgate_plan_extra_buckets", "Buckets the planner added to close coverage holes.", None),
    (
        "warmgate_plan_uncovered_shapes",
        "Reachable shapes the plan would run unwarmed (0 when coverage is proven).",
        None,
    ),
    (
        "warmgate_coverage_proven",
        "1 when the CoverageProven condition is True, else 0.",
        None,
    ),
    (
        "warmgate_plan_estimated_warmup_seconds",
        "Upper end of the estimated warmup time of the plan without a recipe-cache hit.",
        None,
    ),
    (
        "warmgate_warmed",
        "1 when the Warmed condition is True (the runner verified the plan), else 0.",
        None,
    ),
    (
        "warmgate_warmup_duration_seconds",
        "Wall time of the last finished warmup Job of the current plan.",
        None,
    ),
    ("warmgate_serving_ready_replicas", "Ready serving replicas (of a verified plan).", None),
    ("warmgate_ready", "1 when the Ready condition is True, else 0.", None),
    (
        "warmgate_warmup_progress_ratio",
        "Planned buckets warmed so far by the running warmup (0 to 1; 1 once verified).",
        None,
    ),
    (
        "warmgate_warmup_compile_progress_ratio",
        "Estimated compile seconds of the buckets the running warmup has warmed over those of "
        "the whole plan (status.warmup.progress.compiledFraction: the cost model weighs a prompt "
        "bucket more than a decode one; 0 to 1; 1 once verified).",
        None,
    ),
    (
        "warmgate_warmup_estimated_remaining_seconds",
        "Seconds the running warmup needs still, at its measured rate (0 when none runs).",
        None,
    ),
    (
        "warmgate_warmup_elapsed_seconds",
        "Seconds the running warmup attempt has run (0 when none runs).",
        None,
    ),
    (
        "warmgate_serving_unwarmed_shapes",
        "Distinct shapes the serving engines of the served plan ran without having warmed them.",
        None,
    ),
    (
        "warmgate_serving_not_prepared_buckets",
        "Bucket lookups the serving engines logged as not prepared (the most any Pod reported).",
        None,
    ),
    (
        "warmgate_serving_spec_decode_acceptance_rate",
        "Draft tokens the serving engines accepted, of those drafted (0 to 1; vLLM's own "
        "counters summed over the served plan's Pods).",
        None,
    ),
    (
        "warmgate_serving_spec_decode_mean_acceptance_length",
        "Tokens a request gains per target step, 1 + accepted tokens / drafts (1 to 1 + k).",
        None,
    ),
    (
        "warmgate_serving_rolled_out",
        "1 once a rollout of the object completed (status.serving.planHash: a verified plan "
        "ran on every replica), else 0 (its first rollout is still to come or under way).",
        None,
    ),
    (
        "warmgate_last_successful_sync_timestamp_seconds",
        "Unix time of the object's last sync that went through (no API failure, no error), "
        "in this operator process.",
        None,
    ),
    (
        "warmgate_sync_consecutive_failures",
        "The object's syncs that failed in a row (an API failure or an error the sync raised); "
        "0 after one that went through.",
        None,
    ),
)
_SLOT: Final = {(metric, phase): i for i, (metric, _, phase) in enumerate(_SERIES)}
_ABSENT: Final = math.nan  # a series not recorded yet (a warmup duration before any warmup)


class ObjectGauges(Collector):
    """Every object's gauges, as one array of values per object, exported at each scrape."""

    def __init__(self) -> None:
        self._values: dict[tuple[str, str], array[float]] = {}
        self._lock = threading.Lock()

    def set(self, namespace: str, name: str, values: dict[tuple[str, str | None], float]) -> None:
        with self._lock:
            row = self._values.get((namespace, name))
            if row is None:
                row = self._values[namespace, name] = array("d", [_ABSENT] * len(_SERIES))
            for key, value in values.items():
                row[_SLOT[key]] = float(value)

    def synced(self, namespace: str, name: str, ok: bool, at: float) -> None:
        """One sync of the object went through (``ok``) at Unix time ``at``, or failed."""
        with self._lock:
            row = self._values.get((namespace, name))
            if row is None:
                row = self._values[namespace, name] = array("d", [_ABSENT] * len(_SERIES))
            failures = _SLOT["warmgate_sync_consecutive_failures", None]
            if ok:
                row[_SLOT["warmgate_last_successful_sync_timestamp_seconds", None]] = at
                row[failures] = 0.0
            else:
                row[failures] = (0.0 if math.isnan(row[failures]) else row[failures]) + 1

    def remove(self, namespace: str, name: str) -> None:
        with self._lock:
            self._values.pop((namespace, name), None)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            rows = [(key, row.tolist()) for key, row in self._values.items()]
        families: dict[str, GaugeMetricFamily] = {}
        for slot, (metric, help_text, phase) in enumerate(_SERIES):
            labels = ["namespace", "name", "phase"] if phase else ["namespace", "name"]
            family = families.setdefault(
                metric, GaugeMetricFamily(metric, help_text, labels=labels)
            )
            for (namespace, name), values in rows:
                if not math.isnan(values[slot]):
                    extra = [phase] if phase else []
                    family.add_metric([namespace, name, *extra], values[slot])
        yield from families.values()


OBJECTS = ObjectGauges()
REGISTRY.register(OBJECTS)


def record_status(namespace: str, name: str, status: SpecDecodeDeploymentStatus) -> None:
    """Export the warmup and serving state the status reports."""
    conditions = {c.type: c.status for c in status.conditions or []}
    values: dict[tuple[str, str | None], float] = {
        ("warmgate_warmed", None): 1 if conditions.get("Warmed") == "True" else 0,
        ("warmgate_ready", None): 1 if conditions.get("Ready") == "True" else 0,
    }
    if status.warmup and status.warmup.duration_seconds is not None:
        values["warmgate_warmup_duration_seconds", None] = status.warmup.duration_seconds
    ready = status.serving.ready_replicas if status.serving else None
    values["warmgate_serving_ready_replicas", None] = ready or 0
    values.update(_progress(status))
    drift = status.drift
    unwarmed = drift.unwarmed_shapes or 0 if drift else 0
    values["warmgate_serving_unwarmed_shapes", None] = unwarmed
    values["warmgate_serving_not_prepared_buckets", None] = drift.not_prepared or 0 if drift else 0
    values.update(_acceptance(status))
    rolled_out = status.serving is not None and status.serving.plan_hash is not None
    values["warmgate_serving_rolled_out", None] = 1 if rolled_out else 0
    OBJECTS.set(namespace, name, values)


def record_sync(namespace: str, name: str, ok: bool, at: float) -> None:
    """One sync of the object: went through (``ok``) at Unix time ``at``, or failed."""
    OBJECTS.synced(namespace, name, ok, at)


def _acceptance(status: SpecDecodeDeploymentStatus) -> dict[tuple[str, str | None], float]:
    """The measured acceptance; absent (no series) until the engines exported their counters."""
    measured = status.serving.spec_decode if status.serving else None
    rate = measured.acceptance_rate if measured else None
    length = measured.mean_acceptance_length if measured else None
    return {
        ("warmgate_serving_spec_decode_acceptance_rate", None): _ABSENT if rate is None else rate,
        ("warmgate_serving_spec_decode_mean_acceptance_length", None): (
            _ABSENT if length is None else length
        ),
    }


def _progress(status: SpecDecodeDeploymentStatus) -> dict[tuple[str, str | None], float]:
    """The running warmup's progress; 1 and 0 s remaining once Warmed, 0 before any run."""
    warmed = any(c.type == "Warmed" and c.status == "True" for c in status.conditions or [])
    progress = status.warmup.progress if status.warmup else None
    ratio, remaining, elapsed = (1.0 if warmed else 0.0), 0.0, 0.0
    compiled = ratio
    if progress is not None and not warmed and progress.percent is not None:
        ratio = progress.percent / 100
        compiled = progress.compiled_fraction or 0.0
        remaining = float(progress.estimated_remaining_seconds or 0)
        elapsed = float(progress.elapsed_seconds or 0)
    return {
        ("warmgate_warmup_progress_ratio", None): ratio,
        ("warmgate_warmup_compile_progress_ratio", None): compiled,
        ("warmgate_warmup_estimated_remaining_seconds", None): remaining,
        ("warmgate_warmup_elapsed_seconds", None): elapsed,
    }


def record(namespace: str, name: str, result: PlanningResult) -> None:
    """Export one object's planning result."""
    summary = result.summary or PlanSummary()
    proven = 1 if result.coverage.status == "True" else 0
    values: dict[tuple[str, str | None], float] = {
        ("warmgate_plan_buckets", "prompt"): summary.prompt_buckets or 0,
        ("warmgate_plan_buckets", "decode"): summary.spec_decode_buckets or 0,
        ("warmgate_plan_extra_buckets", None): summary.extra_buckets or 0,
        ("warmgate_plan_uncovered_shapes", None): summary.uncovered_count or 0,
        ("warmgate_coverage_proven", None): proven,
        ("warmgate_plan_estimated_warmup_seconds", None): summary.estimated_warmup_seconds or 0,
    }
    OBJECTS.set(namespace, name, values)


def forget(namespace: str, name: str) -> None:
    """Remove every series of a deleted object, so dashboards and alerts stop seeing it."""
    OBJECTS.remove(namespace, name)


def serve(port: int) -> None:
    """Serve /metrics on all interfaces (the chart's Service and ServiceMonitor scrape it).

    Without prometheus_client's `_created` series, as a Go operator's /metrics has none."""
    disable_created_metrics()  # type: ignore[no-untyped-call]
    start_http_server(port, registry=REGISTRY)
