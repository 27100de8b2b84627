"""The scrape jobs scenario m's Prometheus gets for the chart's ServiceMonitor and PodMonitor
(tests/support/prometheus.py) are, rule for rule, those the real prometheus-operator v0.93.0
generated for them (recorded in monitoring/prometheus-operator-jobs.yaml by
hack/prometheus-operator-jobs.py; the Go module proxy here does not serve the operator, so no
test can build and run it: docs/testing.md, "prometheus-operator").

Only two things differ, both for a Prometheus outside the cluster: the service discovery reaches
the apiserver through a kubeconfig (the operator's Prometheus Pod uses its ServiceAccount), and
`$(SHARD)`, which the Pod's config reloader replaces with the shard number (0 of 1), is 0.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.monitoring import CHART
from support.prometheus import pod_monitor_job, service_monitor_job

from warmgate.devcluster.controlplane import ControlPlane

pytestmark = pytest.mark.integration
RECORDED = Path(__file__).with_name("monitoring") / "prometheus-operator-jobs.yaml"
# the values hack/prometheus-operator-jobs.py renders the chart with
VALUES = ("metrics.serviceMonitor.enabled=true", "monitoring.podMonitor.enabled=true")


def _monitors(cp: ControlPlane) -> dict[str, dict[str, Any]]:
    helm = cp.assets / "helm"
    if not helm.is_file():
        pytest.skip(f"no helm at {helm}: run `hack/provision-envtest.sh helm`")
    args = [str(helm), "template", "warmgate", str(CHART), "--namespace", "warmgate-system"]
    args += ["--api-versions", "monitoring.coreos.com/v1"]
    args += [a for v in VALUES for a in ("--set", v)]
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    return {d["kind"]: d for d in docs if d["kind"] in ("ServiceMonitor", "PodMonitor")}


def _as_the_operator_wrote(job: dict[str, Any]) -> dict[str, Any]:
    """Ours without the kubeconfig a Prometheus outside the cluster needs."""
    for sd in job["kubernetes_sd_configs"]:
        del sd["kubeconfig_file"]
    return job


def _one_shard(value: Any) -> Any:
    """``$(SHARD)`` as the Pod's config reloader writes it with one shard: 0."""
    if isinstance(value, str):
        return value.replace("$(SHARD)", "0")
    if isinstance(value, list):
        return [_one_shard(v) for v in value]
    if isinstance(value, dict):
        return {k: _one_shard(v) for k, v in value.items()}
    return value


def _recorded() -> dict[str, dict[str, Any]]:
    return {job["job_name"]: _one_shard(job) for job in yaml.safe_load(RECORDED.read_text())}


def test_the_jobs_are_those_the_real_prometheus_operator_generated(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    monitors, kubeconfig = _monitors(control_plane), tmp_path / "kubeconfig"
    ours = [
        service_monitor_job(monitors["ServiceMonitor"], kubeconfig),
        pod_monitor_job(monitors["PodMonitor"], kubeconfig),
    ]
    recorded = _recorded()
    assert sorted(recorded) == sorted(job["job_name"] for job in ours)
    for job in ours:
        expected = recorded[job["job_name"]]
        got = _as_the_operator_wrote(job)
        # rule for rule, in the operator's order (relabelling is a pipeline)
        assert got["relabel_configs"] == expected["relabel_configs"], json.dumps(
            {"ours": got["relabel_configs"], "operator": expected["relabel_configs"]}, indent=1
        )
        assert got == expected
