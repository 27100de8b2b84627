"""`make run` on the local single-node cluster: examples go Pending -> Warming -> Ready for real.

The dev cluster (warmgate/devcluster) runs the real controllers, scheduler and kubelet; the
operator is installed with its Helm chart; each example's image is replaced by the stand-in
engine image, a test double, except one more example on the real vLLM CPU engine where it is
provisioned (`demo_real`); the output says plainly which ran what. The run ends with the
result, what each example proved and verified, and the commands a user tries next (`--keep`
leaves the cluster up for them until Ctrl-C).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Protocol

import yaml

from warmgate.cli import demo_real
from warmgate.cli.demo_text import (
    LEGEND,
    WIDTH,
    example_summary,
    headline,
    paragraph,
    phase_message,
    shorten,
)
from warmgate.devcluster import engine_image, operator
from warmgate.devcluster.assets import node_assets, unavailable_reason
from warmgate.devcluster.cluster import DevCluster
from warmgate.devcluster.controlplane import REPO_ROOT
from warmgate.devcluster.images import Builder, Image
from warmgate.devcluster.steps import StepFailed

EXAMPLES = REPO_ROOT / "examples"
# A subset that fits one node with 2 cores and 8 stand-in cards, with the reason for the rest.
SHOWN = ("minimal-ngram.yaml", "llama31-8b-seeds.yaml", "llama31-8b-eagle3-gaudi2.yaml")
LEFT_OUT = {
    "deepseek-v3-mtp-gaudi3.yaml": "needs 8 Gaudi3 cards per replica and a claim of real weights",
    "llama33-70b-ngram-gaudi3.yaml": "asks 16 CPUs and 256 GiB per Pod; this node has 2 cores",
    "llama31-8b-lin-contiguous-pa.yaml": "complete: false accepts unwarmed shapes on purpose",
}
STANDIN = """
About the stand-in engine: {which} warmup and serving Pod above ran
localhost/warmgate-standin-engine, a TEST DOUBLE, not vLLM. Its `vllm serve`
(tests/doubles/standin_vllm.py) prints the bucket lines vllm-gaudi prints for the plan, writes
fake recipes and answers /health, on 8 habana.ai/gaudi cards the node only advertises.
Everything around it was real: the Job, ReplicaSet, Deployment and EndpointSlice controllers,
the scheduler, the kubelet evaluating the readiness gate, and the operator Pod installed by
Helm. On a Gaudi cluster the same Job runs your vLLM-Gaudi image on real cards: the engine
compiles every planned graph (minutes to hours), the runner checks the engine's own log the
same way, and only then does serving roll out.
"""
FINAL = ("Ready", "Failed")
# An example deleted while the demo watches it (by the user, from another terminal).
DELETED = "(deleted)"
# The real engine's warmup and serving start (each `vllm serve` compiles its graphs on the CPU).
REAL_ENGINE_S = 1500.0
NO_STATUS = "(no status)"


def unavailable() -> str | None:
    """Why the local node cannot run here (None when it can)."""
    return unavailable_reason()


def say(message: str) -> None:
    print(f"dev cluster: {message}", flush=True)


def run(namespace: str, timeout: float = 420.0, keep: bool = False) -> int:
    """Build the images, start the cluster, install the chart, apply the subset, report."""
    try:
        images = Builder(say).ensure()
    except StepFailed as exc:
        say(f"stopped: {exc}")
        return 1
    with DevCluster(node_assets(), images, say) as cluster:
        _install(cluster, namespace, images.operator.ref)
        real, skipped = _real_engine(cluster)
        names = [_apply(cluster, name, namespace, images.engine.ref) for name in SHOWN]
        if real is not None:  # one more: the real vLLM CPU engine (a slower start, minutes)
            names.append(_apply_real(cluster, namespace, real.ref))
            timeout += REAL_ENGINE_S
        for name, why in LEFT_OUT.items():
            print(f"   (left out {name}: {why})")
        began = time.monotonic()
        phases, final_at = follow(cluster, namespace, names, timeout)
        print("\n" + cluster.kubectl("get", "sdd", "-n", namespace, "-o", "wide").stdout)
        print(cluster.kubectl("get", "jobs,pods", "-n", namespace).stdout)
        _report(cluster, namespace, phases, final_at, time.monotonic() - began)
        if real is not None and phases.get(demo_real.NAME) == "Ready":
            demo_real.show(cluster, namespace, images.operator.ref)
        print("\n".join(["", *paragraph(demo_real.closing(real is not None, skipped))]))
        which = "every other" if real is not None else "every"
        print("\n".join(["", *paragraph(STANDIN.format(which=which))]))
        watch = _watch_command(cluster, namespace)
        if keep:
            _next(watch, keep=True)
            _wait_for_ctrl_c()
    if not keep:  # last, after the cluster's own goodbye: what to try next
        _next(watch, keep=False)
    return 0 if all(p == "Ready" for p in phases.values()) else 1


def _install(cluster: DevCluster, namespace: str, image: str) -> None:
    # The chart's default: the operator watches only the namespaces it is given (its Role is
    # created in them, so they exist first).
    cluster.kubectl("create", "namespace", namespace)
    watched = (f"watchNamespaces={{{namespace}}}",)
    operator.install(cluster.assets, cluster.kubeconfig, image, values=watched)
    say(f"installed the operator with `helm install` (image {image})")
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


def _real_engine(cluster: DevCluster) -> tuple[Image | None, str | None]:
    """The real engine's image imported into the node, or why not (not provisioned)."""
    skipped = engine_image.node_reason()
    if skipped is not None:
        say(f"no real engine: {skipped}")
        return None, skipped
    try:
        return engine_image.ensure_imported(Builder(say), cluster.ctr, say), None
    except StepFailed as exc:  # the step printed its log's tail: the demo goes on without it
        return None, f"its image could not be built ({exc})"


def _apply_real(cluster: DevCluster, namespace: str, image: str) -> str:
    doc = demo_real.manifest(namespace, image)
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(doc))
    print(demo_real.announce(image))
    return demo_real.NAME


def _apply(cluster: DevCluster, file: str, namespace: str, image: str) -> str:
    doc: dict[str, Any] = yaml.safe_load((EXAMPLES / file).read_text())
    doc["metadata"]["namespace"] = namespace
    doc["spec"]["image"] = image
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(doc))
    print(f"== applied examples/{file} as {doc['metadata']['name']} (image: the stand-in engine)")
    return str(doc["metadata"]["name"])


class Kubectl(Protocol):
    """What the watch needs of a cluster: its kubectl (DevCluster, ControlPlane)."""

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]: ...


def follow(
    cluster: Kubectl, namespace: str, names: list[str], timeout: float
) -> tuple[dict[str, str], dict[str, float]]:
    """Print `t  name: old -> new (message)` for every phase change of the examples the demo
    applied (``names``) until all are final; return their last phases and when each became
    final. Objects the demo did not apply (the user's own, from another terminal while the
    demo watches) are named once and not followed; an example deleted meanwhile is reported
    and no longer waited for. Nothing in the namespace ends the watch but its examples."""
    began, seen = time.monotonic(), dict.fromkeys(names, NO_STATUS)
    final_at: dict[str, float] = {}
    others: set[str] = set()
    print("\n== phases as the operator writes them (kubectl get sdd, polled every second):")
    print("\n".join(paragraph(LEGEND)))
    while time.monotonic() - began < timeout:
        items = json.loads(cluster.kubectl("get", "sdd", "-n", namespace, "-o", "json").stdout)
        at, listed = time.monotonic() - began, set()
        for obj in items["items"]:
            name, status = obj["metadata"]["name"], obj.get("status") or {}
            listed.add(name)
            if name not in seen:
                if name not in others:
                    others.add(name)
                    print(_other(at, name, namespace), flush=True)
                continue
            phase = status.get("phase", NO_STATUS)
            if phase != seen[name]:
                print(_transition(at, name, seen[name], phase, phase_message(status)), flush=True)
                seen[name] = phase
                if phase in FINAL:
                    final_at[name] = at
        for name in seen.keys() - listed:
            if seen[name] != DELETED:
                print(_transition(at, name, seen[name], DELETED, ""), flush=True)
                seen[name] = DELETED
        if all(p in FINAL or p == DELETED for p in seen.values()):
            break
        time.sleep(1)
    else:
        print(f"   timed out after {timeout:.0f} s", file=sys.stderr)
    return seen, final_at


def _other(at: float, name: str, namespace: str) -> str:
    """One line for an object the demo did not apply: named, not followed."""
    line = f"   {at:6.1f} s  {name}: not one of the demo's examples, not followed here"
    return f"{line}\n{' ' * 14}(kubectl get sdd {name} -n {namespace} -w)"


def _transition(at: float, name: str, old: str, new: str, message: str) -> str:
    """The change, and under it what the new phase is doing, shortened at a word boundary."""
    line = f"   {at:6.1f} s  {name}: {old} -> {new}"
    indent = " " * 14
    return f"{line}\n{indent}{shorten(message, WIDTH - len(indent))}" if message else line


def _report(
    cluster: DevCluster,
    namespace: str,
    phases: dict[str, str],
    final_at: dict[str, float],
    seconds: float,
) -> None:
    """The result first, then each example's proof, warmup verdict and serving, whole."""
    items = json.loads(cluster.kubectl("get", "sdd", "-n", namespace, "-o", "json").stdout)
    print("\n".join(headline(phases, seconds)))
    for obj in items["items"]:
        if obj["metadata"]["name"] in phases:  # the examples only, not the user's own objects
            print("\n".join(example_summary(obj, final_at.get(obj["metadata"]["name"]))))


def _watch_command(cluster: DevCluster, namespace: str) -> list[str]:
    """Two short lines to paste, never wrapped (a wrapped command breaks when pasted)."""
    return [
        f"export KUBECONFIG={cluster.kubeconfig}",
        f"{_shown(cluster.assets / 'kubectl')} get sdd -n {namespace} -w",
    ]


def _next(watch: list[str], keep: bool) -> None:
    """The three things a user tries next, as commands to paste."""
    print("\n== Try next")
    if keep:
        print("   1. The cluster stays up until you press Ctrl-C here. Watch the examples from")
        print("      another terminal:")
    else:
        print("   1. Run `make run KEEP=1` to keep the cluster up (Ctrl-C stops it), and watch the")
        print("      examples from another terminal:")
    print("\n".join(f"        {line}" for line in watch))
    print("   2. Plan and prove your own manifest, no cluster needed (exit 1 if a shape stays")
    print("      unwarmed):")
    print("        .venv/bin/warmgate plan my-sdd.yaml --strict")
    print("   3. On a real Gaudi cluster: push the operator image, install the chart, apply:")
    print(
        "        docker build -t REGISTRY/warmgate:0.1.0 . && docker push REGISTRY/warmgate:0.1.0"
    )
    print("        helm install warmgate charts/warmgate -n warmgate-system --create-namespace \\")
    print("          --set image.repository=REGISTRY/warmgate --set 'watchNamespaces={llm}'")
    print("        kubectl create namespace llm")
    print("        kubectl apply -n llm -f examples/llama31-8b-eagle3-gaudi2.yaml")
    print("        kubectl get sdd -n llm -w")
    print("      (README, 'Install on a cluster'; the warmup Job then runs your vLLM-Gaudi image)")


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _wait_for_ctrl_c() -> None:
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("\nCtrl-C: stopping the cluster")
