"""Where the local cluster lives: fixed machine-wide paths, names and address ranges.

One dev cluster runs on a machine at a time (``lock.MachineLock``), so its runtime state has
one fixed home, and a run that was killed is found and cleaned up by the next one.
Addresses: Pods get 10.244.0.0/24 on the bridge ``wgbr0`` (gateway 10.244.0.1, which is also
the node IP and the apiserver's address); Services get 10.96.0.0/24. Neither range is routed
off the machine: the harness blackholes the Service range and drops forwarding out of the
bridge (``network``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from warmgate.devcluster.controlplane import REPO_ROOT

NODE_NAME: Final = "warmgate-node"
BRIDGE: Final = "wgbr0"
POD_CIDR: Final = "10.244.0.0/24"
GATEWAY: Final = "10.244.0.1"  # the bridge's address: node IP, apiserver, Pods' gateway
SERVICE_CIDR: Final = "10.96.0.0/24"
KUBERNETES_SERVICE_IP: Final = "10.96.0.1"  # the `kubernetes` Service's ClusterIP
NFT_TABLE: Final = "warmgate_devcluster"
CGROUP_PARENT: Final = "warmgate-devcluster"  # kubelet cgroupRoot: every Pod cgroup is below
GAUDI_CARDS: Final = 8
NODE_LABELS: Final = {"habana.ai/gaudi.generation": "gaudi2", "warmgate.dev/devcluster": "true"}
STORAGE_CLASS: Final = "warmgate-local"
PROVISIONER: Final = "warmgate.dev/local-path"
LOCK_FILE: Final = Path("/run/lock/warmgate-devcluster.lock")
# Images and buildah's store; WARMGATE_DEVCLUSTER_CACHE moves it (a cold build benchmark).
CACHE: Final = Path(
    os.environ.get("WARMGATE_DEVCLUSTER_CACHE", REPO_ROOT / ".cache" / "devcluster")
)


@dataclass(frozen=True)
class Paths:
    """The runtime state of one cluster under ``root`` (default /run/warmgate-devcluster)."""

    root: Path

    @classmethod
    def default(cls) -> Paths:
        return cls(Path(os.environ.get("WARMGATE_DEVCLUSTER_ROOT", "/run/warmgate-devcluster")))

    @property
    def containerd_state(self) -> Path:
        return self.root / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.containerd_state / "containerd.sock"

    @property
    def kubelet_root(self) -> Path:
        return self.root / "kubelet"

    @property
    def cni_conf(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def cni_ipam(self) -> Path:
        return self.root / "cni" / "ipam"

    @property
    def volumes(self) -> Path:
        return self.root / "volumes"

    @property
    def config(self) -> Path:
        return self.root / "config"

    @property
    def record(self) -> Path:
        """What the harness changed on the machine, read back by the teardown."""
        return self.root / "record.json"

    @property
    def containerd_root(self) -> Path:
        """Images and snapshots: kept under .cache between runs, so images import once."""
        return CACHE / "containerd"
