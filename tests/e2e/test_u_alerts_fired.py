"""Scenario u: the chart's alerts that scenario m's run does not raise, each fired once for real
in a real Prometheus by the fault it is for, and resolved once the fault is undone (issue 37).

It runs beside the other scenarios (the guest run): nothing here touches what they share. Its
own Prometheus and kube-state-metrics (loopback, free ports; kube-state-metrics watches only this
scenario's namespace, logged in as a ServiceAccount bound by the chart's ClusterRole) scrape the
shared operator through the chart's ServiceMonitor, the serving runners through its PodMonitor,
and a second operator release of its own: `helm install` of the chart in a namespace of its
own, watching only that (empty) namespace, which is the operator scaled to 0 for
WarmgateOperatorAbsent (the shared one keeps serving every other scenario). The rules are the
chart's, rendered for that release (its OperatorAbsent selector is that operator's job); the
other rules select no job and read the shared operator's and kube-state-metrics' series, so
each alert is checked for this scenario's namespace and object.

The faults: serving scaled to nothing (a ResourceQuota of 0 Pods, the serving Pod deleted), a
frozen object (an admission policy refuses its status writes, its spec changes: every sync fails
and the generation goes unobserved), kube-state-metrics stopped meanwhile, a warmup that compiles
slower than twice its estimate (the stand-in's `graph_seconds`), the own operator scaled to 0.
Only `for` and the range windows are shortened (e2e_monitoring.VALUES).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from e2e_monitoring import (
    FIRED_IN_M,
    FIRED_IN_U,
    Firing,
    firing,
    freeze_policy,
    helm_assets,
    ksm_static_job,
    one,
    render,
    scraped,
    step,
)
from e2e_support import E2ECluster, is_true, sdd, wait_for
from support import kube_state_metrics
from support.kube_state_metrics import MISSING_PATH_ERROR
from support.monitoring import tool
from support.prometheus import Prometheus, pod_monitor_job, service_monitor_job

from warmgate.devcluster import operator

READY, SLOW = "watched", "slow"
# SLOW: a small plan (10 buckets, an estimate of ~14 s) whose stand-in takes 7 s a graph
# (~70 s): its compile rate projects to more than twice the estimate, the chart's
# warmupSlowFactor. It warms while the other goes Ready and serving is scaled to nothing.
SLOW_ENGINE = {"maxModelLen": 256, "maxNumSeqs": 1, "maxNumBatchedTokens": 256}
# The second operator release (OperatorAbsent), in a namespace of its own.
RELEASE = "warmgate-u"
FREEZE = "warmgate-e2e-u-freeze"
QUOTA = "no-pods"


def _install_own_operator(e2e: E2ECluster, namespace: str) -> None:
    """`helm install` of the chart as a second release in ``namespace``, watching only it
    (empty): the CRD is the shared release's (crds.install=false)."""
    repository, tag = e2e.images.operator.ref.rsplit(":", 1)
    sets = {
        "image.repository": repository,
        "image.tag": tag,
        "image.pullPolicy": "Never",
        "crds.install": "false",
        "metrics.serviceMonitor.enabled": "false",
    }
    args = [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
    operator.helm(
        helm_assets(e2e), e2e.cluster.kubeconfig, "install", RELEASE, str(operator.CHART),
        "--namespace", namespace, "--wait", "--timeout", "180s", *args,
    )  # fmt: skip


@pytest.fixture(scope="module")
def stack(
    e2e: E2ECluster, namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """The own operator, kube-state-metrics and Prometheus running."""
    tool("prometheus")
    folder = tmp_path_factory.mktemp("alerts")
    own = f"{namespace}-op"
    kubeconfig = e2e.cluster.kubeconfig
    # the chart as the own release would render it (its rules, its operator's ServiceMonitor,
    # kube-state-metrics' ClusterRole named after it) and as the shared release did (the
    # shared operator's ServiceMonitor)
    docs = render(e2e, namespace, release=RELEASE, release_namespace=own)
    shared = render(e2e, namespace)
    rules = one(docs, "PrometheusRule")["spec"]["groups"]

    def jobs(ksm: str) -> list[dict[str, Any]]:
        return [
            service_monitor_job(one(shared, "ServiceMonitor"), kubeconfig),
            service_monitor_job(one(docs, "ServiceMonitor"), kubeconfig),
            pod_monitor_job(one(docs, "PodMonitor"), kubeconfig),
            ksm_static_job(ksm),
        ]

    e2e.kubectl("create", "namespace", own)
    try:
        _install_own_operator(e2e, own)
        with scraped(e2e, namespace, docs, folder, jobs) as (ksm, prometheus):
            yield {
                "prometheus": prometheus,
                "folder": folder,
                "ksm": ksm,
                "rules": rules,
                "own": own,
            }
    finally:
        operator.helm(
            helm_assets(e2e), kubeconfig, "uninstall", RELEASE, "--namespace", own, "--wait"
        )
        e2e.kubectl("delete", "namespace", own, "--wait=false", check=False)


def _obj_if(e2e: E2ECluster, ns: str, name: str, type_: str) -> dict[str, Any] | None:
    obj = e2e.get("sdd", "-n", ns, name)
    return obj if is_true(obj, type_) else None


def _serving_pods(e2e: E2ECluster, ns: str, name: str) -> list[dict[str, Any]]:
    return [p for p in e2e.items("pods", ns, name) if "serving" in p["metadata"]["name"]]


@pytest.fixture(scope="module")
def run(e2e: E2ECluster, namespace: str, stack: dict[str, Any]) -> dict[str, Any]:
    """A Ready SDD and beside it a slow warmup; both seen by kube-state-metrics, both
    operators scraped."""
    prometheus: Prometheus = stack["prometheus"]
    began = time.monotonic()
    e2e.apply(sdd(READY, namespace, e2e.images.engine.ref))
    slow = sdd(SLOW, namespace, e2e.images.engine.ref, k=1, faults="graph_seconds=7")
    slow["spec"]["engine"].update(SLOW_ENGINE)
    e2e.apply(slow)
    wait_for("Ready=True", lambda: _obj_if(e2e, namespace, READY, "Ready"), 240)
    at = f'namespace="{namespace}", name="{READY}"'
    wait_for(
        "the Ready object's kube-state-metrics series",
        lambda: prometheus.query(f"kube_specdecodedeployment_status_phase{{{at}}} == 1"),
        60,
    )
    for job in (f"{operator.RELEASE}-metrics", f"{RELEASE}-metrics"):
        _wait_up(prometheus, job)
    return {"slow_began": began, **stack}


def _wait_up(prometheus: Prometheus, job: str) -> None:
    wait_for(f"{job} up", lambda: prometheus.query(f'up{{job="{job}"}} == 1'), 60)


def test_no_alert_fires_for_the_objects_while_everything_runs(
    run: dict[str, Any], namespace: str
) -> None:
    # the Ready object fires nothing (the slow one may fire WarmupSlow already), and neither
    # operator nor kube-state-metrics is absent
    prometheus: Prometheus = run["prometheus"]
    assert firing(prometheus, "WarmgateOperatorAbsent") == []
    assert firing(prometheus, "WarmgateKubeStateMetricsAbsent") == []
    mine = [
        a["labels"]["alertname"]
        for a in prometheus.alerts()
        if a["state"] == "firing"
        and a["labels"].get("namespace") == namespace
        and a["labels"].get("name") == READY
    ]
    assert mine == []


@pytest.fixture(scope="module")
def fired(e2e: E2ECluster, namespace: str, run: dict[str, Any]) -> dict[str, Firing]:
    prometheus: Prometheus = run["prometheus"]
    ksm: kube_state_metrics.KubeStateMetrics = run["ksm"]
    own: str = run["own"]
    began = time.monotonic()
    done: dict[str, Firing] = {}
    ours = {"namespace": namespace}

    # the slow warmup, applied with the Ready object (`run`), compiles meanwhile
    slow_alert = Firing(
        prometheus, "WarmgateWarmupSlow", began=run["slow_began"], name=SLOW, **ours
    )

    # the own operator scaled to nothing meanwhile (15 s `for` over a 20 s window)
    def scale(n: int) -> None:
        e2e.kubectl("scale", "deployment", "-n", own, RELEASE, f"--replicas={n}")

    absent_operator = Firing(prometheus, "WarmgateOperatorAbsent")
    scale(0)

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
                f"warmgate.dev/e2e-u-retry={time.time()}", "--overwrite",
            )  # fmt: skip

    record = Firing(prometheus, "WarmgateServingUnavailable", name=READY, **ours)
    try:
        done[record.alert] = step(record, no_pods, pods_again, 150, 150)
        try:
            absent_operator.wait_fired(120)
        finally:
            scale(1)
        absent_operator.wait_resolved(180)
    except AssertionError as exc:
        absent_operator.error = str(exc)
    done[absent_operator.alert] = absent_operator

    # a frozen object: its status writes are refused and its spec changes
    policy = freeze_policy(FREEZE, namespace, READY)

    def freeze() -> None:
        e2e.apply({"kind": "List", "apiVersion": "v1", "items": policy})
        time.sleep(2)  # the policy is compiled and in force
        patch = json.dumps({"spec": {"warmup": {"retries": 3}}})
        e2e.kubectl("patch", "sdd", "-n", namespace, READY, "--type=merge", "-p", patch)

    def thaw() -> None:
        for item in policy:
            e2e.kubectl("delete", item["kind"].lower(), item["metadata"]["name"], check=False)

    # and meanwhile kube-state-metrics stopped (its alert reads the operator's series too); the
    # unobserved generation shows once it is back
    failing = Firing(prometheus, "WarmgateSyncFailing", name=READY, **ours)
    stalled = Firing(
        prometheus, "WarmgateStalled", name=READY, reason="GenerationNotObserved", **ours
    )
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
        for item in (failing, stalled, absent):
            if item.resolved is None:
                item.error = item.error or str(exc)
    for item in (failing, stalled, absent):
        done[item.alert] = item

    # the slow warmup: fired while it compiled, resolved when it ended (meanwhile, likely)
    try:
        slow_alert.wait_history(300)
    except AssertionError as exc:
        slow_alert.error = str(exc)
    done[slow_alert.alert] = slow_alert
    e2e.kubectl("rollout", "status", "deployment", "-n", own, RELEASE, "--timeout=180s")
    print(f"the firings took {time.monotonic() - began:.0f} s")
    return done


@pytest.mark.parametrize("alert", FIRED_IN_U)
def test_the_alert_fires_once_for_real_and_resolves(fired: dict[str, Firing], alert: str) -> None:
    record = fired[alert]
    assert record.error == "", record.error
    assert record.fired is not None
    assert record.resolved is not None
    print(f"{alert}: fired after {record.fired:.0f} s, resolved after {record.resolved:.0f} s")


def test_every_alert_of_the_chart_fired_here_or_in_m(run: dict[str, Any]) -> None:
    names = {rule["alert"] for group in run["rules"] for rule in group["rules"]}
    assert names == {*FIRED_IN_U, *FIRED_IN_M}
    assert not set(FIRED_IN_U) & set(FIRED_IN_M)


def test_the_operator_absent_rule_reads_the_own_operator(run: dict[str, Any]) -> None:
    # the alert stopped here is the second release's, not the shared operator's
    (rule,) = [
        r for g in run["rules"] for r in g["rules"] if r["alert"] == "WarmgateOperatorAbsent"
    ]
    assert f'job="{RELEASE}-metrics", namespace="{run["own"]}"' in rule["expr"]


def test_kube_state_metrics_logged_no_missing_path(run: dict[str, Any]) -> None:
    log = (run["folder"] / "ksm.log").read_text()
    assert MISSING_PATH_ERROR not in log, log[-2000:]
