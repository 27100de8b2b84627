"""Configuration files of the node's daemons: containerd, kubelet and kube-proxy.

The settings this machine kind needs were found by hand (shared docs, local-node.md): the
kubelet runs with ``cgroupDriver: cgroupfs``, ``failCgroupV1: false`` (cgroup v1 hybrid) and
``failSwapOn: false``; containerd's CRI with ``restrict_oom_score_adj`` (root here cannot lower
``oom_score_adj``; runc otherwise fails with "can't get final child's PID from pipe: EOF"),
runc (crun refuses hybrid cgroups) and a local pause image (no registry is reachable).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from warmgate.devcluster.layout import (
    CGROUP_PARENT,
    GATEWAY,
    NODE_NAME,
    POD_CIDR,
    Paths,
)

CNI_BIN = "/usr/lib/cni"  # Debian's containernetworking-plugins


def containerd_toml(paths: Paths, pause_image: str) -> str:
    """containerd 1.6 config: own root/state/socket, CRI on runc with the CNI bridge."""
    state = paths.containerd_state
    return f"""\
version = 2
root = "{paths.containerd_root}"
state = "{state}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{paths.containerd_socket}"

[ttrpc]
  address = "{state}/containerd.sock.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{state}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause_image}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{paths.cni_conf}"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/bin/runc"
        SystemdCgroup = false
"""


def kubelet_config(paths: Paths, ca_file: Path) -> dict[str, Any]:
    """KubeletConfiguration: served on the bridge address only, client certs of our CA."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": GATEWAY,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(ca_file)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{CGROUP_PARENT}",
        "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{paths.containerd_socket}",
        "podLogsDir": str(paths.root / "pod-logs"),
        # No cluster DNS, and an empty resolv.conf: a Pod has no resolver to ask off the machine.
        "resolvConf": str(paths.config / "resolv.conf"),
        "clusterDNS": [],
        # Our images cannot be pulled again: never garbage-collect them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "serializeImagePulls": False,
        "syncFrequency": "10s",
        "maxPods": 40,
        "shutdownGracePeriod": "0s",
    }


def kube_proxy_config(kubeconfig: Path) -> dict[str, Any]:
    """kube-proxy in nftables mode: its rules live in its own `kube-proxy` tables."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "nftables",
        "hostnameOverride": NODE_NAME,
        "clusterCIDR": POD_CIDR,
        "bindAddress": GATEWAY,
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        "nodePortAddresses": [f"{GATEWAY}/32"],
        # 0 leaves the machine's conntrack sysctls as they are.
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }


def write_all(paths: Paths, ca_file: Path, kubeconfig: Path, pause_image: str) -> None:
    """Write the three files (JSON is valid YAML) and the empty resolv.conf."""
    paths.config.mkdir(parents=True, exist_ok=True)
    (paths.config / "containerd.toml").write_text(containerd_toml(paths, pause_image))
    (paths.config / "kubelet.yaml").write_text(json.dumps(kubelet_config(paths, ca_file)))
    (paths.config / "kube-proxy.yaml").write_text(json.dumps(kube_proxy_config(kubeconfig)))
    (paths.config / "resolv.conf").write_text("# no resolver: the dev cluster stays local\n")
