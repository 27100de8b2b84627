"""The dev cluster's pure parts: the local-only network config, daemon configs, the lock."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from warmgate.devcluster import configs, network
from warmgate.devcluster.layout import BRIDGE, GATEWAY, SERVICE_CIDR, Paths
from warmgate.devcluster.lock import MachineLock

PATHS = Paths(Path("/run/warmgate-devcluster-test"))


def test_pods_get_no_masquerade_and_no_default_route() -> None:
    (bridge,) = network.cni_config(PATHS)["plugins"]
    assert bridge["bridge"] == BRIDGE
    assert bridge["ipMasq"] is False
    assert bridge["isDefaultGateway"] is False
    assert bridge["ipam"]["routes"] == [{"dst": SERVICE_CIDR}]


def test_forwarding_into_or_out_of_the_bridge_is_dropped() -> None:
    rules = network.NFT_RULES
    assert "hook forward" in rules
    assert f'iifname "{BRIDGE}" oifname != "{BRIDGE}" drop' in rules
    assert f'oifname "{BRIDGE}" iifname != "{BRIDGE}" drop' in rules


def test_kubelet_settings_this_machine_kind_needs() -> None:
    cfg = configs.kubelet_config(PATHS, Path("/ca.crt"))
    assert (cfg["cgroupDriver"], cfg["failCgroupV1"], cfg["failSwapOn"]) == (
        "cgroupfs",
        False,
        False,
    )
    assert cfg["address"] == GATEWAY
    assert cfg["clusterDNS"] == []
    assert cfg["authentication"]["anonymous"]["enabled"] is False


def test_containerd_restricts_oom_score_adj_and_uses_runc() -> None:
    toml = configs.containerd_toml(PATHS, "localhost/warmgate-pause:x")
    assert "restrict_oom_score_adj = true" in toml
    assert 'BinaryName = "/usr/bin/runc"' in toml
    assert 'sandbox_image = "localhost/warmgate-pause:x"' in toml
    assert "netns_mounts_under_state_dir = true" in toml


def test_kube_proxy_leaves_the_machines_conntrack_settings_alone() -> None:
    cfg = configs.kube_proxy_config(Path("/kubeconfig"))
    assert cfg["mode"] == "nftables"
    assert cfg["conntrack"]["maxPerCore"] == 0
    assert cfg["nodePortAddresses"] == [f"{GATEWAY}/32"]


def test_a_second_holder_waits_for_the_lock(tmp_path: Path) -> None:
    first = MachineLock(tmp_path / "lock").acquire(lambda m: None)
    said: list[str] = []
    with pytest.raises(TimeoutError, match=f"pid {os.getpid()}"):
        MachineLock(tmp_path / "lock").acquire(said.append, timeout=0.5)
    assert said == [f"waiting for the dev cluster of pid {os.getpid()} in {Path.cwd()} to stop"]
    first.release()
    MachineLock(tmp_path / "lock").acquire(lambda m: None).release()


def test_the_reaper_does_nothing_after_a_normal_stop() -> None:
    read, write = os.pipe()
    env = {**os.environ, "WARMGATE_DEVCLUSTER_ROOT": "/nonexistent/warmgate-test"}
    cmd = [sys.executable, "-m", "warmgate.devcluster.reaper", str(read)]
    proc = subprocess.Popen(cmd, pass_fds=(read,), env=env)
    os.close(read)
    os.write(write, b"done")
    os.close(write)
    assert proc.wait(timeout=30) == 0
