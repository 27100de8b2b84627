"""The README's run command (`warmgate demo`) works against a real control plane."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from support.examples import example_doc

from warmgate.cli import demo_cluster, main
from warmgate.devcluster.controlplane import ControlPlane

pytestmark = pytest.mark.integration


def test_demo_applies_plans_and_shows_a_refusal(
    control_plane: ControlPlane, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "demo",
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "--namespace",
            namespace,
            "examples/llama31-8b-eagle3-gaudi2.yaml",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "specdecodedeployment.warmgate.dev/llama31-8b-eagle3 created" in out
    assert "completed plan:" in out
    # eagle3 k=2 at maxModelLen = maxNumBatchedTokens: one prefill no warmup can compile
    # (docs/coverage.md, "Buckets the warmup never compiles"); the completed plan is warmed.
    assert "1 states in 1 shape(s) no warmup can compile, e.g. a prefill of 1 x 8190" in out
    assert "spec.speculative.draftModel: Required value" in out
    assert "CoverageProven=False UnwarmableShapes: target: Completed the plan" in out  # operator
    listed = json.loads(control_plane.kubectl("get", "sdd", "-n", namespace, "-o", "json").stdout)
    assert [item["metadata"]["name"] for item in listed["items"]] == ["llama31-8b-eagle3"]


def test_the_watch_names_an_object_it_did_not_apply_once_and_follows_its_own(
    warmgate_crd: ControlPlane, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 39 item 1: `make run KEEP=1` invites the user to apply their own manifest while the
    demo watches its examples; the watch used to die on it (`KeyError` on the new name), and
    its exit tore the cluster down. The user's object is named once, never followed, and the
    watch ends when the demo's own examples are final. (The test plays the operator: it writes
    the phases through the status subresource.)"""
    cp = warmgate_crd
    ours, theirs = example_doc("minimal-ngram"), example_doc("llama31-8b-seeds")
    theirs["metadata"]["name"] = "broken-image"
    theirs["spec"]["image"] = "registry.invalid/no-such-image:0"
    for doc in (ours, theirs):
        doc["metadata"]["namespace"] = namespace
    name = ours["metadata"]["name"]
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(ours))
    result: dict[str, Any] = {}

    def watch() -> None:
        result["phases"], result["final_at"] = demo_cluster.follow(cp, namespace, [name], 60)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    out = _printed_until(capsys, "== phases as the operator writes them", watcher)
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(theirs))  # the user's own, mid-watch
    _set_phase(cp, namespace, "broken-image", "Warming")
    out += _printed_until(capsys, "broken-image: not one of the demo's examples", watcher)
    _set_phase(cp, namespace, "broken-image", "Failed")
    _set_phase(cp, namespace, name, "Ready")
    watcher.join(timeout=30)
    out += capsys.readouterr().out
    assert not watcher.is_alive(), out
    assert result["phases"] == {name: "Ready"}, out
    assert out.count("broken-image") == 2, out  # its one line and the command to watch it
    assert "broken-image: (no status) ->" not in out
    assert f"{name}: (no status) -> Ready" in out


def _set_phase(cp: ControlPlane, namespace: str, name: str, phase: str) -> None:
    patch = json.dumps({"status": {"phase": phase}})
    cp.kubectl(
        "patch", "sdd", name, "-n", namespace, "--subresource=status", "--type=merge", "-p", patch
    )


def _printed_until(capsys: pytest.CaptureFixture[str], text: str, watcher: threading.Thread) -> str:
    """What the watch printed until ``text`` (within 20 s, while it runs)."""
    out, deadline = "", time.monotonic() + 20
    while text not in out:
        assert watcher.is_alive(), f"the watch ended before printing {text!r}:\n{out}"
        assert time.monotonic() < deadline, f"the watch never printed {text!r}:\n{out}"
        time.sleep(0.2)
        out += capsys.readouterr().out
    return out


def test_the_watch_stops_waiting_for_an_example_deleted_meanwhile(
    warmgate_crd: ControlPlane, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cp = warmgate_crd
    docs = [example_doc("minimal-ngram"), example_doc("llama31-8b-seeds")]
    for doc in docs:
        doc["metadata"]["namespace"] = namespace
        cp.kubectl("apply", "-f", "-", stdin=json.dumps(doc))
    kept, deleted = (doc["metadata"]["name"] for doc in docs)
    result: dict[str, Any] = {}

    def watch() -> None:
        result["phases"], _ = demo_cluster.follow(cp, namespace, [kept, deleted], 60)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    out = _printed_until(capsys, "== phases as the operator writes them", watcher)
    cp.kubectl("delete", "sdd", deleted, "-n", namespace)
    out += _printed_until(capsys, f"{deleted}: (no status) -> (deleted)", watcher)
    _set_phase(cp, namespace, kept, "Ready")
    watcher.join(timeout=30)
    out += capsys.readouterr().out
    assert not watcher.is_alive(), out
    assert result["phases"] == {kept: "Ready", deleted: "(deleted)"}, out
