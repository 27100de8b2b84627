"""A real Prometheus for the tests: started on loopback, asked through its HTTP API.

The binary is built by `hack/provision-monitoring.sh` from the same pinned module as promtool
(`tool("prometheus")`). The chart's ServiceMonitor and PodMonitor are turned into the scrape
jobs prometheus-operator would generate for them (`service_monitor_job`, `pod_monitor_job`:
the same service discovery role, keep rules and target labels, `honor_labels` from
`honorLabels`), so the labels a kube-prometheus-stack user sees are the ones asserted here.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from runner_harness import free_port

from support.monitoring import tool

Manifest = dict[str, Any]
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, no proxy


class PrometheusError(RuntimeError):
    """The HTTP API answered with an error (e.g. a query that does not parse)."""


class Prometheus:
    """One Prometheus process with its own storage under ``folder``."""

    def __init__(self, folder: Path, scrape_configs: list[Manifest], rules: list[Manifest]):
        self.folder, self.port = folder, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": "2s", "evaluation_interval": "1s"},
            "rule_files": [],
            "scrape_configs": scrape_configs,
        }
        if rules:
            (folder / "rules.yaml").write_text(yaml.safe_dump({"groups": rules}))
            config["rule_files"] = [str(folder / "rules.yaml")]
        (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> Prometheus:
        args = [
            str(tool("prometheus")),
            f"--config.file={self.folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--web.enable-lifecycle",
        ]
        with (self.folder / "prometheus.log").open("wb") as log:
            self._proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log_tail()}")
            if self._ready():
                return self
            time.sleep(0.2)
        raise RuntimeError(f"prometheus not ready in {timeout:.0f} s: {self.log_tail()}")

    def _ready(self) -> bool:
        try:
            return bool(_OPENER.open(f"{self.url}/-/ready", timeout=2).status == 200)
        except OSError:
            return False

    def log_tail(self, lines: int = 20) -> str:
        text = (self.folder / "prometheus.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def __enter__(self) -> Prometheus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def api(self, path: str, **params: str) -> Any:
        """``data`` of a GET /api/v1/<path>; PrometheusError with its message on an error."""
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            body = _OPENER.open(url, timeout=30).read()
        except urllib.error.HTTPError as exc:
            body = exc.read()
        doc = json.loads(body)
        if doc.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {doc.get('error')}")
        return doc["data"]

    def query(self, expr: str) -> list[Manifest]:
        """An instant query's vector (a scalar comes back as one unlabelled sample)."""
        data = self.api("query", query=expr)
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def parse(self, expr: str) -> Manifest:
        """The abstract syntax tree of ``expr`` from Prometheus' own PromQL parser."""
        return dict(self.api("parse_query", query=expr))

    def query_range(self, expr: str, start: float, end: float, step: float = 1.0) -> list[Manifest]:
        """A range query's matrix: each series with its [time, value] samples."""
        data = self.api("query_range", query=expr, start=str(start), end=str(end), step=str(step))
        return list(data["result"])

    def alerts(self) -> list[Manifest]:
        return list(self.api("alerts")["alerts"])

    def targets(self) -> list[Manifest]:
        return list(self.api("targets", state="active")["activeTargets"])


def selected_metrics(tree: Any) -> set[str]:
    """The metric names of every selector in a parse tree (``parse_query``'s JSON, where a
    range selector is one `matrixSelector` node with the name and matchers)."""
    found: set[str] = set()
    if isinstance(tree, dict):
        if tree.get("type") in ("vectorSelector", "matrixSelector"):
            name = tree.get("name") or next(
                (m["value"] for m in tree.get("matchers", []) if m["name"] == "__name__"), ""
            )
            found.add(name)
        for value in tree.values():
            found |= selected_metrics(value)
    elif isinstance(tree, list):
        for value in tree:
            found |= selected_metrics(value)
    return found


def _keep_labels(prefix: str, labels: dict[str, str]) -> list[Manifest]:
    """prometheus-operator's keep rules for a `matchLabels` selector."""
    rules = []
    for key, value in sorted(labels.items()):
        name = "".join(c if c.isalnum() else "_" for c in key)
        rules.append(
            {
                "action": "keep",
                "source_labels": [f"{prefix}_label_{name}", f"{prefix}_labelpresent_{name}"],
                "regex": f"({value});true",
            }
        )
    return rules


def _namespaces(selector: Manifest) -> Manifest:
    if selector.get("any"):
        return {}
    return {"namespaces": {"names": list(selector.get("matchNames") or [])}}


# The rules prometheus-operator puts first and last in every job it generates: the `job` label a
# target may bring kept aside, and sharding (one shard here: the Pod's config reloader writes
# the shard number for `$(SHARD)`, 0 with one, which SHARD stands for).
SHARD = "0"


def _job_first() -> list[Manifest]:
    return [{"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"}]


def _sharding() -> list[Manifest]:
    return [
        {"target_label": "__tmp_current_shard", "replacement": SHARD, "action": "replace"},
        {"source_labels": ["__tmp_current_shard"], "regex": "0", "action": "keep"},
        {
            "source_labels": ["__address__", "__tmp_hash"],
            "target_label": "__tmp_hash",
            "regex": "(.+);",
            "replacement": "$1",
            "action": "replace",
        },
        {
            "source_labels": ["__tmp_hash"],
            "target_label": "__tmp_hash",
            "modulus": 1,
            "action": "hashmod",
        },
        {
            "source_labels": ["__tmp_hash", "__tmp_disable_sharding"],
            "regex": f"{SHARD};|.+;.+",
            "action": "keep",
        },
    ]


_NOT_RUNNING = {
    "action": "drop",
    "source_labels": ["__meta_kubernetes_pod_phase"],
    "regex": "(Failed|Succeeded)",
}


def _endpoint_target(kind: str, label: str) -> Manifest:
    return {
        "source_labels": [
            "__meta_kubernetes_endpoint_address_target_kind",
            "__meta_kubernetes_endpoint_address_target_name",
        ],
        "separator": ";",
        "regex": f"{kind};(.*)",
        "replacement": "${1}",
        "target_label": label,
    }


def service_monitor_job(monitor: Manifest, kubeconfig: Path) -> Manifest:
    """The scrape job prometheus-operator generates for the first endpoint of a ServiceMonitor
    (role endpoints; `node` or `pod` from the endpoint's target, `namespace`, `service`, `pod`,
    `container`, `job` and `endpoint` target labels; job = the Service's name), rule for rule
    as the real prometheus-operator v0.93.0 wrote it (tests/integration/monitoring/
    prometheus-operator-jobs.yaml), with the apiserver reached through ``kubeconfig``."""
    spec, meta = monitor["spec"], monitor["metadata"]
    endpoint = spec["endpoints"][0]
    sd: Manifest = {"role": "endpoints", "kubeconfig_file": str(kubeconfig)}
    sd |= _namespaces(spec.get("namespaceSelector") or {})
    relabel = _job_first()
    relabel += _keep_labels("__meta_kubernetes_service", spec["selector"].get("matchLabels", {}))
    relabel += [
        {
            "action": "keep",
            "source_labels": ["__meta_kubernetes_endpoint_port_name"],
            "regex": endpoint["port"],
        },
        _endpoint_target("Node", "node"),
        _endpoint_target("Pod", "pod"),
        *_target_labels("__meta_kubernetes_namespace", "namespace"),
        *_target_labels("__meta_kubernetes_service_name", "service"),
        *_target_labels("__meta_kubernetes_pod_name", "pod"),
        *_target_labels("__meta_kubernetes_pod_container_name", "container"),
        _NOT_RUNNING,
        {
            "source_labels": ["__meta_kubernetes_service_name"],
            "target_label": "job",
            "replacement": "${1}",
        },
    ]
    return _monitor_job("serviceMonitor", meta, endpoint, sd, relabel)


def pod_monitor_job(monitor: Manifest, kubeconfig: Path) -> Manifest:
    """The scrape job prometheus-operator generates for the first endpoint of a PodMonitor
    (role pod; `namespace`, `container`, `pod`, `job` target labels, `podTargetLabels`), rule
    for rule as the real prometheus-operator v0.93.0 wrote it."""
    spec, meta = monitor["spec"], monitor["metadata"]
    endpoint = spec["podMetricsEndpoints"][0]
    sd: Manifest = {"role": "pod", "kubeconfig_file": str(kubeconfig)}
    sd |= _namespaces(spec.get("namespaceSelector") or {})
    relabel = [*_job_first(), _NOT_RUNNING]
    relabel += _keep_labels("__meta_kubernetes_pod", spec["selector"].get("matchLabels", {}))
    relabel += [
        {
            "action": "keep",
            "source_labels": ["__meta_kubernetes_pod_container_port_name"],
            "regex": endpoint["port"],
        },
        *_target_labels("__meta_kubernetes_namespace", "namespace"),
        *_target_labels("__meta_kubernetes_pod_container_name", "container"),
        *_target_labels("__meta_kubernetes_pod_name", "pod"),
    ]
    for label in spec.get("podTargetLabels") or []:
        name = "".join(c if c.isalnum() else "_" for c in label)
        relabel.append(
            {
                "source_labels": [f"__meta_kubernetes_pod_label_{name}"],
                "target_label": name,
                "regex": "(.+)",
                "replacement": "${1}",
            }
        )
    relabel.append({"target_label": "job", "replacement": f"{meta['namespace']}/{meta['name']}"})
    return _monitor_job("podMonitor", meta, endpoint, sd, relabel)


def _monitor_job(
    kind: str, meta: Manifest, endpoint: Manifest, sd: Manifest, relabel: list[Manifest]
) -> Manifest:
    """The job around a monitor's own relabelling: the `endpoint` label and the sharding
    close it; honorLabels, interval and path from the endpoint, or their defaults."""
    return {
        "job_name": f"{kind}/{meta['namespace']}/{meta['name']}/0",
        "honor_labels": bool(endpoint.get("honorLabels", False)),
        "kubernetes_sd_configs": [sd],
        "scrape_interval": endpoint.get("interval", "30s"),
        "metrics_path": endpoint.get("path", "/metrics"),
        "relabel_configs": [
            *relabel,
            {"target_label": "endpoint", "replacement": endpoint["port"]},
            *_sharding(),
        ],
    }


def _target_labels(source: str, target: str) -> list[Manifest]:
    return [{"source_labels": [source], "target_label": target}]
