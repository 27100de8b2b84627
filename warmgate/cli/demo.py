"""`warmgate demo`: the main job end to end on a real control plane (embedded when none is set)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from warmgate.api import SpecDecodeDeployment, load_manifest
from warmgate.buckets import BucketPlan
from warmgate.cli.demo_text import wrap
from warmgate.reconcile.planning.evaluate import evaluate

# The demo runs from a checkout; the dev infrastructure it starts (warmgate.devcluster: the
# control plane, the operator process, the node) is imported only when it runs, since the
# operator image leaves that package out (.dockerignore) and imports this module for its CLI.
REPO_ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = REPO_ROOT / "crds" / "warmgate.dev_specdecodedeployments.yaml"
EXAMPLES = REPO_ROOT / "examples"
NO_NODES = (
    "\nThis control plane has no nodes (no kubelet, no Gaudi), so the warmup Jobs the operator\n"
    "created stay pending. On a Gaudi cluster the runner warms each plan in the engine, the\n"
    "operator sets Warmed=True on its verified verdict and rolls the serving Deployment out."
)
# A manifest the API server itself must refuse: eagle3 without its draft model, and a token
# budget below one block (both CEL rules of the CRD, not checks of this program).
BAD_MANIFEST: dict[str, Any] = {
    "apiVersion": "warmgate.dev/v1alpha1",
    "kind": "SpecDecodeDeployment",
    "metadata": {"name": "refused"},
    "spec": {
        "model": {"name": "meta-llama/Llama-3.1-8B-Instruct"},
        "image": "vllm-gaudi:v0.26.0",
        "device": "gaudi2",
        "engine": {"maxModelLen": 8192, "maxNumBatchedTokens": 64},
        "speculative": {"method": "eagle3", "numSpeculativeTokens": 2},
    },
}


@dataclass
class Kubectl:
    """kubectl bound to one kubeconfig."""

    binary: str
    kubeconfig: Path

    def __call__(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        cmd = [self.binary, f"--kubeconfig={self.kubeconfig}", *args]
        return subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=check)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="Plan, prove and apply the examples on a real control plane",
        description=(
            "Uses the cluster of --kubeconfig/$KUBECONFIG when set; otherwise starts a local "
            "etcd + kube-apiserver (the test harness's control plane) and stops it at the end."
        ),
    )
    parser.add_argument("--kubeconfig", type=Path, default=None)
    parser.add_argument("--namespace", default="warmgate-demo")
    parser.add_argument(
        "--no-operator", action="store_true", help="only plan locally; do not start the operator"
    )
    parser.add_argument(
        "--api-only", action="store_true", help="skip the local node (warmgate/devcluster)"
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the local cluster up after the demo until Ctrl-C (`make run KEEP=1`)",
    )
    parser.add_argument("manifests", nargs="*", type=Path, help="default: examples/*.yaml")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    local = not (args.kubeconfig or "KUBECONFIG" in os.environ or args.manifests)
    if local and not (args.api_only or args.no_operator):
        from warmgate.cli import demo_cluster  # noqa: PLC0415 - only when a node may start

        reason = demo_cluster.unavailable()
        if reason is None:
            return demo_cluster.run(args.namespace, keep=args.keep)
        print(f"No local node here ({reason}): showing the API-only demo instead.\n")
    manifests = list(args.manifests) or sorted(EXAMPLES.glob("*.yaml"))
    with _cluster(args.kubeconfig) as kubectl:
        _install_crd(kubectl)
        kubectl("create", "namespace", args.namespace, check=False)
        with _operator(kubectl, args.namespace, enabled=not args.no_operator):
            names = [_apply_and_plan(kubectl, path, args.namespace) for path in manifests]
            _show_refusal(kubectl, args.namespace)
            if not args.no_operator:
                _show_status(kubectl, args.namespace, names)
                print(NO_NODES)
        print(kubectl("get", "sdd", "-n", args.namespace, "-o", "wide").stdout)
    return 0


@contextlib.contextmanager
def _operator(kubectl: Kubectl, namespace: str, enabled: bool) -> Iterator[None]:
    if not enabled:
        yield
        return
    from warmgate.devcluster.controlplane import OperatorProcess  # noqa: PLC0415 - dev only

    with tempfile.TemporaryDirectory(prefix="warmgate-operator-") as tmp:
        op = OperatorProcess(kubectl.kubeconfig, namespace, Path(tmp) / "operator.log")
        try:
            op.wait_alive()
            print(f"Started the operator (watching namespace {namespace})")
            yield
        finally:
            op.stop()
            print("Stopped the operator")


@contextlib.contextmanager
def _cluster(kubeconfig: Path | None) -> Iterator[Kubectl]:
    configured = kubeconfig or (
        Path(os.environ["KUBECONFIG"]) if "KUBECONFIG" in os.environ else None
    )
    if configured is not None:
        print(f"Using the cluster of {configured}")
        yield Kubectl(shutil.which("kubectl") or _asset_kubectl(), configured)
        return
    from warmgate.devcluster.controlplane import ControlPlane, find_assets  # noqa: PLC0415

    assets = find_assets(provision=True)
    print("No cluster configured: starting a local etcd + kube-apiserver ...", flush=True)
    with ControlPlane(assets) as cp:
        print(f"Started kube-apiserver at {cp.server} in {cp.startup_seconds:.1f} s")
        yield Kubectl(str(assets / "kubectl"), cp.kubeconfig)
    print("Stopped the local control plane")


def _asset_kubectl() -> str:
    from warmgate.devcluster.controlplane import find_assets  # noqa: PLC0415 - dev only

    return str(find_assets(provision=False) / "kubectl")


def _install_crd(kubectl: Kubectl) -> None:
    kubectl("apply", "--server-side", "-f", str(CRD_FILE))
    kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRD_FILE))
    print(f"Installed CRD from {CRD_FILE.relative_to(REPO_ROOT)}")


def _apply_and_plan(kubectl: Kubectl, path: Path, namespace: str) -> str:
    sdd = load_manifest(path)
    doc = yaml.safe_load(path.read_text())
    doc["metadata"]["namespace"] = namespace
    res = kubectl("apply", "--validate=strict", "-f", "-", stdin=json.dumps(doc), check=False)
    verdict = res.stdout.strip() or res.stderr.strip()
    print(f"\n== {path.name}: {verdict}")
    _print_plan(sdd)
    return str(doc["metadata"]["name"])


def _print_plan(sdd: SpecDecodeDeployment) -> None:
    """What the operator's own planning stage decides for this manifest."""
    result = evaluate(sdd)
    evaluation = result.evaluation
    if evaluation is None:
        print(f"   refused: {result.planned.message}")
        return
    plan, report = evaluation.engine_plan, evaluation.report
    print(f"   {_counts(plan)}")
    print(f"   coverage: {report.states:,} reachable states, {_verdict(report.uncovered)}")
    for gap in report.uncovered[:3]:
        print(f"     unwarmed {gap.engine_config} x{gap.states:,} states, e.g. {_state(gap)}")
    if report.covered:
        return
    if evaluation.completion_applies:
        added, done = evaluation.extra_buckets, evaluation.effective
        left = evaluation.known_unwarmable
        proof = "proof holds again"
        if left:
            states = sum(g.states for g in left)
            proof = (
                f"{states:,} states in {len(left)} shape(s) no warmup can compile, e.g. "
                f"{_state(left[0])}"
            )
        print(f"   completed plan: +{added} buckets, {_counts(done)}; {proof}")
    else:
        coverage = result.coverage
        print(
            f"   not completed: the operator writes CoverageProven={coverage.status} "
            f"{coverage.reason}"
        )


def _state(gap: Any) -> str:
    a, b, c = gap.example
    if gap.phase == "decode":
        return f"{a} seqs holding {b} KV blocks, {c} tokens each"
    return f"a prefill of {a} x {b} tokens after {c} cached blocks"


def _show_status(kubectl: Kubectl, namespace: str, names: list[str]) -> None:
    """What the operator wrote: wait for each object's status, then print its conditions."""
    print("\n== status written by the operator:")
    for name in names:
        status = _planned_status(kubectl, namespace, name)
        print(f"   {name}: phase {status.get('phase', '(none yet)')}")
        for c in status.get("conditions", []):
            line = f"{c['type']}={c['status']} {c['reason']}: {c.get('message', '')}"
            print("\n".join(wrap(line, "     ", "       ")))


def _planned_status(kubectl: Kubectl, namespace: str, name: str, timeout_s: float = 120) -> Any:
    """The object's status once the operator has planned it (BucketsPlanned no longer Unknown):
    the operator first writes a Planning notice with the same observedGeneration."""
    deadline = time.monotonic() + timeout_s
    status: Any = {}
    while True:
        got = kubectl("get", "-n", namespace, "sdd", name, "-o", "json", check=False)
        status = (json.loads(got.stdout).get("status") or {}) if got.returncode == 0 else {}
        planned = [c for c in status.get("conditions") or [] if c["type"] == "BucketsPlanned"]
        if (planned and planned[0]["status"] != "Unknown") or time.monotonic() > deadline:
            return status
        time.sleep(0.5)


def _counts(plan: BucketPlan) -> str:
    return (
        f"buckets: {len(plan.prompt_buckets)} prompt, {len(plan.seed_decode_buckets)} seed decode, "
        f"{len(plan.decode_buckets)} decode after spec expansion (+{plan.spec_added})"
    )


def _verdict(uncovered: Sequence[Any]) -> str:
    if not uncovered:
        return "every one runs a warmed bucket (proven)"
    return f"{len(uncovered)} shapes would run unwarmed"


def _show_refusal(kubectl: Kubectl, namespace: str) -> None:
    doc = {**BAD_MANIFEST, "metadata": {"name": "refused", "namespace": namespace}}
    res = kubectl("apply", "--validate=strict", "-f", "-", stdin=json.dumps(doc), check=False)
    print("\n== an invalid manifest (eagle3 without draftModel, maxNumBatchedTokens < blockSize):")
    print("   " + (res.stderr.strip() or res.stdout.strip()).replace("\n", "\n   "))
    if res.returncode == 0:
        print("   ERROR: the server accepted it", file=sys.stderr)
