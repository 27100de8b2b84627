"""The operator reading the runners through the Pod IP, against the real apiserver: the warmup's
progress at most once per 10 s, and unwarmed shapes while serving (status.drift, the Event, the
Ready reason, the gauges). The runners are the real ones: the warmup's status board, and serve
mode running the stand-in engine. No kubelet runs, so the test plays it: the Pods it creates
carry 127.0.0.1 as their IP and a free port as the status port the operator reads."""

from __future__ import annotations

import itertools
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from runner_harness import free_port
from support.api_controllers import (
    get,
    started,
)
from support.kube_objects import condition_map, warmup_pod
from support.runner_pods import (
    post_unwarmed,
    running_on_loopback,
    serving_on_loopback,
    wait_until,
    with_status_port,
)

from warmgate.contract.board import WarmupBoard
from warmgate.devcluster.controlplane import ControlPlane, OperatorProcess
from warmgate.warmup.statusboard import Board, serve_board

pytestmark = [pytest.mark.integration, pytest.mark.slow]


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
    # the runner's own status board, as `--status-port` serves it
    board = Board(
        WarmupBoard(key=key, stage="engine", progress={"prompt": (4, 4), "decode": (1, 24)})
    )
    server = serve_board(board, port, host="127.0.0.1")
    try:
        stored = get(cp, "-n", ns, "job", job)
        uid, template = stored["metadata"]["uid"], stored["spec"]["template"]
        pod = warmup_pod(ns, job, uid, template=template)
        running_on_loopback(cp, ns, with_status_port(pod, port))
        first = wait_until(lambda: _progress(cp, ns, "progress").get("warmedBuckets") == 5)
        assert first is True
        progress = _progress(cp, ns, "progress")
        assert (progress["plannedBuckets"], progress["phase"]) == (planned, "decode")
        writes = {progress["updateTime"]}
        for done in range(2, 14):  # the engine compiles a bucket every second
            board.progress("decode", done, 24)
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


def test_unwarmed_shapes_while_serving_are_reported(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str, tmp_path: Path
) -> None:
    ns, cp = module_namespace, control_plane
    with serving_on_loopback(cp, ns, "drifting", tmp_path) as engine_port:
        post_unwarmed(engine_port, [["decode", 3, 1, 40]])
        wait_until(
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
