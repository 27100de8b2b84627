"""Runner Pods on loopback for the integration tier: no kubelet runs, so the tests play it.

A Pod the test creates runs "at" 127.0.0.1, with the runner (its status board, or serve mode in
front of the stand-in engine) listening on a free local port that the Pod names as its status
port: the operator reads it through the Pod IP as it would in a cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from runner_harness import STANDIN, expected_lists, free_port, stdlib_tree

from support.api_controllers import finish, get, replica_set_of, rolled_out, runner_summary, started
from support.kube_objects import serving_pod
from support.polling import wait_for
from warmgate.devcluster.controlplane import ControlPlane

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def with_status_port(pod: dict[str, Any], port: int) -> dict[str, Any]:
    ports = [{"name": "warmgate-status", "containerPort": port, "protocol": "TCP"}]
    pod["spec"]["containers"][0]["ports"] = ports
    return pod


def running_on_loopback(cp: ControlPlane, ns: str, pod: dict[str, Any]) -> None:
    """Play the kubelet: the Pod runs, at 127.0.0.1 (where the test's runner listens)."""
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    status = json.dumps({"status": {"phase": "Running", "podIP": "127.0.0.1"}})
    name = pod["metadata"]["name"]
    cp.kubectl("patch", "pod", name, "-n", ns, "--subresource=status", "--type=merge", "-p", status)


def wait_until(what: Callable[[], Any], timeout: float = 60.0) -> Any:
    """What ``what`` returns once it is truthy (polled every 0.3 s), within ``timeout`` s."""
    return wait_for(getattr(what, "__name__", "the check"), what, timeout, every=0.3)


def serve_mode(tmp: Path, engine_port: int, status_port: int) -> subprocess.Popen[bytes]:
    seeds = tmp / "buckets.txt"
    seeds.write_text(expected_lists(1)[0])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "STANDIN_"))}
    env.update(VLLM_BUCKETING_FROM_FILE=str(seeds), PT_HPU_RECIPE_CACHE_CONFIG=f"{tmp}/rc,True,64")
    engine = [sys.executable, str(STANDIN), "serve", "m", "--port", str(engine_port)]
    argv = [sys.executable, "-S", "-E", "-m", "warmgate.warmup", "--serve"]
    argv += ["--status-port", str(status_port), "--state-file", str(tmp / "observed.json")]
    return subprocess.Popen(
        [*argv, "--", *engine],
        cwd=stdlib_tree(tmp / "tree"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def post_unwarmed(
    port: int, configs: list[list[Any]], misses: list[list[Any]] | None = None
) -> None:
    """Asks the stand-in engine on ``port`` to log ``configs`` as unwarmed (and ``misses`` as
    buckets it did not prepare)."""
    body: dict[str, Any] = {"configs": configs}
    if misses is not None:
        body["not_prepared"] = misses
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/standin/unwarmed",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    _OPENER.open(request, timeout=5).read()


def healthy(port: int) -> bool:
    """Whether the stand-in engine on ``port`` answers /health."""
    try:
        _OPENER.open(f"http://127.0.0.1:{port}/health", timeout=1).read()
    except OSError:
        return False
    return True


@contextlib.contextmanager
def serving_on_loopback(cp: ControlPlane, ns: str, name: str, tmp: Path) -> Iterator[int]:
    """An object ``name`` created, its warmup verified, and its one serving Pod Ready at
    127.0.0.1 with serve mode in front of the stand-in engine; yields the engine's port (where
    the test posts unwarmed shapes) and stops serve mode after."""
    warmup = started(cp, ns, name)["status"]["warmup"]
    finish(cp, ns, warmup["jobName"], runner_summary("verified", warmup["cacheKey"]), ok=True)
    cp.kubectl("wait", "-n", ns, f"deployment/{name}-serving", "--for=create", "--timeout=60s")
    deployment = get(cp, "-n", ns, "deployment", f"{name}-serving")
    engine_port, status_port = free_port(), free_port()
    proc = serve_mode(tmp, engine_port, status_port)
    try:
        wait_until(lambda: healthy(engine_port))
        rs = replica_set_of(cp, ns, deployment)
        pod = with_status_port(serving_pod(ns, rs, f"{name}-a"), status_port)
        running_on_loopback(cp, ns, pod)
        rolled_out(cp, ns, f"{name}-serving", ready=1)
        cp.kubectl("wait", "-n", ns, f"sdd/{name}", "--for=condition=Ready", "--timeout=60s")
        yield engine_port
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
