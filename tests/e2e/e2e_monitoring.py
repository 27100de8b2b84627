"""Helpers of the e2e scenarios that run a real Prometheus against the chart's monitoring parts
(m: the dashboard and the alerts of a run, u: every other alert fired by its fault): the chart
rendered with short `for` values, the scrape jobs, alert records and the faults' manifests."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from e2e_support import E2ECluster, wait_for
from support import kube_state_metrics
from support.kube_state_metrics import KubeStateMetrics, write_token_kubeconfig
from support.prometheus import Prometheus

from warmgate.devcluster import operator
from warmgate.devcluster.assets import node_assets

Manifest = dict[str, Any]

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

# The chart's alerts fired for real by scenario m (its run) and by scenario u (each by its
# fault): together every alert of the chart (both scenarios check it).
FIRED_IN_M = ("WarmgateWarmupFailed", "WarmgateUnwarmedShapeObserved")
FIRED_IN_U = (
    "WarmgateServingUnavailable",
    "WarmgateSyncFailing",
    "WarmgateStalled",
    "WarmgateWarmupSlow",
    "WarmgateKubeStateMetricsAbsent",
    "WarmgateOperatorAbsent",
)


def helm_assets(e2e: E2ECluster) -> Path:
    """The folder with helm: the cluster's (owner or lone run) or the provisioned one (guest)."""
    assets = getattr(e2e.cluster, "assets", None)
    return Path(assets) if assets is not None else node_assets()


def render(
    e2e: E2ECluster,
    ksm_namespace: str,
    release: str = operator.RELEASE,
    release_namespace: str = operator.NAMESPACE,
    **extra: str,
) -> list[Manifest]:
    """`helm template` of the chart with the monitoring parts on (by default the release and
    namespace of the installed operator)."""
    values = {**VALUES, "monitoring.kubeStateMetrics.serviceAccount.namespace": ksm_namespace}
    sets = [a for k, v in {**values, **extra}.items() for a in ("--set", f"{k}={v}")]
    done = operator.helm(
        helm_assets(e2e),
        e2e.cluster.kubeconfig,
        "template",
        release,
        str(operator.CHART),
        "--namespace",
        release_namespace,
        "--api-versions",
        "monitoring.coreos.com/v1",
        *sets,
    )
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def one(docs: list[Manifest], kind: str) -> Manifest:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


def ksm_static_job(address: str) -> Manifest:
    """kube-state-metrics scraped with honor_labels, as the kube-prometheus-stack does."""
    job = {"job_name": "kube-state-metrics", "honor_labels": True, "scrape_interval": "2s"}
    job["static_configs"] = [{"targets": [address], "labels": {"job": "kube-state-metrics"}}]
    return job


def token_kubeconfig(e2e: E2ECluster, account: str, namespace: str, path: Path) -> Path:
    """A kubeconfig of the cluster's apiserver (from the cluster's own kubeconfig: the guest
    run has no control plane object) with an hour's token of ``namespace/account``."""
    made = e2e.kubectl("create", "token", account, "-n", namespace, "--duration=1h")
    admin = yaml.safe_load(Path(e2e.cluster.kubeconfig).read_text())
    contexts = {c["name"]: c["context"] for c in admin["contexts"]}
    current = contexts[admin.get("current-context") or next(iter(contexts))]
    clusters = {c["name"]: c["cluster"] for c in admin["clusters"]}
    cluster = dict(clusters[current["cluster"]])
    return write_token_kubeconfig(path, cluster, account, made.stdout.strip())


@contextlib.contextmanager
def scraped(
    e2e: E2ECluster,
    namespace: str,
    docs: list[Manifest],
    folder: Path,
    jobs: Callable[[str], list[Manifest]],
) -> Iterator[tuple[KubeStateMetrics, Prometheus]]:
    """kube-state-metrics on ``namespace`` (its ServiceAccount there, the ClusterRole and
    binding the chart's ``docs`` make for it, the chart's custom-resource config) and
    Prometheus scraping ``jobs(ksm address)`` with the chart's rules, both in ``folder``; the
    ClusterRole and binding are deleted after."""
    rbac = [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    rbac = [d for d in rbac if "kube-state-metrics" in d["metadata"]["name"]]
    config = folder / "custom-resource-state.yaml"
    config.write_text(one(docs, "ConfigMap")["data"]["custom-resource-state.yaml"])
    rules = one(docs, "PrometheusRule")["spec"]["groups"]
    try:
        e2e.kubectl("create", "serviceaccount", "kube-state-metrics", "-n", namespace)
        e2e.apply({"kind": "List", "apiVersion": "v1", "items": rbac})
        login = token_kubeconfig(e2e, "kube-state-metrics", namespace, folder / "ksm-kubeconfig")
        with (
            kube_state_metrics.started(login, config, namespace, folder / "ksm.log") as ksm,
            Prometheus(folder, jobs(ksm.address), rules) as prometheus,
        ):
            yield ksm, prometheus
    finally:
        for item in rbac:
            e2e.kubectl("delete", item["kind"].lower(), item["metadata"]["name"], check=False)


def firing(prometheus: Prometheus, alert: str, **labels: str) -> list[Manifest]:
    return [
        a
        for a in prometheus.alerts()
        if a["labels"]["alertname"] == alert
        and a["state"] == "firing"
        and labels.items() <= a["labels"].items()
    ]


def freeze_policy(policy: str, namespace: str, name: str) -> list[Manifest]:
    """An admission policy ``policy`` refusing the status writes of ``namespace/name`` (every
    sync of it fails: the operator's status patch is its last write)."""
    rules = [
        {
            "apiGroups": ["warmgate.dev"],
            "apiVersions": ["*"],
            "operations": ["UPDATE"],
            "resources": ["specdecodedeployments/status"],
        }
    ]
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": policy},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": rules},
            "validations": [
                {
                    "expression": f"object.metadata.name != '{name}'",
                    "message": f"frozen by {policy}",
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy},
        "spec": {
            "policyName": policy,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            },
        },
    }
    return [validating, binding]


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
            lambda: firing(self.prometheus, self.alert, **self.labels),
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
            if not times or firing(self.prometheus, self.alert, **self.labels):
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


def step(
    record: Firing,
    act: Callable[[], Any],
    undo: Callable[[], Any],
    fire_s: float,
    resolve_s: float,
) -> Firing:
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
