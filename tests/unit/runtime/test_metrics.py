"""The per-object gauges: one collector, the same exposition as a Gauge per metric."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from support.examples import example_sdd

from warmgate.api import SpecDecodeDeploymentStatus
from warmgate.api.status import (
    ServingSummary,
    SpecDecodeAcceptance,
    WarmupProgress,
    WarmupSummary,
)
from warmgate.reconcile.planning.evaluate import evaluate
from warmgate.runtime import metrics

PER_OBJECT = {
    "warmgate_plan_buckets",
    "warmgate_plan_extra_buckets",
    "warmgate_plan_uncovered_shapes",
    "warmgate_coverage_proven",
    "warmgate_plan_estimated_warmup_seconds",
    "warmgate_warmed",
    "warmgate_warmup_duration_seconds",
    "warmgate_serving_ready_replicas",
    "warmgate_ready",
    "warmgate_warmup_progress_ratio",
    "warmgate_warmup_compile_progress_ratio",
    "warmgate_warmup_estimated_remaining_seconds",
    "warmgate_warmup_elapsed_seconds",
    "warmgate_serving_unwarmed_shapes",
    "warmgate_serving_not_prepared_buckets",
    "warmgate_serving_spec_decode_acceptance_rate",
    "warmgate_serving_spec_decode_mean_acceptance_length",
    "warmgate_serving_rolled_out",
    "warmgate_last_successful_sync_timestamp_seconds",
    "warmgate_sync_consecutive_failures",
}
# Exported only once the followers synced the object (`metrics.record_sync`).
SYNCED = {"warmgate_last_successful_sync_timestamp_seconds", "warmgate_sync_consecutive_failures"}
# Exported only once the serving engines reported their spec-decode counters.
MEASURED = {
    "warmgate_warmup_duration_seconds",
    "warmgate_serving_spec_decode_acceptance_rate",
    "warmgate_serving_spec_decode_mean_acceptance_length",
}


def samples(namespace: str) -> dict[tuple[str, str], float]:
    """(metric, phase) -> value of one namespace's series, parsed from the exposition."""
    text = generate_latest(metrics.REGISTRY).decode()
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("namespace") == namespace:
                assert family.type == "gauge"
                assert family.documentation  # every family has its help text
                found[sample.name, sample.labels.get("phase", "")] = sample.value
    return found


def test_an_objects_series_are_exported_and_removed() -> None:
    sdd = example_sdd("llama31-8b-seeds", namespace="ns-m", name="m")
    result = evaluate(sdd)
    assert result.summary is not None
    metrics.record("ns-m", "m", result)
    metrics.record_status("ns-m", "m", SpecDecodeDeploymentStatus())
    found = samples("ns-m")
    assert {name for name, _ in found} == PER_OBJECT - MEASURED - SYNCED
    assert found["warmgate_plan_buckets", "prompt"] == result.summary.prompt_buckets
    assert found["warmgate_plan_buckets", "decode"] == result.summary.spec_decode_buckets
    assert found["warmgate_coverage_proven", ""] == (1 if result.coverage.holds else 0)
    status = SpecDecodeDeploymentStatus(warmup=WarmupSummary(duration_seconds=42))
    metrics.record_status("ns-m", "m", status)
    assert samples("ns-m")["warmgate_warmup_duration_seconds", ""] == 42
    metrics.record_status("ns-m", "other", SpecDecodeDeploymentStatus())
    metrics.forget("ns-m", "m")
    left = {name for name, _ in samples("ns-m")}  # the other object's series stay
    assert "warmgate_ready" in left
    assert "warmgate_plan_buckets" not in left
    metrics.forget("ns-m", "other")
    assert samples("ns-m") == {}


def test_the_measured_acceptance_is_exported_once_known_and_withdrawn_with_it() -> None:
    acceptance = SpecDecodeAcceptance(acceptance_rate=0.25, mean_acceptance_length=1.5)
    status = SpecDecodeDeploymentStatus(serving=ServingSummary(spec_decode=acceptance))
    metrics.record_status("ns-a", "a", status)
    found = samples("ns-a")
    assert found["warmgate_serving_spec_decode_acceptance_rate", ""] == 0.25
    assert found["warmgate_serving_spec_decode_mean_acceptance_length", ""] == 1.5
    metrics.record_status("ns-a", "a", SpecDecodeDeploymentStatus(serving=ServingSummary()))
    assert not {name for name, _ in samples("ns-a")} & MEASURED - {
        "warmgate_warmup_duration_seconds"
    }
    metrics.forget("ns-a", "a")


def test_a_frozen_objects_failures_count_up_and_a_sync_that_goes_through_resets_them() -> None:
    metrics.record_sync("ns-f", "f", True, 1000.0)
    metrics.record_sync("ns-f", "f", False, 1010.0)
    metrics.record_sync("ns-f", "f", False, 1020.0)
    found = samples("ns-f")
    assert found["warmgate_sync_consecutive_failures", ""] == 2
    assert found["warmgate_last_successful_sync_timestamp_seconds", ""] == 1000.0
    metrics.record_sync("ns-f", "f", True, 1030.0)
    found = samples("ns-f")
    assert found["warmgate_sync_consecutive_failures", ""] == 0
    assert found["warmgate_last_successful_sync_timestamp_seconds", ""] == 1030.0
    metrics.forget("ns-f", "f")
    assert samples("ns-f") == {}


def test_rolled_out_tells_a_first_rollout_from_an_object_that_served() -> None:
    metrics.record_status("ns-r", "r", SpecDecodeDeploymentStatus(serving=ServingSummary()))
    assert samples("ns-r")["warmgate_serving_rolled_out", ""] == 0
    served = SpecDecodeDeploymentStatus(serving=ServingSummary(plan_hash="sha256:" + "a" * 64))
    metrics.record_status("ns-r", "r", served)
    assert samples("ns-r")["warmgate_serving_rolled_out", ""] == 1
    metrics.forget("ns-r", "r")


def test_the_compile_progress_is_the_cost_weighted_fraction_and_1_once_warmed() -> None:
    progress = WarmupProgress(percent=19, compiled_fraction=0.46, warmed_buckets=19)
    running = SpecDecodeDeploymentStatus(warmup=WarmupSummary(progress=progress))
    metrics.record_status("ns-c", "c", running)
    found = samples("ns-c")
    assert found["warmgate_warmup_progress_ratio", ""] == 0.19
    assert found["warmgate_warmup_compile_progress_ratio", ""] == 0.46
    metrics.record_status("ns-c", "c", SpecDecodeDeploymentStatus())
    assert samples("ns-c")["warmgate_warmup_compile_progress_ratio", ""] == 0
    metrics.forget("ns-c", "c")
