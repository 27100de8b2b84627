"""A sharded warmup's Pods (issue 38) as processes side by side: the runner with the stand-in.

Each "Pod" gets its own folder (work_dir, local recipes, port, termination log), as Pods of an
Indexed Job do, and runs `python3 -m warmgate.warmup --shards DIR --shard-index i` on the plan
files the operator builds (`resources/warmup_shards.py`). The stand-in writes one recipe file
per bucket (STANDIN_BUCKET_RECIPES) and says how many it found already there: the merge's engine
finding every bucket of the whole plan is what the merged cache is for. On Gaudi that is a
recipe cache hit per graph, which only Gaudi can confirm.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from runner_harness import CONFIG_A, _runner_command, free_port, make_plan

from warmgate.buckets import EngineShapeConfig, plan_buckets
from warmgate.contract.order import parse_plan
from warmgate.contract.shardspec import shard_key
from warmgate.resources.warmup_shards import sharded_warmup
from warmgate.warmup.cache import find_published, restore
from warmgate.warmup.runner.outcomes import Outcome

pytestmark = pytest.mark.slow

KEY = "config-a"


def _pods(
    tmp: Path, shards: int, env: dict[int, dict[str, str]] | None = None, wait_s: float = 0
) -> list[Path]:
    """One folder per Pod with the ConfigMap's files, each pointed at the Pod's own paths."""
    doc = make_plan(tmp, k=1)
    doc["engine"]["env"]["STANDIN_BUCKET_RECIPES"] = "1"
    order = parse_plan(doc)
    config = EngineShapeConfig(**CONFIG_A, num_gpu_blocks=8192, num_speculative_tokens=1)
    sharded = sharded_warmup(order, plan_buckets(config), shards)
    files = {"plan.json": sharded.merge.to_json(), **sharded.files()}
    pods = []
    for i in range(shards):
        pod = tmp / f"pod-{i}"
        pod.mkdir()
        for name, content in files.items():
            text: dict[str, Any] = copy.deepcopy(content)
            text["engine"]["port"] = free_port()
            text["engine"]["env"].update((env or {}).get(i, {}))
            text["engine"]["env"]["STANDIN_RECORD"] = str(pod / "standin-record.json")
            text["work_dir"] = str(pod / "work")
            text["cache"]["local_dir"] = str(pod / "local" / "recipes")
            text["report"]["termination_log"] = str(pod / "termination-log")
            if wait_s and text["shard"]["role"] == "merge":  # a failing slice never publishes
                text["shard"]["wait_s"] = wait_s
            (pod / name).write_text(json.dumps(text))
        pods.append(pod)
    return pods


def _run_pods(tmp: Path, pods: list[Path]) -> list[tuple[int, dict[str, Any]]]:
    """Start every Pod's runner at once; their exit codes and termination summaries."""
    _, tree, env = _runner_command(tmp, make_plan(tmp), "", None)
    procs, outs = [], []
    for i, pod in enumerate(pods):
        argv = [sys.executable, "-S", "-E", "-m", "warmgate.warmup", "--shards", str(pod)]
        outs.append((pod / "runner.out").open("w"))
        procs.append(
            subprocess.Popen(
                [*argv, "--shard-index", str(i)],
                cwd=tree,
                env=env,
                stdout=outs[-1],
                stderr=subprocess.STDOUT,
            )
        )
    try:
        codes = [p.wait(timeout=600) for p in procs]
    finally:
        for out in outs:
            out.close()
    results = []
    for code, pod in zip(codes, pods, strict=True):
        log = pod / "termination-log"
        results.append((code, json.loads(log.read_text()) if log.exists() else {}))
    return results


def _recipes_line(pod: Path) -> str:
    """The stand-in's last recipes line (the merge's): found anywhere in a line, as the engine's
    other writers (the EngineCore prefix) may share a line with it."""
    text = (pod / "work" / "engine.log").read_text()
    return re.findall(r"standin-recipes compiled=\d+ cached=\d+", text)[-1]


def test_four_shards_verify_merge_into_one_entry_and_probe_once(tmp_path: Path) -> None:
    pods = _pods(tmp_path, 4)
    results = _run_pods(tmp_path, pods)
    for i, (code, summary) in enumerate(results):
        assert code == 0, (pods[i] / "runner.out").read_text()[-3000:]
        assert summary["outcome"] == "verified"
    # Pods 1-3 speak for their slice; Pod 0 for the whole plan, having verified its own slice.
    for i in (1, 2, 3):
        assert results[i][1]["key"] == shard_key(KEY, i, 4)
        assert results[i][1]["shard"] == {"role": "slice", "index": i, "count": 4}
    final = results[0][1]
    assert final["key"] == KEY
    assert final["shard"] == {
        "role": "merge",
        "index": 0,
        "count": 4,
        "merged": 4,
        "slice": "verified",
    }
    # The merge's engine found every graph of the whole plan in the merged recipes (63 prompt
    # and 105 decode buckets of config A, k=1): nothing compiled after the slices.
    assert _recipes_line(pods[0]) == "standin-recipes compiled=0 cached=168"
    volume = tmp_path / "volume"
    manifest = find_published(volume, KEY)
    assert manifest is not None
    buckets = {f["path"] for f in manifest["files"] if f["path"].startswith("buckets/")}
    assert len(buckets) == 168
    # The slices' entries are gone (merged); the merged one restores as serving restores it.
    assert all(find_published(volume, shard_key(KEY, i, 4)) is None for i in range(4))
    restored = restore(volume, KEY, tmp_path / "serving" / "recipes")
    assert restored is not None
    assert restored.problems == []
    report = json.loads((volume / "reports" / f"{KEY}.json").read_text())
    assert report["cache"]["merged"]["slices"] == 4
    # Every slice's own report: its engine warmed exactly its slice (the lists matched).
    for i in range(4):
        sliced = json.loads((volume / "reports" / f"{shard_key(KEY, i, 4)}.json").read_text())
        assert {n: c["match"] for n, c in sliced["buckets"].items()} == {
            "decode": True,
            "prompt": True,
            "seed_decode": True,
        }
        assert sliced["probe"] is None or not sliced["probe"].get("requests")


def test_a_shard_logging_a_bucket_outside_its_slice_is_not_verified(tmp_path: Path) -> None:
    pods = _pods(tmp_path, 4, env={2: {"STANDIN_FAULTS": "extra_decode_bucket"}}, wait_s=25)
    results = _run_pods(tmp_path, pods)
    code, summary = results[2]
    assert code == int(Outcome.PLAN_MISMATCH)
    assert summary["key"] == shard_key(KEY, 2, 4)
    assert "decode" in summary["reason"]
    # The merge waited for slice 2's entry until its deadline, and names it.
    code, final = results[0]
    assert code == int(Outcome.SHARD_MISSING)
    assert final["outcome"] == "shard_missing"
    assert f"slice 2 of 4 (key {shard_key(KEY, 2, 4)})" in final["reason"]
    assert find_published(tmp_path / "volume", KEY) is None


def test_a_failing_shard_leaves_the_plan_unpublished(tmp_path: Path) -> None:
    # Every Pod gets the same fault for index 1 only (as one Job's template gives all its Pods
    # the same env, and the Job controller each its JOB_COMPLETION_INDEX): only shard 1 fails.
    fault = "crash_at_start@1"
    env = {i: {"STANDIN_FAULTS": fault, "JOB_COMPLETION_INDEX": str(i)} for i in (0, 1)}
    pods = _pods(tmp_path, 2, env=env, wait_s=25)
    results = _run_pods(tmp_path, pods)
    assert results[1][0] == int(Outcome.ENGINE_FAILED)
    assert results[0][1]["outcome"] == "shard_missing"
    assert results[0][1]["shard"]["slice"] == "verified"  # the fault spared index 0
    assert "slice 1 of 2" in results[0][1]["reason"]
    assert find_published(tmp_path / "volume", KEY) is None
    # Slice 0's entry stays for the Job's retry (only a published merge removes it).
    assert find_published(tmp_path / "volume", shard_key(KEY, 0, 2)) is not None
