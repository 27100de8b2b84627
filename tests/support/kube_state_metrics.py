"""A real kube-state-metrics with the chart's CustomResourceState configuration, logged in as a
ServiceAccount (bound by the chart's ClusterRole), on loopback: for the integration tier
(against the harness' apiserver) and the e2e tier (against the local cluster's)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from runner_harness import free_port

from support.monitoring import tool
from warmgate.devcluster.controlplane import ControlPlane

# What kube-state-metrics logs for a missing path the configuration does not read as 0.
MISSING_PATH_ERROR = "got nil while resolving path"


def token_kubeconfig(cp: ControlPlane, account: str, namespace: str, path: Path) -> Path:
    """A kubeconfig of ``cp``'s apiserver with an hour's token of ``namespace/account``."""
    made = cp.kubectl("create", "token", account, "-n", namespace, "--duration=1h")
    cluster = {"server": cp.server, "certificate-authority": str(cp.ca_file)}
    return write_token_kubeconfig(path, cluster, account, made.stdout.strip())


def write_token_kubeconfig(path: Path, cluster: dict[str, Any], account: str, token: str) -> Path:
    """Write a kubeconfig of one ``cluster`` entry (server, CA) and ``account``'s ``token``."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": "c", "user": account}}],
        "current-context": account,
    }
    path.write_text(yaml.safe_dump(config))
    return path


class KubeStateMetrics:
    """kube-state-metrics serving only the custom resources on loopback, stopped and started
    again on the same address (scenario u fires WarmgateKubeStateMetricsAbsent with it)."""

    def __init__(self, kubeconfig: Path, config: Path, namespaces: str, log: Path) -> None:
        port, telemetry = free_port(), free_port()
        self.address, self.log = f"127.0.0.1:{port}", log
        self.args = [
            str(tool("kube-state-metrics")),
            f"--kubeconfig={kubeconfig}",
            "--host=127.0.0.1",
            f"--port={port}",
            "--telemetry-host=127.0.0.1",
            f"--telemetry-port={telemetry}",
            "--custom-resource-state-only",
            f"--custom-resource-state-config-file={config}",
            f"--namespaces={namespaces}",
        ]
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("a") as out:
            self._proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(timeout=10)
        self._proc = None


@contextmanager
def running(kubeconfig: Path, config: Path, namespaces: str, log: Path) -> Iterator[str]:
    """kube-state-metrics serving only the custom resources; yields its host:port."""
    with started(kubeconfig, config, namespaces, log) as ksm:
        yield ksm.address


@contextmanager
def started(
    kubeconfig: Path, config: Path, namespaces: str, log: Path
) -> Iterator[KubeStateMetrics]:
    """kube-state-metrics running (it can be stopped and started meanwhile), stopped at the end."""
    log.write_text("")
    ksm = KubeStateMetrics(kubeconfig, config, namespaces, log)
    ksm.start()
    try:
        yield ksm
    finally:
        ksm.stop()
