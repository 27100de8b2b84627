"""`make run` on the local single-node cluster: examples go Pending -> Warming -> Ready for real.

The dev cluster (warmgate/devcluster) runs the real controllers, scheduler and kubelet; the
operator is installed with its Helm chart; each example's image is replaced by the stand-in
engine image, a test double, which the output says plainly.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import yaml

from warmgate.controlplane import REPO_ROOT
from warmgate.devcluster import operator
from warmgate.devcluster.assets import node_assets, unavailable_reason
from warmgate.devcluster.cluster import DevCluster
from warmgate.devcluster.images import Builder

EXAMPLES = REPO_ROOT / "examples"
# A subset that fits one node with 2 cores and 8 stand-in cards, with the reason for the rest.
SHOWN = ("minimal-ngram.yaml", "llama31-8b-seeds.yaml", "llama31-8b-eagle3-gaudi2.yaml")
LEFT_OUT = {
    "deepseek-v3-mtp-gaudi3.yaml": "needs 8 Gaudi3 cards per replica and a claim of real weights",
    "llama33-70b-ngram-gaudi3.yaml": "asks 16 CPUs and 256 GiB per Pod; this node has 2 cores",
    "llama31-8b-lin-contiguous-pa.yaml": "complete: false accepts unwarmed shapes on purpose",
}
STANDIN = """
About the engine: every warmup and serving Pod above ran localhost/warmgate-standin-engine,
a TEST DOUBLE, not vLLM. Its `vllm serve` (tests/doubles/standin_vllm.py) prints the bucket
lines vllm-gaudi prints for the plan, writes fake recipes and answers /health, on 8 stand-in
habana.ai/gaudi cards that the node only advertises. Everything around it was real: the Job,
ReplicaSet, Deployment and EndpointSlice controllers, the scheduler, the kubelet evaluating the
readiness gate, and the operator Pod installed by Helm. On a Gaudi cluster the same Job runs
your vLLM-Gaudi image on real cards: the engine compiles every planned graph (minutes to
hours), the runner checks the engine's own log the same way, and only then does serving roll.
"""
FINAL = ("Ready", "Failed")
NO_STATUS = "(no status)"


def unavailable() -> str | None:
    """Why the local node cannot run here (None when it can)."""
    return unavailable_reason()


def say(message: str) -> None:
    print(f"dev cluster: {message}", flush=True)


def run(namespace: str, timeout: float = 420.0) -> int:
    """Start the cluster, install the chart, apply the subset, print each phase as it changes."""
    images = Builder(say).ensure()
    with DevCluster(node_assets(), images, say) as cluster:
        operator.install(cluster.assets, cluster.kubeconfig, images.operator.ref)
        say(f"installed the operator with `helm install` (image {images.operator.ref})")
        cluster.kubectl("create", "namespace", namespace)
        # The eagle3 example reads a Hugging Face token; the stand-in never uses it.
        cluster.kubectl(
            "create",
            "secret",
            "generic",
            "hf-token",
            "-n",
            namespace,
            "--from-literal=token=not-a-token-stand-in-engine",
        )
        names = [_apply(cluster, name, namespace, images.engine.ref) for name in SHOWN]
        for name, why in LEFT_OUT.items():
            print(f"   (left out {name}: {why})")
        phases = _watch(cluster, namespace, names, timeout)
        _verdicts(cluster, namespace)
        print("\n" + cluster.kubectl("get", "sdd", "-n", namespace, "-o", "wide").stdout)
        print(cluster.kubectl("get", "jobs,pods", "-n", namespace).stdout)
        print(STANDIN)
    return 0 if all(p == "Ready" for p in phases.values()) else 1


def _apply(cluster: DevCluster, file: str, namespace: str, image: str) -> str:
    doc: dict[str, Any] = yaml.safe_load((EXAMPLES / file).read_text())
    doc["metadata"]["namespace"] = namespace
    doc["spec"]["image"] = image
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(doc))
    print(f"== applied examples/{file} as {doc['metadata']['name']} (image: the stand-in engine)")
    return str(doc["metadata"]["name"])


def _watch(cluster: DevCluster, namespace: str, names: list[str], timeout: float) -> dict[str, str]:
    """Print `t  name: old -> new (message)` for every phase change until all are final."""
    began, seen = time.monotonic(), dict.fromkeys(names, NO_STATUS)
    print("\n== phases as the operator writes them (kubectl get sdd, polled every second):")
    print(f"   ({NO_STATUS}: Pending; the operator writes its first status once planning is done)")
    while time.monotonic() - began < timeout:
        items = json.loads(cluster.kubectl("get", "sdd", "-n", namespace, "-o", "json").stdout)
        for obj in items["items"]:
            name, status = obj["metadata"]["name"], obj.get("status") or {}
            phase = status.get("phase", NO_STATUS)
            if phase != seen.get(name):
                message = _message(status)
                print(
                    f"   {time.monotonic() - began:6.1f} s  {name}: {seen[name]} -> {phase}"
                    f"{f'  ({message})' if message else ''}",
                    flush=True,
                )
                seen[name] = phase
        if all(p in FINAL for p in seen.values()):
            break
        time.sleep(1)
    else:
        print(f"   timed out after {timeout:.0f} s", file=sys.stderr)
    return seen


def _verdicts(cluster: DevCluster, namespace: str) -> None:
    """Each object's coverage proof and warmup verdict, as the operator wrote them."""
    items = json.loads(cluster.kubectl("get", "sdd", "-n", namespace, "-o", "json").stdout)
    print("\n== what the operator proved and verified:")
    for obj in items["items"]:
        print(f"   {obj['metadata']['name']}:")
        for c in (obj.get("status") or {}).get("conditions") or []:
            if c["type"] in ("CoverageProven", "Warmed"):
                print(f"     {c['type']}={c['status']} {c['reason']}: {c.get('message', '')[:150]}")


def _message(status: dict[str, Any]) -> str:
    by_type = {c["type"]: c for c in status.get("conditions") or []}
    for kind in ("Ready", "Warmed", "CoverageProven"):
        if kind in by_type and by_type[kind].get("message"):
            return str(by_type[kind]["message"])[:110]
    return ""
