"""Can this machine run the node? The binaries, Debian packages and privileges it needs.

The Kubernetes binaries come from the same folder as the control plane's (``KUBEBUILDER_ASSETS``
or ``.cache/envtest/<version>``, filled by ``hack/provision-envtest.sh all``); containerd, runc,
the CNI plugins, nft, buildah, mmdebstrap and gcc from Debian packages the same script installs.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Final

from warmgate.devcluster.controlplane import DEFAULT_ASSETS, PROVISION_SCRIPT

NODE_BINARIES: Final = (
    "kube-apiserver",
    "etcd",
    "kubectl",
    "helm",
    "kubelet",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-proxy",
)
COMMANDS: Final = (
    "containerd",
    "containerd-shim-runc-v2",
    "ctr",
    "runc",
    "nft",
    "ip",
    "buildah",
    "mmdebstrap",
    "gcc",
    "strip",
    "openssl",
    "go",
)
CNI_PLUGINS: Final = ("bridge", "host-local", "loopback")


class NodeUnavailableError(RuntimeError):
    """This machine cannot run the dev cluster's node; the message says why."""


def _complete(folder: Path) -> bool:
    return all((folder / b).is_file() for b in NODE_BINARIES)


def node_assets() -> Path:
    """The folder with every node binary: KUBEBUILDER_ASSETS when complete, else the repo cache."""
    env = os.environ.get("KUBEBUILDER_ASSETS")
    candidates = [Path(env)] if env else []
    candidates.append(DEFAULT_ASSETS)
    for folder in candidates:
        if _complete(folder):
            return folder
    missing = [b for b in NODE_BINARIES if not (candidates[0] / b).is_file()]
    raise NodeUnavailableError(
        f"{candidates[0]} lacks {', '.join(missing)}: run `bash {PROVISION_SCRIPT} all` "
        "(or `make assets` without KUBEBUILDER_ASSETS)"
    )


def unavailable_reason() -> str | None:
    """Why the node cannot start here, or None when it can."""
    if not Path("/sys/fs/cgroup").is_dir() or not Path("/proc/self/mountinfo").is_file():
        return "not a Linux machine with cgroups"
    if os.geteuid() != 0:
        return "not root: containerd and the kubelet need root"
    missing = [c for c in COMMANDS if shutil.which(c) is None]
    missing += [f"/usr/lib/cni/{p}" for p in CNI_PLUGINS if not Path("/usr/lib/cni", p).is_file()]
    if missing:
        return (
            f"missing {', '.join(missing)}: run `bash {PROVISION_SCRIPT} node-packages` "
            "(Debian containerd, runc, containernetworking-plugins, nftables, buildah, "
            "mmdebstrap, gcc)"
        )
    try:
        node_assets()
    except NodeUnavailableError as exc:
        return str(exc)
    return None
