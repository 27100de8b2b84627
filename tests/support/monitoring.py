"""The monitoring tools the chart's monitoring files are tested with, and the names they use.

kube-state-metrics and promtool are built by `hack/provision-monitoring.sh` (a prerequisite of
`make test`) into `.cache/monitoring/`, or taken from `$MONITORING_TOOLS_DIR`. Without them the
tests that run them skip with the command that provides them; under `CI=true` they fail.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.paths import REPO_ROOT

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


# PromQL words that look like metric names: functions, aggregations, keywords, durations.
_PROMQL_WORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "sum",
    "min",
    "max",
    "avg",
    "count",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "quantile",
    "count_values",
    "group",
    "max_over_time",
    "min_over_time",
    "avg_over_time",
    "rate",
    "irate",
    "increase",
    "delta",
    "label_values",
    "humanizeDuration",
}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![\w(])(?!\s*\()")


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (strings, matchers and groupings removed).

    e.g. 'max by (namespace) (warmgate_ready{name="a"}) > 0' -> {"warmgate_ready"}.
    """
    text = _GROUPING.sub(" ", _MATCHERS.sub(" ", _STRING.sub('""', expr)))
    text = re.sub(r"\[[^\]]*\]", " ", text)  # range selectors and subqueries
    text = re.sub(r"label_values\(\s*([^,()]*?)\s*,\s*\w+\s*\)", r"\1", text)  # Grafana's
    return {m for m in _IDENT.findall(text) if m not in _PROMQL_WORDS and not m.isdigit()}
