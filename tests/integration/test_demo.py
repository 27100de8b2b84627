"""The README's run command (`warmgate demo`) works against a real control plane."""

from __future__ import annotations

import json

import pytest

from warmgate.cli import main
from warmgate.controlplane import ControlPlane

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
