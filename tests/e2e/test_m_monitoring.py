"""Scenario m: a real Prometheus watches the local cluster the way a kube-prometheus-stack user's
would, and the chart's dashboard and alerts are checked against what it sees.

Prometheus (built from the same pinned module as promtool) runs on the node's loopback. It
scrapes the operator Pod through the chart's ServiceMonitor and the serving Pods' runners
through the chart's PodMonitor, both turned into the scrape jobs prometheus-operator would
generate (Kubernetes service discovery against the cluster's apiserver), and a real
kube-state-metrics (on loopback, logged in as a ServiceAccount bound by the chart's ClusterRole)
loaded with the chart's CustomResourceState configuration. It evaluates the chart's
PrometheusRule, rendered by the real helm with short `for` values. One SDD goes Ready and then
serves an unwarmed shape; another fails its warmup (the stand-in's `unwarmed_on_probe`).

Then every other alert of the chart fires once and resolves, each by the fault it is for
(`fired`): serving scaled to nothing (a ResourceQuota of 0 Pods, the serving Pod deleted),
a frozen object (an admission policy refuses its status writes, its spec changes: every sync
fails and the generation goes unobserved), a warmup that compiles slower than twice its
estimate (the stand-in's `graph_seconds`), kube-state-metrics stopped, the operator scaled to
0. The rules keep their expressions; only `for` and the range windows are shorter (VALUES).

The dashboard's panels are drawn from this Prometheus by `hack/render-dashboard.py` (matplotlib,
in the dev extra) at every run; `WARMGATE_DASHBOARD_PNG=<file>` keeps the picture in that file.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_support import E2ECluster, condition, is_true, sdd, wait_for
from support import kube_state_metrics
from support.kube_state_metrics import MISSING_PATH_ERROR, token_kubeconfig
from support.monitoring import dashboard, dashboard_queries, panel_query, tool
from support.paths import REPO_ROOT
from support.prometheus import Prometheus, pod_monitor_job, service_monitor_job

from warmgate.devcluster import operator

# Its alerts and dashboards read every object's metrics (tests/support/node_share.py).
pytestmark = pytest.mark.node_alone

READY, FAILED, SLOW = "watched", "failing", "slow"
# SLOW: a small plan (10 buckets, an estimate of ~14 s) whose stand-in takes 7 s a graph
# (~70 s): its compile rate projects to more than twice the estimate, the chart's
# warmupSlowFactor. It warms while the others go Ready and Stalled.
SLOW_ENGINE = {"maxModelLen": 256, "maxNumSeqs": 1, "maxNumBatchedTokens": 256}
SHAPE = ["decode", 3, 1, 40]
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# Short enough for a scenario, long enough that a pending alert is not a blink. Only the `for`
# durations and the range windows are shortened (chart values); every expression, threshold and
# factor is the chart's.
VALUES = {
    "metrics.serviceMonitor.enabled": "true",
    "metrics.serviceMonitor.interval": "2s",
    "monitoring.podMonitor.enabled": "true",
    "monitoring.podMonitor.interval": "2s",
    "monitoring.prometheusRule.enabled": "true",
    "monitoring.prometheusRule.warmupFailedFor": "5s",
    "monitoring.prometheusRule.stalledFor": "5s",
    "monitoring.prometheusRule.servingUnavailableFor": "30s",
    "monitoring.prometheusRule.operatorAbsentFor": "15s",
    "monitoring.prometheusRule.operatorAbsentWindow": "20s",
    "monitoring.prometheusRule.kubeStateMetricsAbsentFor": "15s",
    "monitoring.prometheusRule.unwarmedWindow": "5m",
    "monitoring.prometheusRule.warmupSlowWindow": "20s",
    "monitoring.prometheusRule.warmupSlowFor": "5s",
    "monitoring.prometheusRule.syncFailingFor": "10s",
    "monitoring.kubeStateMetrics.enabled": "true",
    "monitoring.kubeStateMetrics.serviceAccount.name": "kube-state-metrics",
}


def _render(e2e: E2ECluster, namespace: str, **extra: str) -> list[dict[str, Any]]:
    """The chart as installed (same release and namespace), with the monitoring parts on."""
    values = {**VALUES, "monitoring.kubeStateMetrics.serviceAccount.namespace": namespace, **extra}
    sets = [a for k, v in values.items() for a in ("--set", f"{k}={v}")]
    done = operator.helm(
        e2e.cluster.assets,
        e2e.cluster.kubeconfig,
        "template",
        operator.RELEASE,
        str(operator.CHART),
        "--namespace",
        operator.NAMESPACE,
        "--api-versions",
        "monitoring.coreos.com/v1",
        *sets,
    )
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


def _scrape_jobs(e2e: E2ECluster, namespace: str, ksm: str) -> list[dict[str, Any]]:
    docs, kubeconfig = _render(e2e, namespace), e2e.cluster.kubeconfig
    operator_job = service_monitor_job(_one(docs, "ServiceMonitor"), kubeconfig)
    # The same ServiceMonitor without honorLabels, as a separate job keeping one series: the
    # label clash a user without it sees (namespace renamed to exported_namespace).
    plain = _render(e2e, namespace, **{"metrics.serviceMonitor.honorLabels": "false"})
    clash = service_monitor_job(_one(plain, "ServiceMonitor"), kubeconfig)
    clash["job_name"] += "/without-honor-labels"
    clash["relabel_configs"].append({"target_label": "job", "replacement": "without-honor"})
    clash["metric_relabel_configs"] = [
        {"action": "keep", "source_labels": ["__name__"], "regex": "warmgate_ready"}
    ]
    runners = pod_monitor_job(_one(docs, "PodMonitor"), kubeconfig)
    # kube-state-metrics is scraped with honor_labels, as the kube-prometheus-stack does.
    static = {"job_name": "kube-state-metrics", "honor_labels": True, "scrape_interval": "2s"}
    static["static_configs"] = [{"targets": [ksm], "labels": {"job": "kube-state-metrics"}}]
    return [operator_job, clash, runners, static]


@pytest.fixture(scope="module")
def stack(
    e2e: E2ECluster, namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """kube-state-metrics and Prometheus running; yields them with the time it all began."""
    tool("prometheus")
    folder = tmp_path_factory.mktemp("monitoring")
    docs = _render(e2e, namespace)
    rbac = [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    rbac = [d for d in rbac if "kube-state-metrics" in d["metadata"]["name"]]
    e2e.kubectl("create", "serviceaccount", "kube-state-metrics", "-n", namespace)
    e2e.apply({"kind": "List", "apiVersion": "v1", "items": rbac})
    config = folder / "custom-resource-state.yaml"
    config.write_text(_one(docs, "ConfigMap")["data"]["custom-resource-state.yaml"])
    cp = e2e.cluster.cp
    assert cp is not None
    login = token_kubeconfig(cp, "kube-state-metrics", namespace, folder / "ksm-kubeconfig")
    rules = _one(docs, "PrometheusRule")["spec"]["groups"]
    began = time.time()
    try:
        with kube_state_metrics.started(login, config, namespace, folder / "ksm.log") as ksm:
            jobs = _scrape_jobs(e2e, namespace, ksm.address)
            with Prometheus(folder, jobs, rules) as prometheus:
                yield {
                    "prometheus": prometheus,
                    "began": began,
                    "folder": folder,
                    "ksm": ksm,
                    "rules": rules,
                }
    finally:
        for item in rbac:
            e2e.kubectl("delete", item["kind"].lower(), item["metadata"]["name"], check=False)


@pytest.fixture(scope="module")
def run(e2e: E2ECluster, namespace: str, stack: dict[str, Any]) -> dict[str, Any]:
    """A Ready SDD that then serves an unwarmed shape, and an SDD whose warmup fails; beside
    them, a slow warmup for WarmgateWarmupSlow (`fired`)."""
    began = time.monotonic()
    e2e.apply(sdd(READY, namespace, e2e.images.engine.ref))
    e2e.apply(sdd(FAILED, namespace, e2e.images.engine.ref, faults="unwarmed_on_probe"))
    slow = sdd(SLOW, namespace, e2e.images.engine.ref, k=1, faults="graph_seconds=7")
    slow["spec"]["engine"].update(SLOW_ENGINE)
    e2e.apply(slow)
    wait_for("Ready=True", lambda: _obj_if(e2e, namespace, READY, "Ready"), 240)
    wait_for("Stalled=True", lambda: _obj_if(e2e, namespace, FAILED, "Stalled"), 240)
    _serve_an_unwarmed_shape(e2e, namespace)
    obj = wait_for(
        "Ready reason UnwarmedShapeObserved",
        lambda: _obj_if(e2e, namespace, READY, "Ready", "UnwarmedShapeObserved"),
        60,
    )
    return {"ready": obj, "seconds": time.monotonic() - began, "slow_began": began, **stack}


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
    ip, port = pod["status"]["podIP"], pod["spec"]["containers"][0]["ports"][0]["containerPort"]
    request = urllib.request.Request(
        f"http://{ip}:{port}/standin/unwarmed",
        data=json.dumps({"configs": [SHAPE]}).encode(),
        headers={"Content-Type": "application/json"},
    )
    _OPENER.open(request, timeout=10).read()


def _firing(prometheus: Prometheus, alert: str, **labels: str) -> list[dict[str, Any]]:
    return [
        a
        for a in prometheus.alerts()
        if a["labels"]["alertname"] == alert
        and a["state"] == "firing"
        and labels.items() <= a["labels"].items()
    ]


def test_the_failed_warmup_fires_its_alert_with_the_objects_labels(
    run: dict[str, Any], namespace: str
) -> None:
    prometheus: Prometheus = run["prometheus"]
    (alert,) = wait_for(
        "WarmgateWarmupFailed firing",
        lambda: _firing(prometheus, "WarmgateWarmupFailed", name=FAILED),
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
        lambda: _firing(prometheus, "WarmgateUnwarmedShapeObserved", name=READY),
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
    assert sorted(names) == sorted([READY, FAILED, SLOW])


def test_no_health_alert_fires_while_everything_runs(run: dict[str, Any]) -> None:
    prometheus: Prometheus = run["prometheus"]
    up = prometheus.query(f'up{{job="{operator.RELEASE}-metrics"}} == 1')
    assert up, prometheus.targets()
    for alert in ("WarmgateOperatorAbsent", "WarmgateKubeStateMetricsAbsent"):
        assert _firing(prometheus, alert) == [], alert


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


# ---- every other alert, fired once by its fault and resolved (after the picture: the
# dashboard shows the run without them) ----

FREEZE = "warmgate-e2e-m-freeze"
QUOTA = "no-pods"
ALERTS = (
    "WarmgateServingUnavailable",
    "WarmgateSyncFailing",
    "WarmgateStalled",
    "WarmgateWarmupSlow",
    "WarmgateKubeStateMetricsAbsent",
    "WarmgateOperatorAbsent",
)


def _freeze(namespace: str, name: str) -> list[dict[str, Any]]:
    """An admission policy refusing the status writes of ``namespace/name`` (every sync of it
    fails: the operator's status patch is its last write)."""
    rules = [
        {
            "apiGroups": ["warmgate.dev"],
            "apiVersions": ["*"],
            "operations": ["UPDATE"],
            "resources": ["specdecodedeployments/status"],
        }
    ]
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": FREEZE},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": rules},
            "validations": [
                {
                    "expression": f"object.metadata.name != '{name}'",
                    "message": "frozen by scenario m",
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": FREEZE},
        "spec": {
            "policyName": FREEZE,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            },
        },
    }
    return [policy, binding]


class Firing:
    """When an alert was first seen firing and then seen resolved, or what went wrong."""

    def __init__(
        self, prometheus: Prometheus, alert: str, began: float | None = None, **labels: str
    ) -> None:
        self.prometheus, self.alert, self.labels = prometheus, alert, labels
        self.began = time.monotonic() if began is None else began
        self.fired: float | None = None
        self.resolved: float | None = None
        self.error = ""

    def wait_fired(self, timeout: float) -> None:
        wait_for(
            f"{self.alert} firing",
            lambda: _firing(self.prometheus, self.alert, **self.labels),
            timeout,
        )
        self.fired = time.monotonic() - self.began

    def wait_history(self, timeout: float) -> None:
        """Fired and resolved, seen in Prometheus' own ALERTS series since the record began:
        for an alert that may come and go while the scenario does something else."""
        selector = ", ".join(
            f'{k}="{v}"' for k, v in {"alertname": self.alert, **self.labels}.items()
        )
        start = time.time() - (time.monotonic() - self.began)

        def seen() -> bool:
            now = time.time()
            series = self.prometheus.query_range(
                f'ALERTS{{{selector}, alertstate="firing"}}', start, now
            )
            times = [float(t) for s in series for t, _ in s["values"]]
            if not times or _firing(self.prometheus, self.alert, **self.labels):
                return False
            self.fired, self.resolved = min(times) - start, max(times) - start
            return True

        wait_for(f"{self.alert} fired and resolved", seen, timeout)

    def wait_resolved(self, timeout: float) -> None:
        def gone() -> bool:
            return not [
                a
                for a in self.prometheus.alerts()
                if a["labels"]["alertname"] == self.alert
                and self.labels.items() <= a["labels"].items()
            ]

        wait_for(f"{self.alert} resolved", gone, timeout)
        self.resolved = time.monotonic() - self.began


def _step(record: Firing, act: Any, undo: Any, fire_s: float, resolve_s: float) -> Firing:
    """``act``, the alert fires, ``undo``, it resolves; ``undo`` runs whatever happened."""
    try:
        try:
            act()
            record.wait_fired(fire_s)
        finally:
            undo()
        record.wait_resolved(resolve_s)
    except AssertionError as exc:
        record.error = str(exc)
    return record


def _serving_pods(e2e: E2ECluster, ns: str, name: str) -> list[dict[str, Any]]:
    return [p for p in e2e.items("pods", ns, name) if "serving" in p["metadata"]["name"]]


def _operator_deployment(e2e: E2ECluster) -> str:
    deployments = e2e.get("deployments", "-n", operator.NAMESPACE)["items"]
    (found,) = [d["metadata"]["name"] for d in deployments]
    return str(found)


@pytest.fixture(scope="module")
def fired(e2e: E2ECluster, namespace: str, run: dict[str, Any]) -> dict[str, Firing]:
    prometheus: Prometheus = run["prometheus"]
    ksm: kube_state_metrics.KubeStateMetrics = run["ksm"]
    began = time.monotonic()
    done: dict[str, Firing] = {}

    # the slow warmup, applied with the others (`run`), compiles meanwhile
    slow_alert = Firing(prometheus, "WarmgateWarmupSlow", began=run["slow_began"], name=SLOW)

    # serving scaled to nothing: no Pod may be created, the serving Pod is deleted
    def no_pods() -> None:
        meta = {"name": QUOTA, "namespace": namespace}
        spec = {"hard": {"pods": "0"}}
        e2e.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta, "spec": spec})
        for pod in _serving_pods(e2e, namespace, READY):
            e2e.kubectl("delete", "pod", "-n", namespace, pod["metadata"]["name"], "--wait=false")

    def pods_again() -> None:
        e2e.kubectl("delete", "resourcequota", "-n", namespace, QUOTA, check=False)
        # the ReplicaSet controller retries a refused create after a growing delay: a change
        # of the ReplicaSet makes it try at once
        for rs in e2e.items("replicasets", namespace, READY):
            e2e.kubectl(
                "annotate", "replicaset", "-n", namespace, rs["metadata"]["name"],
                f"warmgate.dev/e2e-m-retry={time.time()}", "--overwrite",
            )  # fmt: skip

    record = Firing(prometheus, "WarmgateServingUnavailable", name=READY)
    done[record.alert] = _step(record, no_pods, pods_again, 150, 150)

    # a frozen object: its status writes are refused and its spec changes
    policy = _freeze(namespace, READY)

    def freeze() -> None:
        e2e.apply({"kind": "List", "apiVersion": "v1", "items": policy})
        time.sleep(2)  # the policy is compiled and in force
        patch = json.dumps({"spec": {"warmup": {"retries": 3}}})
        e2e.kubectl("patch", "sdd", "-n", namespace, READY, "--type=merge", "-p", patch)

    def thaw() -> None:
        for item in policy:
            e2e.kubectl("delete", item["kind"].lower(), item["metadata"]["name"], check=False)

    # and meanwhile kube-state-metrics stopped (the slow warmup still compiles: its alert reads
    # the operator's series); the unobserved generation shows once it is back
    failing = Firing(prometheus, "WarmgateSyncFailing", name=READY)
    stalled = Firing(prometheus, "WarmgateStalled", name=READY, reason="GenerationNotObserved")
    absent = Firing(prometheus, "WarmgateKubeStateMetricsAbsent")
    try:
        try:
            freeze()
            ksm.stop()
            try:
                absent.wait_fired(90)
                failing.wait_fired(120)
            finally:
                ksm.start()
            absent.wait_resolved(90)
            stalled.wait_fired(120)
        finally:
            thaw()
        failing.wait_resolved(120)
        stalled.wait_resolved(120)
    except AssertionError as exc:
        for record in (failing, stalled, absent):
            if record.resolved is None:
                record.error = record.error or str(exc)
    for record in (failing, stalled, absent):
        done[record.alert] = record

    # the slow warmup: fired while it compiled, resolved when it ended (meanwhile, likely)
    try:
        slow_alert.wait_history(300)
    except AssertionError as exc:
        slow_alert.error = str(exc)
    done[slow_alert.alert] = slow_alert

    # the operator scaled to nothing, then back
    deployment = _operator_deployment(e2e)

    def scale(n: int) -> Any:
        return lambda: e2e.kubectl(
            "scale", "deployment", "-n", operator.NAMESPACE, deployment, f"--replicas={n}"
        )

    replicas = e2e.get("deployment", "-n", operator.NAMESPACE, deployment)["spec"]["replicas"]
    record = Firing(prometheus, "WarmgateOperatorAbsent")
    done[record.alert] = _step(record, scale(0), scale(int(replicas)), 120, 180)
    e2e.kubectl(
        "rollout", "status", "deployment", "-n", operator.NAMESPACE, deployment, "--timeout=180s"
    )
    run["fired_seconds"] = time.monotonic() - began
    return done


@pytest.mark.parametrize("alert", ALERTS)
def test_the_alert_fires_once_for_real_and_resolves(fired: dict[str, Firing], alert: str) -> None:
    record = fired[alert]
    assert record.error == "", record.error
    assert record.fired is not None
    assert record.resolved is not None
    print(f"{alert}: fired after {record.fired:.0f} s, resolved after {record.resolved:.0f} s")


def test_every_alert_of_the_chart_fired_here(run: dict[str, Any]) -> None:
    # the chart's alerts are the two fired by the first run and ALERTS: none left out
    names = {rule["alert"] for group in run["rules"] for rule in group["rules"]}
    assert names == {*ALERTS, "WarmgateWarmupFailed", "WarmgateUnwarmedShapeObserved"}
