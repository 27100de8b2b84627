"""Every PromQL expression the chart ships, through the real Prometheus parser: the dashboard's
panels and variables, and the alerts of the PrometheusRule rendered by the real helm. Each must
parse (Prometheus' `/api/v1/parse_query`, the parser its engine uses) and select only series
that exist: the operator's, kube-state-metrics' (the chart's configuration), the runners' and
`up`."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest
import yaml
from support.monitoring import CHART, dashboard, dashboard_queries, known_series_names
from support.prometheus import Prometheus, PrometheusError, selected_metrics

from warmgate.devcluster.controlplane import ControlPlane

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """A Prometheus with nothing to scrape: its parser is what is used."""
    with Prometheus(tmp_path_factory.mktemp("prometheus"), [], []) as running:
        yield running


def _alert_exprs(cp: ControlPlane) -> dict[str, str]:
    helm = cp.assets / "helm"
    if not helm.is_file():
        pytest.skip(f"no helm at {helm}: run `hack/provision-envtest.sh helm`")
    args = [str(helm), "template", "t", str(CHART), "--api-versions", "monitoring.coreos.com/v1"]
    values = ["--set", "monitoring.prometheusRule.enabled=true"]
    done = subprocess.run([*args, *values], capture_output=True, text=True, check=True)
    (rule,) = [d for d in yaml.safe_load_all(done.stdout) if d and d["kind"] == "PrometheusRule"]
    return {r["alert"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]}


def _names(prometheus: Prometheus, expr: str) -> set[str]:
    return selected_metrics(prometheus.parse(expr))


def test_every_dashboard_query_parses_and_selects_known_series(prometheus: Prometheus) -> None:
    known = known_series_names()
    queries = dashboard_queries(dashboard())
    assert len(queries) >= 20
    for where, expr in queries.items():
        names = _names(prometheus, expr)
        assert names, f"{where}: selects nothing: {expr}"
        assert names <= known, f"{where}: unknown {sorted(names - known)}"


def test_every_alert_parses_and_selects_known_series(
    prometheus: Prometheus, control_plane: ControlPlane
) -> None:
    known = known_series_names()
    alerts = _alert_exprs(control_plane)
    assert len(alerts) == 8
    for alert, expr in alerts.items():
        names = _names(prometheus, expr)
        assert names <= known, f"{alert}: unknown {sorted(names - known)}"


def test_the_dashboard_shows_what_the_issues_ask_for(prometheus: Prometheus) -> None:
    used: set[str] = set()
    for expr in dashboard_queries(dashboard()).values():
        used |= _names(prometheus, expr)
    assert {
        "kube_specdecodedeployment_status_condition",  # condition timeline
        "kube_specdecodedeployment_status_phase",
        "warmgate_warmup_progress_ratio",  # warmup progress
        "warmgate_warmup_duration_seconds",  # duration vs estimate
        "warmgate_plan_estimated_warmup_seconds",
        "kube_specdecodedeployment_status_plan_buckets",  # planned, extra, warmed
        "kube_specdecodedeployment_status_plan_extra_buckets",
        "kube_specdecodedeployment_status_warmup_warmed_buckets",
        "kube_specdecodedeployment_status_drift_unwarmed_shapes",  # drift while serving
        "kube_specdecodedeployment_status_serving_ready_replicas",  # ready replicas
        "warmgate_sync_failures_total",  # operator health (issue 24)
        "warmgate_plan_duration_seconds_bucket",
        "warmgate_runner_engine_starts",  # the PodMonitor's series
        "warmgate_serving_spec_decode_acceptance_rate",  # does k pay off (issue 21)
        "warmgate_serving_spec_decode_mean_acceptance_length",
        "kube_specdecodedeployment_spec_speculative_tokens",
    } <= used


def test_the_parser_refuses_what_is_not_promql_and_names_what_is_misspelt(
    prometheus: Prometheus,
) -> None:
    with pytest.raises(PrometheusError, match="parse error"):
        prometheus.parse('max by (namespace (kube_specdecodedeployment_status_phase{name="a"})')
    with pytest.raises(PrometheusError):  # a Grafana variable left in is no PromQL
        prometheus.parse("rate(warmgate_follower_syncs_total[$__rate_interval])")
    misspelt = 'max by (namespace) (kube_specdecodedeployment_status_condtion{type="Ready"})'
    assert not _names(prometheus, misspelt) <= known_series_names()
    # selectors inside functions, aggregations, binary operations and label_replace are found
    nested = 'label_replace(max(rate(a_total[5m])) - on() b{x="1"} offset 1m, "l", "v", "", "")'
    assert _names(prometheus, nested) == {"a_total", "b"}


def test_the_built_prometheus_discovers_through_kubernetes_sd(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The build leaves out every service discovery but kubernetes (and file/http, always in):
    scenario m's jobs need kubernetes_sd_configs, and a build without it would refuse this
    configuration at start-up (an unknown field). The apiserver's own `kubernetes` Service is
    the one object there is to discover."""
    sd = {"role": "service", "kubeconfig_file": str(control_plane.kubeconfig)}
    sd["namespaces"] = {"names": ["default"]}
    job = {"job_name": "services", "scrape_interval": "1s", "kubernetes_sd_configs": [sd]}
    with Prometheus(tmp_path_factory.mktemp("prometheus-sd"), [job], []) as running:
        deadline = time.monotonic() + 30
        while not (found := running.targets()) and time.monotonic() < deadline:
            time.sleep(0.5)
    names = {t["discoveredLabels"].get("__meta_kubernetes_service_name") for t in found}
    assert "kubernetes" in names, f"nothing discovered: {found}"


def test_selectors_of_a_parse_tree() -> None:
    tree = {
        "type": "binaryExpr",
        "lhs": {"type": "vectorSelector", "name": "up", "matchers": []},
        "rhs": {
            "type": "call",
            "args": [
                {
                    "type": "matrixSelector",
                    "name": "",
                    "matchers": [{"name": "__name__", "type": "=", "value": "x_total"}],
                }
            ],
        },
    }
    assert selected_metrics(tree) == {"up", "x_total"}
