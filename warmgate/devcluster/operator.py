"""The operator on the dev cluster, installed as a user would: `helm install` of the chart.

The operator then runs as a Pod under the chart's ServiceAccount and RBAC, with in-cluster
config (its token, and the `kubernetes` Service's ClusterIP that kube-proxy translates).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Final

from warmgate.devcluster.controlplane import REPO_ROOT

CHART: Final = REPO_ROOT / "charts" / "warmgate"
RELEASE: Final = "warmgate"
NAMESPACE: Final = "warmgate-system"
# The operator's resync interval on the dev cluster (default 15 s): the tier waits on it.
RESYNC_SECONDS: Final = 5


def helm(assets: Path, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the provisioned helm against the cluster; raise with its output on failure."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HELM_CACHE_HOME": "/tmp/warmgate-helm"}
    done = subprocess.run(
        [str(assets / "helm"), *args], capture_output=True, text=True, env=env, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"helm {' '.join(args[:2])} failed: {done.stderr.strip()}")
    return done


# The e2e tier's scenarios create namespaces as they go, so its operator watches every one:
# the chart's explicit opt-in (its default watches only the namespaces it is given).
CLUSTER_WIDE: Final = ("clusterWide=true",)


def install(
    assets: Path,
    kubeconfig: Path,
    image_ref: str,
    timeout: str = "180s",
    values: tuple[str, ...] = CLUSTER_WIDE,
) -> None:
    """`helm install` the chart with the locally built image and ``values`` (`--set`); wait
    for the operator Pod."""
    repository, tag = image_ref.rsplit(":", 1)
    sets = [arg for value in values for arg in ("--set", value)]
    helm(
        assets,
        kubeconfig,
        "install",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        "--wait",
        "--timeout",
        timeout,
        "--set",
        f"image.repository={repository}",
        "--set",
        f"image.tag={tag}",
        "--set",
        "image.pullPolicy=Never",
        "--set",
        "env[0].name=WARMGATE_RESYNC_SECONDS",
        "--set-string",
        f"env[0].value={RESYNC_SECONDS}",
        *sets,
    )


def upgrade(assets: Path, kubeconfig: Path, *values: str, timeout: str = "180s") -> None:
    """`helm upgrade --reuse-values` with more ``values`` (`--set`); wait for the rollout."""
    sets = [arg for value in values for arg in ("--set", value)]
    helm(
        assets, kubeconfig, "upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE,
        "--reuse-values", "--wait", "--timeout", timeout, *sets,
    )  # fmt: skip


def uninstall(assets: Path, kubeconfig: Path) -> None:
    """`helm uninstall` (the chart keeps the CRD, and so every SpecDecodeDeployment)."""
    helm(assets, kubeconfig, "uninstall", RELEASE, "--namespace", NAMESPACE, "--wait")
