"""The operator reading the runners through the Pod IP, against the real apiserver: the warmup's
progress at most once per 10 s, and unwarmed shapes while serving (status.drift, the Event, the
Ready reason, the gauges). The runners are the real ones: the warmup's status board, and serve
mode running the stand-in engine. No kubelet runs, so the test plays it: the Pods it creates
carry 127.0.0.1 as their IP and a free port as the status port the operator reads."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from runner_harness import STANDIN, expected_lists, free_port, stdlib_tree
from support.api_controllers import (
    finish,
    get,
    replica_set_of,
    rolled_out,
    runner_summary,
    started,
)
from support.kube_objects import condition_map, serving_pod, warmup_pod

from warmgate.controlplane import ControlPlane, OperatorProcess
from warmgate.warmup.statusboard import Board, serve_board

pytestmark = [pytest.mark.integration, pytest.mark.slow]
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _with_status_port(pod: dict[str, Any], port: int) -> dict[str, Any]:
    ports = [{"name": "warmgate-status", "containerPort": port, "protocol": "TCP"}]
    pod["spec"]["containers"][0]["ports"] = ports
    return pod


def _running_on_loopback(cp: ControlPlane, ns: str, pod: dict[str, Any]) -> None:
    """Play the kubelet: the Pod runs, at 127.0.0.1 (where the test's runner listens)."""
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    status = json.dumps({"status": {"phase": "Running", "podIP": "127.0.0.1"}})
    name = pod["metadata"]["name"]
    cp.kubectl("patch", "pod", name, "-n", ns, "--subresource=status", "--type=merge", "-p", status)


def _wait(what: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError("never happened")


def _progress(cp: ControlPlane, ns: str, name: str) -> dict[str, Any]:
    warmup = get(cp, "-n", ns, "sdd", name)["status"].get("warmup") or {}
    return dict(warmup.get("progress") or {})


def test_warmup_progress_reaches_the_status_at_most_every_ten_seconds(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    ns, cp = module_namespace, control_plane
    obj = started(cp, ns, "progress")
    key, job = obj["status"]["warmup"]["cacheKey"], obj["status"]["warmup"]["jobName"]
    planned = obj["status"]["plan"]["totalBuckets"]
    port = free_port()
    board = Board("warmup")  # the runner's own status board, as `--status-port` serves it
    board.update(key=key, stage="engine", progress={"prompt": [4, 4], "decode": [1, 24]})
    server = serve_board(board, port, host="127.0.0.1")
    try:
        uid = get(cp, "-n", ns, "job", job)["metadata"]["uid"]
        _running_on_loopback(cp, ns, _with_status_port(warmup_pod(ns, job, uid), port))
        first = _wait(lambda: _progress(cp, ns, "progress").get("warmedBuckets") == 5)
        assert first is True
        progress = _progress(cp, ns, "progress")
        assert (progress["plannedBuckets"], progress["phase"]) == (planned, "decode")
        writes = {progress["updateTime"]}
        for done in range(2, 14):  # the engine compiles a bucket every second
            board.set_in("progress", "decode", [done, 24])
            time.sleep(1.0)
            writes.add(_progress(cp, ns, "progress")["updateTime"])
        stamps = sorted(datetime.fromisoformat(t.replace("Z", "+00:00")) for t in writes)
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(stamps)]
        assert 1 <= len(gaps) <= 2, stamps  # 12 s of a 1 s resync: one or two writes, not 12
        assert all(gap >= 10 for gap in gaps), gaps
        metrics = operator.get("/metrics")
        assert f'warmgate_warmup_progress_ratio{{name="progress",namespace="{ns}"}}' in metrics
    finally:
        server.shutdown()
        server.server_close()


def _serve_mode(tmp: Path, engine_port: int, status_port: int) -> subprocess.Popen[bytes]:
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


def _post_unwarmed(port: int, configs: list[list[Any]]) -> None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/standin/unwarmed",
        data=json.dumps({"configs": configs}).encode(),
        headers={"Content-Type": "application/json"},
    )
    _OPENER.open(request, timeout=5).read()


def _healthy(port: int) -> bool:
    try:
        _OPENER.open(f"http://127.0.0.1:{port}/health", timeout=1).read()
    except OSError:
        return False
    return True


def test_unwarmed_shapes_while_serving_are_reported(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str, tmp_path: Path
) -> None:
    ns, cp = module_namespace, control_plane
    warmup = started(cp, ns, "drifting")["status"]["warmup"]
    finish(cp, ns, warmup["jobName"], runner_summary("verified", warmup["cacheKey"]), ok=True)
    cp.kubectl("wait", "-n", ns, "deployment/drifting-serving", "--for=create", "--timeout=60s")
    deployment = get(cp, "-n", ns, "deployment", "drifting-serving")
    engine_port, status_port = free_port(), free_port()
    proc = _serve_mode(tmp_path, engine_port, status_port)
    try:
        _wait(lambda: _healthy(engine_port))
        rs = replica_set_of(cp, ns, deployment)
        pod = _with_status_port(serving_pod(ns, rs, "drifting-a"), status_port)
        _running_on_loopback(cp, ns, pod)
        rolled_out(cp, ns, "drifting-serving", ready=1)
        cp.kubectl("wait", "-n", ns, "sdd/drifting", "--for=condition=Ready", "--timeout=60s")
        _post_unwarmed(engine_port, [["decode", 3, 1, 40]])
        _wait(
            lambda: (
                condition_map(get(cp, "-n", ns, "sdd", "drifting"))["Ready"][1]
                == "UnwarmedShapeObserved"
            )
        )
        obj = get(cp, "-n", ns, "sdd", "drifting")
        assert condition_map(obj)["Ready"] == ("True", "UnwarmedShapeObserved")
        drift = obj["status"]["drift"]
        assert (drift["unwarmedShapes"], drift["shapes"]) == (1, ["('decode', 3, 1, 40)"])
        assert drift["proposedSeeds"] == {"decode": [[3, 1, 40]]}
        assert drift["planHash"] == obj["status"]["serving"]["planHash"]
        events = get(cp, "-n", ns, "events", "--field-selector", "reason=UnwarmedShapeObserved")
        (event,) = [e for e in events["items"] if e["involvedObject"]["name"] == "drifting"]
        assert "('decode', 3, 1, 40)" in event["message"]
        assert event["type"] == "Warning"
        metrics = operator.get("/metrics")
        assert (
            f'warmgate_serving_unwarmed_shapes{{name="drifting",namespace="{ns}"}} 1.0' in metrics
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
