"""Helpers of the e2e tier: small SpecDecodeDeployments on the stand-in engine, status reads,
waits and a sampler that records what a user would have seen while a scenario ran."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from warmgate.devcluster.cluster import DevCluster
from warmgate.devcluster.images import ImageSet

Manifest = dict[str, Any]
LABEL_NAME = "warmgate.dev/name"


@dataclass
class E2ECluster:
    """The running dev cluster, its images and the installed operator."""

    cluster: DevCluster
    images: ImageSet

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> Any:
        return self.cluster.kubectl(*args, stdin=stdin, check=check)

    def get(self, *args: str) -> Manifest:
        """`kubectl get ... -o json` as a dict."""
        return dict(json.loads(self.kubectl("get", *args, "-o", "json").stdout))

    def get_or_none(self, *args: str) -> Manifest | None:
        done = self.kubectl("get", *args, "-o", "json", check=False)
        return dict(json.loads(done.stdout)) if done.returncode == 0 else None

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


def wait_for(what: str, check: Callable[[], Any], timeout: float = 180.0) -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


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
