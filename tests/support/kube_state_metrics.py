"""A real kube-state-metrics with the chart's CustomResourceState configuration, logged in as a
ServiceAccount (bound by the chart's ClusterRole), on loopback: for the integration tier
(against the harness' apiserver) and the e2e tier (against the local cluster's)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml
from runner_harness import free_port

from support.monitoring import tool
from warmgate.controlplane import ControlPlane

# What kube-state-metrics logs for a missing path the configuration does not read as 0.
MISSING_PATH_ERROR = "got nil while resolving path"


def token_kubeconfig(cp: ControlPlane, account: str, namespace: str, path: Path) -> Path:
    """A kubeconfig of ``cp``'s apiserver with an hour's token of ``namespace/account``."""
    made = cp.kubectl("create", "token", account, "-n", namespace, "--duration=1h")
    cluster = {"server": cp.server, "certificate-authority": str(cp.ca_file)}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": account, "user": {"token": made.stdout.strip()}}],
        "contexts": [{"name": account, "context": {"cluster": "c", "user": account}}],
        "current-context": account,
    }
    path.write_text(yaml.safe_dump(config))
    return path


@contextmanager
def running(kubeconfig: Path, config: Path, namespaces: str, log: Path) -> Iterator[str]:
    """kube-state-metrics serving only the custom resources; yields its host:port."""
    port, telemetry = free_port(), free_port()
    args = [
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
    with log.open("w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        try:
            yield f"127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(timeout=10)
