"""Scenario i: the serving engine runs a shape it did not warm, on the real node.

The serving Pod runs the stand-in engine under the runner's serve mode (the chart's operator
image copies the runner in). The test asks the stand-in, over the Pod IP on the cluster's
local bridge, to log an unwarmed configuration; the runner counts it, the operator reads it
through the Pod IP and reports it (status.drift, the Event, Ready's reason). Then the engine is
killed inside the container: the kubelet restarts the container, and the count survives.
"""

from __future__ import annotations

import http.client
import json
import urllib.request
from typing import Any

import pytest
from e2e_support import E2ECluster, condition, is_true, log_unwarmed, sdd, wait_for

NAME = "drift"
SHAPE = ["decode", 3, 1, 40]
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# Kills the stand-in engine (the serve-mode runner's child) from inside the container.
KILL_ENGINE = (
    "import os, signal\n"
    "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
    "    with open(f'/proc/{pid}/cmdline', 'rb') as f:\n"
    "        argv = f.read().split(b'\\0')\n"
    "    if any(a.endswith(b'vllm') for a in argv[:2]) and b'serve' in argv:\n"
    "        os.kill(int(pid), signal.SIGKILL)\n"
)


def _serving_pod(e2e: E2ECluster, ns: str) -> dict[str, Any]:
    pods = [p for p in e2e.items("pods", ns, NAME) if "serving" in p["metadata"]["name"]]
    running = [p for p in pods if (p.get("status") or {}).get("podIP")]
    assert len(running) == 1, [p["metadata"]["name"] for p in pods]
    return running[0]


def _status(ip: str) -> dict[str, Any]:
    with _OPENER.open(f"http://{ip}:9464/warmgate/status", timeout=5) as response:
        doc: dict[str, Any] = json.loads(response.read())
    return doc


@pytest.fixture(scope="module")
def served(e2e: E2ECluster, namespace: str) -> dict[str, Any]:
    e2e.apply(sdd(NAME, namespace, e2e.images.engine.ref))

    def ready() -> dict[str, Any] | None:
        obj = e2e.get("sdd", "-n", namespace, NAME)
        return obj if is_true(obj, "Ready") else None

    wait_for("Ready=True", ready, 240)
    pod = _serving_pod(e2e, namespace)
    log_unwarmed(pod, [SHAPE])

    def drifted() -> dict[str, Any] | None:
        obj = e2e.get("sdd", "-n", namespace, NAME)
        return obj if condition(obj, "Ready").get("reason") == "UnwarmedShapeObserved" else None

    return {"obj": wait_for("Ready reason UnwarmedShapeObserved", drifted, 60), "pod": pod}


def test_the_operator_reports_the_shape(served: dict[str, Any]) -> None:
    obj = served["obj"]
    ready = condition(obj, "Ready")
    assert ready["status"] == "True"  # the replicas still serve
    assert "('decode', 3, 1, 40)" in ready["message"]
    drift = obj["status"]["drift"]
    assert (drift["unwarmedShapes"], drift["shapes"]) == (1, ["('decode', 3, 1, 40)"])
    assert drift["planHash"] == obj["status"]["serving"]["planHash"]
    assert "proposal" in drift  # what the seeds would do, or why none is needed


def test_a_warning_event_names_the_shape(
    e2e: E2ECluster, namespace: str, served: dict[str, Any]
) -> None:
    events = e2e.get("events", "-n", namespace, "--field-selector", "reason=UnwarmedShapeObserved")
    (event,) = [e for e in events["items"] if e["involvedObject"]["name"] == NAME]
    assert event["type"] == "Warning"
    assert "('decode', 3, 1, 40)" in event["message"]


def test_the_container_log_still_holds_the_engines_line(
    e2e: E2ECluster, namespace: str, served: dict[str, Any]
) -> None:
    name = served["pod"]["metadata"]["name"]
    log = e2e.kubectl("logs", "-n", namespace, name, "-c", "vllm").stdout
    assert "Configuration: ('decode', 3, 1, 40) was not warmed-up!" in log
    assert "Generated" in log  # the engine's own start-up lines pass through too


def test_the_count_survives_an_engine_restart(
    e2e: E2ECluster, namespace: str, served: dict[str, Any]
) -> None:
    pod = served["pod"]
    name, ip = pod["metadata"]["name"], pod["status"]["podIP"]
    assert _status(ip)["engine_starts"] == 1
    e2e.kubectl("exec", "-n", namespace, name, "-c", "vllm", "--", "python3", "-c", KILL_ENGINE)

    def restarted() -> dict[str, Any] | None:
        try:
            doc = _status(ip)
        except (OSError, http.client.HTTPException):  # the container restarts mid-answer
            return None
        return doc if doc["engine_starts"] == 2 else None

    doc = wait_for("the container restarted with its counts", restarted, 120)
    assert doc["unwarmed"] == ["('decode', 3, 1, 40)"]
    assert doc["unwarmed_count"] == 1
    restarts = e2e.get("pod", "-n", namespace, name)["status"]["containerStatuses"][0]
    assert restarts["restartCount"] == 1  # the kubelet saw the crash: the runner hid nothing
    obj = e2e.get("sdd", "-n", namespace, NAME)
    assert obj["status"]["drift"]["unwarmedShapes"] == 1
