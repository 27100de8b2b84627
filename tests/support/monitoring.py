"""The monitoring tools the chart's monitoring files are tested with, and the names they use.

kube-state-metrics and promtool are built by `hack/provision-monitoring.sh` (a prerequisite of
`make test`) into `.cache/monitoring/`, or taken from `$MONITORING_TOOLS_DIR`. Without them the
tests that run them skip with the command that provides them; under `CI=true` they fail.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.paths import REPO_ROOT
from warmgate.runtime import metrics as operator_metrics  # registers the operator's metrics
from warmgate.warmup.serve.tally import ServeTally
from warmgate.warmup.serve.watch import samples

CHART = REPO_ROOT / "charts" / "warmgate"
MONITORING_FILES = CHART / "files" / "monitoring"
KSM_CONFIG = MONITORING_FILES / "kube-state-metrics.yaml"
DASHBOARD = MONITORING_FILES / "dashboard.json"
PROMETHEUS_RULE_TEMPLATE = CHART / "templates" / "monitoring-prometheusrule.yaml"


def tool(name: str) -> Path:
    """The built tool, or a skip (a failure under CI) that names how to build it."""
    folder = Path(os.environ.get("MONITORING_TOOLS_DIR") or REPO_ROOT / ".cache" / "monitoring")
    binary = folder / name
    if binary.is_file() and os.access(binary, os.X_OK):
        return binary
    reason = f"no {name} at {binary}: run `bash hack/provision-monitoring.sh` (part of make test)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the monitoring tests need {name} under CI: {reason}")
    pytest.skip(reason)


def ksm_config() -> dict[str, Any]:
    """The shipped CustomResourceState configuration."""
    loaded: dict[str, Any] = yaml.safe_load(KSM_CONFIG.read_text(encoding="utf-8"))
    return loaded


def ksm_metric_names() -> set[str]:
    """Every series name the configuration defines: <metricNamePrefix>_<name>."""
    names = set()
    for resource in ksm_config()["spec"]["resources"]:
        prefix = resource["metricNamePrefix"]
        names |= {f"{prefix}_{metric['name']}" for metric in resource["metrics"]}
    return names


def dashboard() -> dict[str, Any]:
    """The shipped Grafana dashboard."""
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def operator_series_names() -> set[str]:
    """Every series name the operator's /metrics can show (counters as <name>_total, histograms
    as <name>_bucket, _sum and _count), read from its registry (the API client's and plan
    cache's collectors, registered at start-up, are left out: nothing here reads them)."""
    suffixes = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count")}
    names = set()
    for family in operator_metrics.REGISTRY.collect():
        if family.name.startswith("warmgate_"):
            names |= {family.name + s for s in suffixes.get(family.type, ("",))}
    return names


def runner_series_names() -> set[str]:
    """The series of a serving Pod's runner (`/metrics` on port warmgate-status)."""
    return {name for name, _, _ in samples(ServeTally())}


def known_series_names() -> set[str]:
    """What the dashboard and the alerts may select: the operator's, kube-state-metrics' (the
    chart's configuration), the runners', and Prometheus' own `up`."""
    return operator_series_names() | ksm_metric_names() | runner_series_names() | {"up"}


def dashboard_queries(doc: dict[str, Any]) -> dict[str, str]:
    """Every PromQL expression of the dashboard, by where it is (panel title and refId, or the
    variable), with Grafana's variables replaced as Grafana does for "All" (`.*`) and
    `$__rate_interval` as a duration; a variable's `label_values(<selector>, <label>)` gives
    its selector (Grafana's function, not PromQL)."""
    found = {}
    for panel in doc["panels"]:
        for target in panel["targets"]:
            found[f"{panel['title']} {target['refId']}"] = _grafana(target["expr"])
    for var in doc["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            inner = query.removeprefix("label_values(").removesuffix(")")
            found[f"variable {var['name']}"] = _grafana(inner.rsplit(",", 1)[0])
    return found


def _grafana(expr: str, **values: str) -> str:
    expr = expr.replace("$__rate_interval", "1m")
    for name in ("cluster", "namespace", "name"):
        expr = expr.replace(f"${name}", values.get(name, ".*"))
    return expr


def panel_query(expr: str, **values: str) -> str:
    """A panel's expression as Grafana sends it for the variables' ``values``."""
    return _grafana(expr, **values)
