"""Helpers of the e2e tier: small SpecDecodeDeployments on the stand-in engine, status reads,
waits and a sampler that records what a user would have seen while a scenario ran."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support import kube_read
from support.polling import wait_for  # the e2e modules import their wait from here

from warmgate.devcluster.cluster import DevCluster
from warmgate.devcluster.images import ImageSet

Manifest = dict[str, Any]
LABEL_NAME = "warmgate.dev/name"
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass
class E2ECluster:
    """The running dev cluster, its images and the installed operator."""

    cluster: DevCluster
    images: ImageSet

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> Any:
        return self.cluster.kubectl(*args, stdin=stdin, check=check)

    @property
    def kubectl_path(self) -> Path:
        """The kubectl binary (the owner's control plane's, or the one the owner named)."""
        guest = getattr(self.cluster, "kubectl_path", None)
        if guest is not None:
            return Path(guest)
        assert self.cluster.cp is not None, "the cluster is not started"
        return self.cluster.cp.assets / "kubectl"

    @property
    def control_plane_logs(self) -> Path:
        """The folder of the control plane's logs (kube-controller-manager.log, ...): the
        owner's own, or the one it named for the guest."""
        guest = getattr(self.cluster, "logs", None)
        if guest is not None:
            return Path(guest)
        assert self.cluster.cp is not None, "the cluster is not started"
        return self.cluster.cp.workdir

    def get(self, *args: str) -> Manifest:
        """`kubectl get ... -o json` as a dict (read in-process: support/kube_read.py)."""
        return kube_read.get(self.cluster.kubeconfig, self.kubectl, *args)

    def get_or_none(self, *args: str) -> Manifest | None:
        """``get``, or None where kubectl fails (the object is not there)."""
        return kube_read.get_or_none(self.cluster.kubeconfig, self.kubectl, *args)

    def apply(self, doc: Manifest) -> None:
        done = self.kubectl("apply", "-f", "-", stdin=json.dumps(doc), check=False)
        assert done.returncode == 0, f"kubectl apply refused it: {done.stderr}"

    def wait_ready(self, ns: str, name: str, timeout_s: int = 300, check: bool = False) -> Any:
        """`kubectl wait` for the SpecDecodeDeployment's Ready condition (the completed process)."""
        return self.kubectl(
            "wait", "-n", ns, f"sdd/{name}", "--for=condition=Ready", f"--timeout={timeout_s}s",
            check=check,
        )  # fmt: skip

    def items(self, kind: str, ns: str, name: str) -> list[Manifest]:
        """Objects of ``kind`` owned (by label) by the SpecDecodeDeployment ``name``."""
        got = self.get(kind, "-n", ns, "-l", f"{LABEL_NAME}={name}")
        return list(got.get("items") or [])


def sdd(
    name: str,
    ns: str,
    image: str,
    *,
    k: int = 2,
    replicas: int = 1,
    faults: str = "",
    node_selector: dict[str, str] | None = None,
    cache_claim: bool = False,
    pending_timeout: int | None = None,
    run_as_user: int | None = None,
    pod_security: str | None = None,
    method: str = "ngram",
) -> Manifest:
    """A small SpecDecodeDeployment whose image is the stand-in engine (a test double)."""
    speculative: Manifest = {"method": method, "numSpeculativeTokens": k}
    if method in ("eagle", "eagle3"):
        speculative["draftModel"] = {"name": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}
    spec: Manifest = {
        "model": {"name": "Qwen/Qwen2.5-0.5B-Instruct"},
        "image": image,
        "device": "gaudi2",
        "engine": {"maxModelLen": 2048, "maxNumSeqs": 32, "maxNumBatchedTokens": 2048},
        "speculative": speculative,
        "warmup": {"timeoutSeconds": 300, "retries": 2},
        "serving": {"replicas": replicas},
    }
    if faults:
        spec["engine"]["env"] = [{"name": "STANDIN_FAULTS", "value": faults}]
    if node_selector:
        spec["warmup"]["placement"] = {"nodeSelector": node_selector}
    if cache_claim:
        spec["warmup"]["cache"] = {"claimTemplate": {"size": "1Gi"}, "maxSizeMB": 512}
    if pending_timeout is not None:
        spec["warmup"]["pendingTimeoutSeconds"] = pending_timeout
    if run_as_user is not None:
        spec["runAsUser"] = run_as_user
    if pod_security is not None:
        spec["podSecurity"] = pod_security
    return {
        "apiVersion": "warmgate.dev/v1alpha1",
        "kind": "SpecDecodeDeployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def condition(obj: Manifest | None, type_: str) -> Manifest:
    """The condition of that type in ``obj``'s status ({} when absent)."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return {}


def is_true(obj: Manifest | None, type_: str) -> bool:
    return condition(obj, type_).get("status") == "True"


def restricted_container() -> Manifest:
    """The securityContext of a container Pod Security "restricted" admits (a user's Pod)."""
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def warmup_end(e2e: E2ECluster, ns: str, job: Manifest) -> Manifest:
    """The terminated state of the warmup container of the Job's one Pod (fails unless the Job
    has exactly one)."""
    selector = f"batch.kubernetes.io/job-name={job['metadata']['name']}"
    (pod,) = e2e.get("pods", "-n", ns, "-l", selector)["items"]
    (runner,) = [s for s in pod["status"]["containerStatuses"] if s["name"] == "warmup"]
    return dict(runner["state"]["terminated"])


def log_unwarmed(pod: Manifest, shapes: list[list[Any]]) -> None:
    """Asks the stand-in engine of the serving ``pod`` (through its IP) to log ``shapes`` as
    configurations it did not warm."""
    ip, port = pod["status"]["podIP"], pod["spec"]["containers"][0]["ports"][0]["containerPort"]
    request = urllib.request.Request(
        f"http://{ip}:{port}/standin/unwarmed",
        data=json.dumps({"configs": shapes}).encode(),
        headers={"Content-Type": "application/json"},
    )
    _OPENER.open(request, timeout=10).read()


@dataclass
class Sample:
    """One observation: seconds since the sampler started, and what it read."""

    at: float
    data: Manifest


@dataclass
class Sampler:
    """Reads ``probe()`` twice a second in a thread, keeping every observation."""

    probe: Callable[[], Manifest]
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _began: float = 0.0

    def __enter__(self) -> Sampler:
        self._began = time.monotonic()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while True:
            # A read that failed (e.g. an object in the middle of a replace) is skipped.
            with contextlib.suppress(OSError, ValueError, subprocess.SubprocessError):
                self.samples.append(Sample(time.monotonic() - self._began, self.probe()))
            if self._stop.wait(0.5):
                return

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def pod_ready(pod: Manifest) -> bool:
    return is_true(pod, "Ready")


def gate_open(pod: Manifest) -> bool:
    return is_true(pod, "warmgate.dev/warmed")


def running_runner(e2e: E2ECluster, ns: str, name: str) -> Manifest | None:
    """The warmup Pod of ``name`` once its runner runs: its first progress line comes after it
    installed its SIGTERM handler. (Before that, the Python process is PID 1 of its container
    and the kernel drops a SIGTERM it has no handler for.)"""
    for pod in e2e.items("pods", ns, name):
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if status["name"] == "warmup" and "running" in status.get("state", {}):
                logs = e2e.kubectl(
                    "logs", "-n", ns, pod["metadata"]["name"], "-c", "warmup", check=False
                )
                if "warmgate-progress stage" in logs.stdout:
                    return pod
    return None


def wait_or_none(what: str, check: Callable[[], Any], timeout: float = 180.0) -> Any:
    """`wait_for`, but None on timeout: for a fixture whose tests judge the outcome one by one."""
    try:
        return wait_for(what, check, timeout)
    except AssertionError:
        return None


WITNESS_NODE = "warmgate-witness"
WITNESS_TAINT = "warmgate.dev/witness"


def _micro_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())


@contextlib.contextmanager
def witness_node(e2e: E2ECluster, every_s: float = 5.0) -> Iterator[str]:
    """A second Node that stays Ready while the scenario runs: a Node object with no kubelet
    behind it, cordoned and tainted so nothing lands on it, whose Lease this thread renews.

    Why: with one node, a node that goes NotReady leaves every zone "fully disrupted", and
    kube-controller-manager's node lifecycle controller then enters "master disruption mode":
    it removes the NoExecute taints and stops tainting (it assumes the control plane lost the
    network, not the nodes). Whether the unreachable taint survives then depends on whether
    its tainting goroutine ran in the ~100 ms before that pass ended: a race that two CI runs
    lost. A real cluster has other nodes that stay Ready; so does this one, for the scenario.
    """
    now = _micro_now()
    e2e.apply(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": WITNESS_NODE, "labels": {"warmgate.dev/witness": "true"}},
            "spec": {
                "unschedulable": True,
                "taints": [
                    {"key": WITNESS_TAINT, "effect": effect}
                    for effect in ("NoSchedule", "NoExecute")
                ],
            },
        }
    )
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "WitnessReady",
        "message": "a Node object of the e2e tier whose Lease the test renews",
        "lastHeartbeatTime": now.replace(".000000", ""),
        "lastTransitionTime": now.replace(".000000", ""),
    }
    e2e.kubectl(
        "patch", "node", WITNESS_NODE, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"conditions": [ready]}}),
    )  # fmt: skip
    stop = threading.Event()

    def lease() -> Manifest:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": WITNESS_NODE, "namespace": "kube-node-lease"},
            "spec": {
                "holderIdentity": WITNESS_NODE,
                "leaseDurationSeconds": 40,
                "renewTime": _micro_now(),
            },
        }

    def renew() -> None:
        while not stop.wait(every_s):
            # A renewal that failed is retried at the next tick (the grace period is 50 s).
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                e2e.kubectl("apply", "-f", "-", stdin=json.dumps(lease()), check=False)

    e2e.apply(lease())
    thread = threading.Thread(target=renew, daemon=True)
    thread.start()
    try:
        yield WITNESS_NODE
    finally:
        stop.set()
        thread.join(timeout=30)
        e2e.kubectl("delete", "node", WITNESS_NODE, "--wait=false", check=False)
        e2e.kubectl("delete", "lease", "-n", "kube-node-lease", WITNESS_NODE, check=False)


class EditUser:
    """kubectl as ServiceAccount ``name`` of the namespace, bound to the built-in `edit`
    ClusterRole there, with its own token (a kubeconfig that holds nothing else)."""

    def __init__(self, e2e: E2ECluster, ns: str, folder: Path, name: str) -> None:
        e2e.kubectl("create", "serviceaccount", name, "-n", ns)
        e2e.kubectl(
            "create", "rolebinding", f"{name}-edit", "--clusterrole=edit",
            f"--serviceaccount={ns}:{name}", "-n", ns,
        )  # fmt: skip
        token = e2e.kubectl("create", "token", name, "-n", ns, "--duration=1h").stdout
        raw = json.loads(e2e.kubectl("config", "view", "--raw", "--minify", "-o", "json").stdout)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": raw["clusters"][0]["cluster"]}],
            "users": [{"name": name, "user": {"token": token.strip()}}],
            "contexts": [{"name": "u", "context": {"cluster": "c", "user": name}}],
            "current-context": "u",
        }
        self.kubeconfig = folder / f"{name}.kubeconfig"
        self.kubeconfig.write_text(json.dumps(config))
        self.binary = str(e2e.kubectl_path)
        self.ns = ns

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """kubectl as the user in its namespace; with ``check`` a refusal fails the test."""
        cmd = [self.binary, f"--kubeconfig={self.kubeconfig}", "-n", self.ns, *args]
        done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=False)
        assert not check or done.returncode == 0, (
            f"as the user: kubectl {' '.join(args)}: {done.stderr}"
        )
        return done

    def create(self, manifest: Manifest) -> Manifest:
        done = self.kubectl(
            "create", "-o", "json", "-f", "-", stdin=json.dumps(manifest), check=False
        )
        assert done.returncode == 0, f"the API server refused the user's object: {done.stderr}"
        return dict(json.loads(done.stdout))
