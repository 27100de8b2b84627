"""The chart's monitoring files, without a cluster: the dashboard's schema, layout and
variables, the kube-state-metrics configuration's shape, the alerts' runbooks. Their PromQL is
parsed by the real Prometheus in tests/integration/test_monitoring_queries.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from support.monitoring import CHART, PROMETHEUS_RULE_TEMPLATE, dashboard, ksm_config
from support.paths import REPO_ROOT

SCHEMA = Path(__file__).with_name("grafana_dashboard.schema.json")
RUNBOOKS = REPO_ROOT / "docs" / "runbooks.md"
ALERTS = {
    "WarmgateOperatorAbsent",
    "WarmgateKubeStateMetricsAbsent",
    "WarmgateWarmupFailed",
    "WarmgateStalled",
    "WarmgateWarmupSlow",
    "WarmgateUnwarmedShapeObserved",
    "WarmgateServingUnavailable",
    "WarmgateSyncFailing",
}


def _alert_names() -> list[str]:
    return re.findall(r"- alert: (\w+)", PROMETHEUS_RULE_TEMPLATE.read_text(encoding="utf-8"))


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, spaces to dashes, punctuation gone."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.strip().lower()).replace(" ", "-")


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


def test_every_query_follows_the_cluster_variable() -> None:
    # A Prometheus that scrapes several clusters labels their series `cluster`; "All" is `.*`,
    # which also matches series without the label.
    doc = dashboard()
    names = [v["name"] for v in doc["templating"]["list"]]
    assert names[:4] == ["datasource", "cluster", "namespace", "name"]
    (cluster,) = [v for v in doc["templating"]["list"] if v["name"] == "cluster"]
    assert (cluster["includeAll"], cluster["allValue"]) == (True, ".*")
    for panel in doc["panels"]:
        for target in panel["targets"]:
            selectors = re.findall(r"\w+\{[^}]*\}", target["expr"])
            assert selectors, target["expr"]
            for selector in selectors:
                assert 'cluster=~"$cluster"' in selector, f"{panel['title']}: {selector}"


def test_the_dashboard_shows_the_operators_health() -> None:
    exprs = " ".join(t["expr"] for p in dashboard()["panels"] for t in p["targets"])
    assert "warmgate_sync_failures_total" in exprs
    assert "warmgate_plan_duration_seconds_bucket" in exprs
    assert "warmgate_runner_engine_starts" in exprs  # the PodMonitor's series


def test_the_dashboard_shows_whether_k_pays_off() -> None:
    """Issue 21: the acceptance the serving engines measured, against its ceiling 1 + k."""
    exprs = " ".join(t["expr"] for p in dashboard()["panels"] for t in p["targets"])
    assert "warmgate_serving_spec_decode_acceptance_rate" in exprs
    assert "warmgate_serving_spec_decode_mean_acceptance_length" in exprs
    assert "1 + kube_specdecodedeployment_spec_speculative_tokens" in exprs


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
        ("spec", "speculative", "numSpeculativeTokens"),
        ("status", "serving", "specDecode", "acceptanceRate"),
        ("status", "serving", "specDecode", "meanAcceptanceLength"),
    } <= paths


def test_every_optional_path_reads_zero_or_is_quiet() -> None:
    # A missing path logs an error per object per update unless the gauge reads it as 0 or
    # the metric's errorLogV raises the verbosity that error needs.
    for metric in ksm_config()["spec"]["resources"][0]["metrics"]:
        gauge = metric["each"].get("gauge") or {}
        always = metric["each"].get("gauge", {}).get("path") in (
            ["metadata", "generation"],
            ["spec", "serving", "replicas"],  # defaulted by the CRD
        )
        assert always or gauge.get("nilIsZero") or metric.get("errorLogV"), metric["name"]
    zero = {
        m["name"]
        for m in ksm_config()["spec"]["resources"][0]["metrics"]
        if (m["each"].get("gauge") or {}).get("nilIsZero")
    }
    # the alerts read these as 0: a new drift shape raises the count from 0, an object the
    # operator never reported on has observed generation 0
    assert {"status_drift_unwarmed_shapes", "status_observed_generation"} <= zero


def test_every_alert_has_a_runbook_section() -> None:
    assert set(_alert_names()) == ALERTS
    headings = re.findall(r"^## (.+)$", RUNBOOKS.read_text(encoding="utf-8"), re.M)
    anchors = {_anchor(h) for h in headings}
    template = PROMETHEUS_RULE_TEMPLATE.read_text(encoding="utf-8")
    for alert in ALERTS:
        assert alert in headings, alert
        assert f'runbook_url: "{{{{ $runbook }}}}#{_anchor(alert)}"' in template, alert
        assert _anchor(alert) in anchors
    assert template.count("dashboard_url:") == len(ALERTS)


def test_the_chart_readme_lists_every_alert_with_its_runbook() -> None:
    readme = (CHART / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Monitoring") :]
    for alert in ALERTS:
        assert f"[{alert}](../../docs/runbooks.md#{_anchor(alert)})" in section, alert
    # the picture of the dashboard (drawn by hack/render-dashboard.py in e2e scenario m)
    (picture,) = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", section)
    assert (CHART / picture).resolve().stat().st_size > 10_000
