"""The chart's PrometheusRule under the real promtool: rendered by the real helm with the default
values, then `promtool check rules` and `promtool test rules` on synthetic series
(tests/integration/monitoring/alerts_test.yaml)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.monitoring import CHART, tool

from warmgate.devcluster.controlplane import ControlPlane

pytestmark = pytest.mark.integration
TESTS = Path(__file__).with_name("monitoring") / "alerts_test.yaml"


def _render(cp: ControlPlane, *values: str) -> list[dict[str, Any]]:
    helm = cp.assets / "helm"
    if not helm.is_file():
        pytest.skip(f"no helm at {helm}: run `hack/provision-envtest.sh helm`")
    args = [str(helm), "template", "t", str(CHART), "--api-versions", "monitoring.coreos.com/v1"]
    done = subprocess.run([*args, *values], capture_output=True, text=True, check=True)
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def _rules(cp: ControlPlane, folder: Path, *values: str) -> Path:
    docs = _render(cp, "--set", "monitoring.prometheusRule.enabled=true", *values)
    (rule,) = [d for d in docs if d["kind"] == "PrometheusRule"]
    path = folder / "rules.yaml"
    path.write_text(yaml.safe_dump(rule["spec"]))
    return path


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tool("promtool")), *args], capture_output=True, text=True, cwd=cwd, check=False
    )


def test_the_rules_pass_promtool_check(control_plane: ControlPlane, tmp_path: Path) -> None:
    rules = _rules(control_plane, tmp_path)
    done = _promtool("check", "rules", str(rules), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 8 rules found" in done.stdout


def test_every_alert_fires_when_it_should_and_only_then(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    _rules(control_plane, tmp_path)
    shutil.copy(TESTS, tmp_path / TESTS.name)
    done = _promtool("test", "rules", TESTS.name, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_the_slow_factor_value_reaches_the_rule(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    # With k = 10 the 64 minutes of compiles of a 10-minute estimate are not slow: promtool
    # must report exactly that case as failed, so the test file does exercise the value.
    _rules(control_plane, tmp_path, "--set", "monitoring.prometheusRule.warmupSlowFactor=10")
    shutil.copy(TESTS, tmp_path / TESTS.name)
    done = _promtool("test", "rules", TESTS.name, cwd=tmp_path)
    assert done.returncode != 0
    assert "alertname: WarmgateWarmupSlow" in done.stdout + done.stderr
    assert "WarmgateServingUnavailable" not in done.stdout + done.stderr


def test_the_service_monitor_keeps_the_operators_namespace_label(
    control_plane: ControlPlane,
) -> None:
    def endpoint(*values: str) -> dict[str, Any]:
        docs = _render(control_plane, "--set", "metrics.serviceMonitor.enabled=true", *values)
        (monitor,) = [d for d in docs if d["kind"] == "ServiceMonitor"]
        (first,) = monitor["spec"]["endpoints"]
        return dict(first)

    assert endpoint()["honorLabels"] is True
    assert endpoint("--set", "metrics.serviceMonitor.honorLabels=false")["honorLabels"] is False


def test_the_pod_monitor_selects_the_serving_runners(control_plane: ControlPlane) -> None:
    def monitor(*values: str) -> dict[str, Any]:
        docs = _render(control_plane, "--set", "monitoring.podMonitor.enabled=true", *values)
        (found,) = [d for d in docs if d["kind"] == "PodMonitor"]
        return dict(found["spec"])

    spec = monitor()
    assert spec["selector"] == {"matchLabels": {"warmgate.dev/component": "serving"}}
    assert spec["podMetricsEndpoints"][0]["port"] == "warmgate-status"
    assert spec["namespaceSelector"] == {"any": True}
    watched = monitor("--set", "watchNamespaces={team-a,team-b}")
    assert watched["namespaceSelector"] == {"matchNames": ["team-a", "team-b"]}


def test_no_rule_without_the_prometheus_operator_api(control_plane: ControlPlane) -> None:
    helm = control_plane.assets / "helm"
    if not helm.is_file():
        pytest.skip(f"no helm at {helm}: run `hack/provision-envtest.sh helm`")
    args = [
        str(helm),
        "template",
        "t",
        str(CHART),
        "--set",
        "monitoring.prometheusRule.enabled=true",
    ]
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    kinds = {d["kind"] for d in yaml.safe_load_all(done.stdout) if d}
    assert "PrometheusRule" not in kinds
