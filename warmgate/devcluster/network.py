"""The node's network, local only: a bridge for the Pods, and nothing routed off the machine.

Pods live in network namespaces that the cluster's containerd creates (under its state
directory) and are attached by the CNI ``bridge`` plugin to ``wgbr0`` with ``ipMasq: false``.
Their only routes are the Pod subnet and the Service range through the bridge: no default
route. Two more guards keep every packet on the machine even when something misbehaves:

- an nft table drops anything forwarded into or out of the bridge from another interface
  (the bridge plugin turns ``ip_forward`` on; the teardown restores its old value);
- the Service range is a blackhole route, so a ClusterIP packet that kube-proxy did not
  translate is dropped instead of following the default route.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from warmgate.devcluster.layout import (
    BRIDGE,
    GATEWAY,
    NFT_TABLE,
    POD_CIDR,
    SERVICE_CIDR,
    Paths,
)

IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")
# Chains the kubelet adds when an iptables binary exists (pkg/kubelet/kubelet_network_linux.go).
KUBELET_CHAINS = (
    ("filter", "KUBE-FIREWALL"),
    ("mangle", "KUBE-IPTABLES-HINT"),
    ("mangle", "KUBE-KUBELET-CANARY"),
    ("nat", "KUBE-KUBELET-CANARY"),
    ("filter", "KUBE-KUBELET-CANARY"),
)
NFT_RULES = f"""\
table inet {NFT_TABLE} {{
  chain forward {{
    type filter hook forward priority -10; policy accept;
    iifname "{BRIDGE}" oifname != "{BRIDGE}" drop
    oifname "{BRIDGE}" iifname != "{BRIDGE}" drop
  }}
}}
"""


def _run(*cmd: str, stdin: str | None = None, check: bool = True) -> str:
    done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr.strip()}")
    return done.stdout


def nft_tables() -> list[str]:
    """`family name` of every nft table on the machine."""
    out = _run("nft", "list", "tables", check=False)
    return [line.removeprefix("table ").strip() for line in out.splitlines() if line.strip()]


def cni_config(paths: Paths) -> dict[str, Any]:
    """The CNI network: bridge + host-local IPAM, no masquerade, no default route."""
    return {
        "cniVersion": "0.4.0",
        "name": "warmgate",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "isDefaultGateway": False,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR, "gateway": GATEWAY}]],
                    # The Service range goes through the gateway, where kube-proxy translates it.
                    "routes": [{"dst": SERVICE_CIDR}],
                    "dataDir": str(paths.cni_ipam),
                },
            }
        ],
    }


def set_up(paths: Paths) -> None:
    """Create the bridge, the guards and the CNI config; record what to restore."""
    record = {"ip_forward": IP_FORWARD.read_text().strip(), "nft_tables": nft_tables()}
    paths.record.write_text(json.dumps(record))
    _run("ip", "link", "add", BRIDGE, "type", "bridge")
    _run("ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE)
    _run("ip", "link", "set", BRIDGE, "up")
    _run("ip", "route", "add", "blackhole", SERVICE_CIDR)
    _run("nft", "-f", "-", stdin=NFT_RULES)
    paths.cni_conf.mkdir(parents=True, exist_ok=True)
    paths.cni_ipam.mkdir(parents=True, exist_ok=True)
    (paths.cni_conf / "10-warmgate.conflist").write_text(json.dumps(cni_config(paths), indent=2))


def tear_down(paths: Paths) -> None:
    """Remove what ``set_up``, kube-proxy and the kubelet added; idempotent."""
    record: dict[str, Any] = {}
    if paths.record.is_file():
        record = json.loads(paths.record.read_text())
    before = set(record.get("nft_tables", []))
    _remove_kubelet_chains()
    for table in nft_tables():
        ours = table in (f"inet {NFT_TABLE}", "ip kube-proxy", "ip6 kube-proxy")
        # Tables iptables-nft created for the kubelet's chains during the run.
        left = table.split()[-1] in ("filter", "mangle", "nat") and table not in before
        if ours or (left and paths.record.is_file()):
            _run("nft", "delete", "table", *table.split(), check=False)
    _run("ip", "route", "del", "blackhole", SERVICE_CIDR, check=False)
    _run("ip", "link", "del", BRIDGE, check=False)
    if "ip_forward" in record:
        IP_FORWARD.write_text(str(record["ip_forward"]))


def _remove_kubelet_chains() -> None:
    for binary in ("iptables", "ip6tables"):
        if subprocess.run(["which", binary], capture_output=True, check=False).returncode:
            continue
        for hook in ("INPUT", "OUTPUT"):
            _run(binary, "-w", "-t", "filter", "-D", hook, "-j", "KUBE-FIREWALL", check=False)
        for table, chain in KUBELET_CHAINS:
            _run(binary, "-w", "-t", table, "-F", chain, check=False)
            _run(binary, "-w", "-t", table, "-X", chain, check=False)


def bridge_exists() -> bool:
    """Whether ``wgbr0`` is there (a killed run left it)."""
    return Path(f"/sys/class/net/{BRIDGE}").exists()
