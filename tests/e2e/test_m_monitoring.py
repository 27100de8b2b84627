"""Scenario m: a real Prometheus watches the local cluster the way a kube-prometheus-stack user's
would, and the chart's dashboard and alerts are checked against what it sees.

Prometheus (built from the same pinned module as promtool) runs on the node's loopback. It
scrapes the operator Pod through the chart's ServiceMonitor and the serving Pods' runners
through the chart's PodMonitor, both turned into the scrape jobs prometheus-operator would
generate (Kubernetes service discovery against the cluster's apiserver), and a real
kube-state-metrics (on loopback, logged in as a ServiceAccount bound by the chart's ClusterRole)
loaded with the chart's CustomResourceState configuration. It evaluates the chart's
PrometheusRule, rendered by the real helm with short `for` values (e2e_monitoring.VALUES). One
SDD goes Ready and then serves an unwarmed shape; another fails its warmup (the stand-in's
`unwarmed_on_probe`): WarmgateWarmupFailed and WarmgateUnwarmedShapeObserved fire. Every other
alert of the chart is fired by its fault in scenario u (tests/e2e/test_u_alerts_fired.py), which
needs no node alone and runs beside the other scenarios.

The dashboard's panels are drawn from this Prometheus by `hack/render-dashboard.py` (matplotlib,
in the dev extra) at every run; `WARMGATE_DASHBOARD_PNG=<file>` keeps the picture in that file.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_monitoring import (
    FIRED_IN_M,
    FIRED_IN_U,
    firing,
    ksm_static_job,
    one,
    render,
    scraped,
)
from e2e_support import E2ECluster, condition, is_true, log_unwarmed, sdd, wait_for
from support.kube_state_metrics import MISSING_PATH_ERROR
from support.monitoring import dashboard, dashboard_queries, panel_query, tool
from support.paths import REPO_ROOT
from support.prometheus import Prometheus, pod_monitor_job, service_monitor_job

from warmgate.devcluster import operator

# Its alerts and dashboards read every object's metrics (tests/support/node_share.py).
pytestmark = pytest.mark.node_alone

READY, FAILED = "watched", "failing"
SHAPE = ["decode", 3, 1, 40]


def _render(e2e: E2ECluster, namespace: str, **extra: str) -> list[dict[str, Any]]:
    """The chart as installed (same release and namespace), with the monitoring parts on."""
    return render(e2e, namespace, **extra)


def _scrape_jobs(e2e: E2ECluster, namespace: str, ksm: str) -> list[dict[str, Any]]:
    docs, kubeconfig = _render(e2e, namespace), e2e.cluster.kubeconfig
    operator_job = service_monitor_job(one(docs, "ServiceMonitor"), kubeconfig)
    # The same ServiceMonitor without honorLabels, as a separate job keeping one series: the
    # label clash a user without it sees (namespace renamed to exported_namespace).
    plain = _render(e2e, namespace, **{"metrics.serviceMonitor.honorLabels": "false"})
    clash = service_monitor_job(one(plain, "ServiceMonitor"), kubeconfig)
    clash["job_name"] += "/without-honor-labels"
    clash["relabel_configs"].append({"target_label": "job", "replacement": "without-honor"})
    clash["metric_relabel_configs"] = [
        {"action": "keep", "source_labels": ["__name__"], "regex": "warmgate_ready"}
    ]
    runners = pod_monitor_job(one(docs, "PodMonitor"), kubeconfig)
    return [operator_job, clash, runners, ksm_static_job(ksm)]


@pytest.fixture(scope="module")
def stack(
    e2e: E2ECluster, namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """kube-state-metrics and Prometheus running; yields them with the time it all began."""
    tool("prometheus")
    folder = tmp_path_factory.mktemp("monitoring")
    docs = _render(e2e, namespace)
    rules = one(docs, "PrometheusRule")["spec"]["groups"]
    began = time.time()
    jobs = functools.partial(_scrape_jobs, e2e, namespace)
    with scraped(e2e, namespace, docs, folder, jobs) as (ksm, prometheus):
        yield {
            "prometheus": prometheus,
            "began": began,
            "folder": folder,
            "ksm": ksm,
            "rules": rules,
        }


@pytest.fixture(scope="module")
def run(e2e: E2ECluster, namespace: str, stack: dict[str, Any]) -> dict[str, Any]:
    """A Ready SDD that then serves an unwarmed shape, and an SDD whose warmup fails."""
    began = time.monotonic()
    e2e.apply(sdd(READY, namespace, e2e.images.engine.ref))
    e2e.apply(sdd(FAILED, namespace, e2e.images.engine.ref, faults="unwarmed_on_probe"))
    wait_for("Ready=True", lambda: _obj_if(e2e, namespace, READY, "Ready"), 240)
    wait_for("Stalled=True", lambda: _obj_if(e2e, namespace, FAILED, "Stalled"), 240)
    _serve_an_unwarmed_shape(e2e, namespace)
    obj = wait_for(
        "Ready reason UnwarmedShapeObserved",
        lambda: _obj_if(e2e, namespace, READY, "Ready", "UnwarmedShapeObserved"),
        60,
    )
    return {"ready": obj, "seconds": time.monotonic() - began, **stack}


def _obj_if(
    e2e: E2ECluster, ns: str, name: str, type_: str, reason: str | None = None
) -> dict[str, Any] | None:
    obj = e2e.get("sdd", "-n", ns, name)
    if not is_true(obj, type_):
        return None
    return obj if reason is None or condition(obj, type_).get("reason") == reason else None


def _serve_an_unwarmed_shape(e2e: E2ECluster, ns: str) -> None:
    """Asks the stand-in engine of the serving Pod to log a shape it did not warm."""
    pods = [p for p in e2e.items("pods", ns, READY) if "serving" in p["metadata"]["name"]]
    (pod,) = [p for p in pods if (p.get("status") or {}).get("podIP")]
    log_unwarmed(pod, [SHAPE])


def test_the_failed_warmup_fires_its_alert_with_the_objects_labels(
    run: dict[str, Any], namespace: str
) -> None:
    prometheus: Prometheus = run["prometheus"]
    (alert,) = wait_for(
        "WarmgateWarmupFailed firing",
        lambda: firing(prometheus, "WarmgateWarmupFailed", name=FAILED),
        90,
    )
    labels = alert["labels"]
    assert labels == {
        "alertname": "WarmgateWarmupFailed",
        "namespace": namespace,
        "name": FAILED,
        "reason": "WarmupFailed",
        "severity": "critical",
    }
    annotations = alert["annotations"]
    assert annotations["runbook_url"].endswith("/docs/runbooks.md#warmgatewarmupfailed")
    assert annotations["dashboard_url"].endswith(f"?var-namespace={namespace}&var-name={FAILED}")
    # one failure, one alert: the failed object is Stalled too, and that fires nothing else
    names = {
        a["labels"]["alertname"] for a in prometheus.alerts() if a["labels"].get("name") == FAILED
    }
    assert names == {"WarmgateWarmupFailed"}


def test_the_unwarmed_shape_fires_its_alert(run: dict[str, Any], namespace: str) -> None:
    prometheus: Prometheus = run["prometheus"]
    (alert,) = wait_for(
        "WarmgateUnwarmedShapeObserved firing",
        lambda: firing(prometheus, "WarmgateUnwarmedShapeObserved", name=READY),
        60,
    )
    assert alert["labels"]["namespace"] == namespace
    assert float(alert["value"]) == 1


def test_the_operators_series_keep_the_objects_namespace(
    run: dict[str, Any], namespace: str
) -> None:
    # With honorLabels the scraped `namespace` is the object's; without it Prometheus renames
    # it to exported_namespace and sets the operator's own (the job kept for this check).
    prometheus: Prometheus = run["prometheus"]
    honored = prometheus.query(f'warmgate_ready{{name="{READY}", job!="without-honor"}}')
    assert [s["metric"]["namespace"] for s in honored] == [namespace]
    assert "exported_namespace" not in honored[0]["metric"]
    assert honored[0]["metric"]["job"] == f"{operator.RELEASE}-metrics"
    clashed = wait_for(
        "the job without honorLabels scraped",
        lambda: prometheus.query(f'warmgate_ready{{name="{READY}", job="without-honor"}}'),
        30,
    )
    assert clashed[0]["metric"]["namespace"] == operator.NAMESPACE
    assert clashed[0]["metric"]["exported_namespace"] == namespace


def test_a_ready_object_shows_the_series_the_dashboard_reads(
    run: dict[str, Any], namespace: str
) -> None:
    prometheus: Prometheus = run["prometheus"]
    at = f'namespace="{namespace}", name="{READY}"'
    phase = prometheus.query(f"kube_specdecodedeployment_status_phase{{{at}}} == 1")
    assert [s["metric"]["phase"] for s in phase] == ["Ready"]
    conditions = prometheus.query(
        f'kube_specdecodedeployment_status_condition{{{at}, status="True"}} == 1'
    )
    assert {s["metric"]["type"] for s in conditions} >= {
        "BucketsPlanned",
        "CoverageProven",
        "Warmed",
        "Ready",
    }


# The stand-in engine serves no vLLM spec-decode counters, so the measured acceptance has no
# series here; tests/integration/test_operator_acceptance.py checks the same gauges against
# a real vLLM engine (acceptance 1.0 and 0.0).
NO_DATA_FROM_THE_STANDIN = {
    "Spec-decode acceptance rate (measured by the engines) A": "no spec-decode counters",
    "Does k pay off? Mean acceptance length vs 1 + k A": "no spec-decode counters",
}


def test_every_dashboard_query_returns_data_for_the_ready_object(
    run: dict[str, Any], namespace: str
) -> None:
    # Each panel's expression as Grafana sends it with the Ready object selected ("All"
    # clusters, a 5-minute rate interval), through the HTTP API.
    prometheus: Prometheus = run["prometheus"]
    empty, asked = {}, 0
    for panel in dashboard()["panels"]:
        for target in panel["targets"]:
            expr = target["expr"].replace("$__rate_interval", "5m")
            expr = panel_query(expr, namespace=namespace, name=READY)
            asked += 1
            if not prometheus.query(expr):
                empty[f"{panel['title']} {target['refId']}"] = expr
    assert asked == len([q for q in dashboard_queries(dashboard()) if not q.startswith("var")])
    titles = {f"{p['title']} {t['refId']}" for p in dashboard()["panels"] for t in p["targets"]}
    assert set(NO_DATA_FROM_THE_STANDIN) <= titles, "an exemption names no query"
    assert {k: v for k, v in empty.items() if k not in NO_DATA_FROM_THE_STANDIN} == {}


def test_the_variables_offer_the_objects(run: dict[str, Any], namespace: str) -> None:
    prometheus: Prometheus = run["prometheus"]
    selector = f'kube_specdecodedeployment_status_phase{{namespace="{namespace}"}}'
    names = prometheus.api("label/name/values", **{"match[]": selector})
    assert sorted(names) == sorted([READY, FAILED])


def test_no_health_alert_fires_while_everything_runs(run: dict[str, Any]) -> None:
    prometheus: Prometheus = run["prometheus"]
    up = prometheus.query(f'up{{job="{operator.RELEASE}-metrics"}} == 1')
    assert up, prometheus.targets()
    for alert in ("WarmgateOperatorAbsent", "WarmgateKubeStateMetricsAbsent"):
        assert firing(prometheus, alert) == [], alert


def test_kube_state_metrics_logged_no_missing_path(run: dict[str, Any]) -> None:
    log = (run["folder"] / "ksm.log").read_text()
    assert MISSING_PATH_ERROR not in log, log[-2000:]


def test_the_picture_of_the_dashboard(run: dict[str, Any], namespace: str, tmp_path: Path) -> None:
    # Drawn at every run; WARMGATE_DASHBOARD_PNG=docs/images/dashboard.png keeps it for the
    # chart README.
    out = os.environ.get("WARMGATE_DASHBOARD_PNG") or str(tmp_path / "dashboard.png")
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("matplotlib is not installed (the dev extra has it): no picture drawn")
    prometheus: Prometheus = run["prometheus"]
    args = [
        sys.executable,
        str(REPO_ROOT / "hack" / "render-dashboard.py"),
        "--prometheus",
        prometheus.url,
        "--start",
        str(run["began"]),
        "--end",
        str(time.time()),
        "--namespace",
        namespace,
        "--out",
        out,
    ]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert Path(out).stat().st_size > 10_000
    # every panel drawn with data but those whose every query the stand-in cannot feed
    # (NO_DATA_FROM_THE_STANDIN: the measured acceptance rate; the acceptance length panel
    # still draws its 1 + k line)
    panels = dashboard()["panels"]
    unfed = [
        p
        for p in panels
        if all(f"{p['title']} {t['refId']}" in NO_DATA_FROM_THE_STANDIN for t in p["targets"])
    ]
    assert f"({len(unfed)} panel(s) without data)" in done.stdout, done.stdout


def test_every_alert_of_the_chart_fired_here_or_in_u(run: dict[str, Any]) -> None:
    # the chart's alerts are the two fired by this run and those scenario u fires by their
    # faults (tests/e2e/test_u_alerts_fired.py): none left out
    names = {rule["alert"] for group in run["rules"] for rule in group["rules"]}
    assert names == {*FIRED_IN_M, *FIRED_IN_U}
