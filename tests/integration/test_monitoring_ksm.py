"""A real kube-state-metrics with the chart's CustomResourceState configuration, against the real
apiserver: the ConfigMap and RBAC rendered by the real helm, kube-state-metrics logged in as its
own ServiceAccount, the series of a real SpecDecodeDeployment asserted, and followed when its
status changes."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from support import kube_state_metrics
from support.examples import example_doc
from support.kube_state_metrics import MISSING_PATH_ERROR, token_kubeconfig
from support.monitoring import CHART, ksm_metric_names, tool

from warmgate.api.status import (
    Condition,
    DriftSummary,
    PlanSummary,
    ServingSummary,
    SpecDecodeAcceptance,
    SpecDecodeDeploymentStatus,
    WarmupProgress,
    WarmupSummary,
)
from warmgate.devcluster.controlplane import ControlPlane

pytestmark = pytest.mark.integration
NAME = "watched"
Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _status(ready: str, reason: str) -> dict[str, Any]:
    at = "2026-11-30T10:00:00Z"
    conditions = [
        Condition(type=t, status=s, reason=r, message="", last_transition_time=at)  # type: ignore[arg-type]
        for t, s, r in (
            ("BucketsPlanned", "True", "Planned"),
            ("CoverageProven", "True", "CoverageComplete"),
            ("Warmed", "True", "WarmupSucceeded"),
            ("Ready", ready, reason),
        )
    ]
    status = SpecDecodeDeploymentStatus(
        observed_generation=1,
        phase="Ready" if ready == "True" else "Starting",
        conditions=conditions,
        plan=PlanSummary(
            total_buckets=223,
            prompt_buckets=34,
            spec_decode_buckets=189,
            extra_buckets=5,
            uncovered_count=0,
            estimated_warmup_seconds=337,
        ),
        warmup=WarmupSummary(
            warmed_buckets=223,
            attempts=1,
            duration_seconds=301,
            progress=WarmupProgress(percent=100, warmed_buckets=223, planned_buckets=223),
        ),
        serving=ServingSummary(
            replicas=2,
            ready_replicas=2 if ready == "True" else 1,
            spec_decode=SpecDecodeAcceptance(acceptance_rate=0.25, mean_acceptance_length=1.5),
        ),
        drift=DriftSummary(unwarmed_shapes=2, plan_hash="abc"),
    )
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


def _helm_docs(cp: ControlPlane, namespace: str) -> list[dict[str, Any]]:
    helm = cp.assets / "helm"
    if not helm.is_file():
        pytest.skip(f"no helm at {helm}: run `hack/provision-envtest.sh helm`")
    values = [
        "--set",
        "crds.install=false",
        "--set",
        "monitoring.kubeStateMetrics.enabled=true",
        "--set",
        "monitoring.kubeStateMetrics.serviceAccount.name=ksm",
    ]
    only = ["--show-only", "templates/monitoring-kube-state-metrics.yaml"]
    args = [str(helm), "template", _release(namespace), str(CHART), "-n", namespace, *only]
    done = subprocess.run([*args, *values], capture_output=True, text=True, check=True)
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def _release(namespace: str) -> str:
    return f"ksm-{namespace[-6:]}"  # the namespace's random suffix: cluster-scoped names differ


@pytest.fixture
def ksm(warmgate_crd: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[str]:
    """kube-state-metrics as the chart sets it up; yields its /metrics URL."""
    tool("kube-state-metrics")
    cp = warmgate_crd
    docs = _helm_docs(cp, namespace)
    assert {d["kind"] for d in docs} == {"ConfigMap", "ClusterRole", "ClusterRoleBinding"}
    cp.kubectl("create", "serviceaccount", "ksm", "-n", namespace)
    cp.kubectl(
        "apply", "-f", "-", stdin=json.dumps({"kind": "List", "apiVersion": "v1", "items": docs})
    )
    (configmap,) = [d for d in docs if d["kind"] == "ConfigMap"]
    config = tmp_path / "custom-resource-state.yaml"
    config.write_text(configmap["data"]["custom-resource-state.yaml"])
    login = token_kubeconfig(cp, "ksm", namespace, tmp_path / "kubeconfig")
    try:
        with kube_state_metrics.running(login, config, namespace, tmp_path / "ksm.log") as at:
            yield f"http://{at}/metrics"
    finally:
        for cluster_scoped in ("clusterrolebinding", "clusterrole"):
            name = f"{_release(namespace)}-warmgate-kube-state-metrics"
            cp.kubectl("delete", cluster_scoped, name, check=False)


def _series(url: str) -> Series:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        text = opener.open(url, timeout=5).read().decode()
    except OSError:
        return {}
    found: Series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("name") == NAME:
                labels = tuple(
                    sorted(
                        (k, v)
                        for k, v in sample.labels.items()
                        if not k.startswith("customresource_")
                    )
                )
                found[(sample.name, labels)] = sample.value
    return found


def _wait(url: str, check: Any, timeout: float = 60.0) -> Series:
    deadline, found = time.monotonic() + timeout, {}
    while time.monotonic() < deadline:
        found = _series(url)
        if found and check(found):
            return found
        time.sleep(0.5)
    raise AssertionError(f"kube-state-metrics never showed it; last series: {found}")


def _value(series: Series, name: str, **labels: str) -> float | None:
    for (found, pairs), value in series.items():
        if found == name and labels.items() <= dict(pairs).items():
            return value
    return None


def _apply_status(cp: ControlPlane, namespace: str, status: dict[str, Any]) -> None:
    patch = json.dumps({"status": status})
    cp.kubectl(
        "patch", "sdd", NAME, "-n", namespace, "--subresource=status", "--type=merge", "-p", patch
    )


def test_kube_state_metrics_exposes_every_configured_series(
    warmgate_crd: ControlPlane, namespace: str, ksm: str
) -> None:
    doc = example_doc("llama31-8b-seeds")
    doc["metadata"].update(name=NAME, namespace=namespace)
    doc["spec"]["serving"] = {**doc["spec"].get("serving", {}), "replicas": 2}
    warmgate_crd.kubectl("apply", "-f", "-", stdin=json.dumps(doc))
    _apply_status(warmgate_crd, namespace, _status("True", "ReplicasReady"))
    series = _wait(
        ksm,
        lambda s: _value(s, "kube_specdecodedeployment_status_drift_unwarmed_shapes") is not None,
    )
    names = {name for name, _ in series}
    assert ksm_metric_names() <= names, sorted(ksm_metric_names() - names)
    expect = {
        ("kube_specdecodedeployment_status_plan_buckets", ()): 223,
        ("kube_specdecodedeployment_status_plan_extra_buckets", ()): 5,
        ("kube_specdecodedeployment_status_warmup_warmed_buckets", ()): 223,
        ("kube_specdecodedeployment_status_warmup_duration_seconds", ()): 301,
        ("kube_specdecodedeployment_spec_serving_replicas", ()): 2,
        ("kube_specdecodedeployment_status_serving_ready_replicas", ()): 2,
        ("kube_specdecodedeployment_status_drift_unwarmed_shapes", ()): 2,
        ("kube_specdecodedeployment_spec_speculative_tokens", ()): 2,
        ("kube_specdecodedeployment_status_serving_spec_decode_acceptance_rate", ()): 0.25,
        ("kube_specdecodedeployment_status_serving_spec_decode_mean_acceptance_length", ()): 1.5,
        ("kube_specdecodedeployment_metadata_generation", ()): 1,
        ("kube_specdecodedeployment_status_observed_generation", ()): 1,
    }
    for (name, _), value in expect.items():
        assert _value(series, name, namespace=namespace) == value, name
    ready = {"type": "Ready", "status": "True", "reason": "ReplicasReady"}
    assert _value(series, "kube_specdecodedeployment_status_condition", **ready) == 1
    assert _value(series, "kube_specdecodedeployment_status_phase", phase="Ready") == 1
    assert _value(series, "kube_specdecodedeployment_status_phase", phase="Warming") == 0


def test_kube_state_metrics_follows_a_lost_ready(
    warmgate_crd: ControlPlane, namespace: str, ksm: str
) -> None:
    doc = example_doc("llama31-8b-seeds")
    doc["metadata"].update(name=NAME, namespace=namespace)
    warmgate_crd.kubectl("apply", "-f", "-", stdin=json.dumps(doc))
    _apply_status(warmgate_crd, namespace, _status("True", "ReplicasReady"))
    _wait(ksm, lambda s: _value(s, "kube_specdecodedeployment_status_condition", type="Ready") == 1)
    _apply_status(warmgate_crd, namespace, _status("False", "ServingProgressing"))
    lost = {"type": "Ready", "status": "False", "reason": "ServingProgressing"}
    series = _wait(
        ksm, lambda s: _value(s, "kube_specdecodedeployment_status_condition", **lost) == 0
    )
    assert (
        _value(series, "kube_specdecodedeployment_status_condition", type="Ready", status="True")
        is None
    )
    assert _value(series, "kube_specdecodedeployment_status_phase", phase="Starting") == 1


def test_missing_paths_read_zero_or_log_nothing(
    warmgate_crd: ControlPlane, namespace: str, ksm: str, tmp_path: Path
) -> None:
    # An object before any status, then planned but never warmed or served: every optional
    # path is missing at some point. kube-state-metrics logged "got nil while resolving path"
    # for each of them on every update of every object.
    doc = example_doc("llama31-8b-seeds")
    doc["metadata"].update(name=NAME, namespace=namespace)
    warmgate_crd.kubectl("apply", "-f", "-", stdin=json.dumps(doc))
    _wait(ksm, lambda s: _value(s, "kube_specdecodedeployment_metadata_generation") == 1)
    planned = {"observedGeneration": 1, "phase": "Warming", "plan": {"totalBuckets": 223}}
    _apply_status(warmgate_crd, namespace, planned)
    series = _wait(ksm, lambda s: _value(s, "kube_specdecodedeployment_status_plan_buckets") == 223)
    zero = (
        "kube_specdecodedeployment_status_drift_unwarmed_shapes",
        "kube_specdecodedeployment_status_warmup_attempts",
        "kube_specdecodedeployment_status_serving_ready_replicas",
        "kube_specdecodedeployment_status_plan_extra_buckets",
    )
    for name in zero:
        assert _value(series, name) == 0, name
    for absent in (  # not known yet: no series rather than a false 0
        "kube_specdecodedeployment_status_warmup_duration_seconds",
        "kube_specdecodedeployment_status_warmup_progress_percent",
    ):
        assert _value(series, absent) is None, absent
    log = (tmp_path / "ksm.log").read_text()
    assert MISSING_PATH_ERROR not in log, log[-2000:]
