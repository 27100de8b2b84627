"""The chart's monitoring files, without a cluster: the dashboard's schema and queries, the names
the alerts and the dashboard read, the kube-state-metrics configuration's shape."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from prometheus_client import REGISTRY
from support.monitoring import (
    PROMETHEUS_RULE_TEMPLATE,
    dashboard,
    ksm_config,
    ksm_metric_names,
    metric_names,
)

import warmgate.handlers.metrics  # noqa: F401 - registers the operator's metrics

SCHEMA = Path(__file__).with_name("grafana_dashboard.schema.json")


def _operator_metric_names() -> set[str]:
    return {family.name for family in REGISTRY.collect() if family.name.startswith("warmgate_")}


def _known() -> set[str]:
    return _operator_metric_names() | ksm_metric_names()


def _dashboard_exprs(doc: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for p in doc["panels"] for t in p["targets"]]
    for var in doc["templating"]["list"]:
        query = var.get("query")
        if var["type"] == "query":
            exprs.append(query["query"] if isinstance(query, dict) else query)
    return exprs


def _alert_exprs() -> dict[str, str]:
    """alert name -> expression, read from the template (template actions become 1)."""
    text = re.sub(r"\{\{[^}]*\}\}", "1", PROMETHEUS_RULE_TEMPLATE.read_text(encoding="utf-8"))
    found = re.findall(r"- alert: (\w+)\n\s+expr: \|\n((?:\s{12}.*\n)+)", text)
    return dict(found)


def test_the_dashboard_matches_the_schema() -> None:
    jsonschema.validate(dashboard(), json.loads(SCHEMA.read_text(encoding="utf-8")))


def test_the_schema_refuses_what_grafana_would_not_load() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    broken = dashboard()
    broken["panels"][0]["targets"] = []
    with pytest.raises(jsonschema.ValidationError, match="should be non-empty"):
        jsonschema.validate(broken, schema)


def test_panels_have_unique_ids_and_do_not_overlap() -> None:
    panels = dashboard()["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        g = panel["gridPos"]
        assert g["x"] + g["w"] <= 24, panel["title"]
        mine = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not cells & mine, f"{panel['title']} overlaps another panel"
        cells |= mine


def test_every_dashboard_query_names_a_metric_that_exists() -> None:
    known = _known()
    for expr in _dashboard_exprs(dashboard()):
        names = metric_names(expr)
        assert names, expr
        assert names <= known, f"{expr}: unknown {sorted(names - known)}"


def test_the_dashboard_shows_what_the_issue_asks_for() -> None:
    used = set().union(*(metric_names(e) for e in _dashboard_exprs(dashboard())))
    assert {
        "kube_specdecodedeployment_status_condition",  # condition timeline
        "warmgate_warmup_progress_ratio",  # warmup progress
        "warmgate_warmup_duration_seconds",  # duration vs estimate
        "warmgate_plan_estimated_warmup_seconds",
        "kube_specdecodedeployment_status_plan_buckets",  # planned, extra, warmed
        "kube_specdecodedeployment_status_plan_extra_buckets",
        "kube_specdecodedeployment_status_warmup_warmed_buckets",
        "kube_specdecodedeployment_status_drift_unwarmed_shapes",  # drift while serving
        "kube_specdecodedeployment_status_serving_ready_replicas",  # ready replicas
    } <= used
    timeline = dashboard()["panels"][0]["targets"][0]["expr"]
    assert "BucketsPlanned|CoverageProven|Warmed|Ready" in timeline


def test_every_alert_names_a_metric_that_exists() -> None:
    alerts = _alert_exprs()
    assert set(alerts) == {
        "WarmgateWarmupFailed",
        "WarmgateStalled",
        "WarmgateWarmupSlow",
        "WarmgateUnwarmedShapeObserved",
        "WarmgateReadyLost",
    }
    known = _known()
    for name, expr in alerts.items():
        assert metric_names(expr) <= known, f"{name}: {sorted(metric_names(expr) - known)}"


def test_the_name_check_catches_a_misspelt_metric() -> None:
    expr = 'max by (namespace) (kube_specdecodedeployment_status_condtion{type="Ready"})'
    assert not metric_names(expr) <= _known()


def test_the_kube_state_metrics_configuration_covers_the_issue() -> None:
    resource = ksm_config()["spec"]["resources"][0]
    assert resource["groupVersionKind"] == {
        "group": "warmgate.dev",
        "version": "v1alpha1",
        "kind": "SpecDecodeDeployment",
    }
    each = [m["each"].get("gauge") or m["each"]["stateSet"] for m in resource["metrics"]]
    paths = {tuple(e["path"]) for e in each}
    assert {
        ("status", "conditions"),
        ("status", "phase"),
        ("status", "plan", "totalBuckets"),
        ("status", "warmup", "warmedBuckets"),
        ("spec", "serving", "replicas"),
        ("status", "serving", "readyReplicas"),
        ("metadata", "generation"),
        ("status", "observedGeneration"),
    } <= paths
