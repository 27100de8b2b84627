"""A sharded warmup on the real vLLM CPU engine (issue 38): two slices of the tiny eagle3 plan
as two real engine processes side by side, then Pod 0's merge on the whole plan.

The plan files are the operator's own (`desired_children` for the tiny SDD with
``spec.warmup.shards: 2``), pointed at this machine (tiny.local_plan): one folder per "Pod"
(its port, work_dir, local recipes, termination log) and one shared volume, as an Indexed Job's
Pods would have. What this shows: each slice's real engine starts with its own seed file and its
slice's direct drafter warmup, the runner reads its real log and ends ``cpu_engine``; Pod 0 waits
for the other slice's report, starts a third engine with the whole plan and runs the sweep and
the probe through the real HTTP API; the operator's verdict from the three summaries is
Warmed=True ``CPUEngine``. What it does not show: the CPU build compiles no graphs and logs no
bucket list, so no slice is checked against its buckets, no recipe is published or merged, and
nothing says that a recipe one engine compiled is a hit in another (only Gaudi can).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import runner_harness
from realengine import engine, tiny
from realengine.conftest import record
from support.resource_cases import SETTINGS, planned

from warmgate.contract.shardspec import shard_key
from warmgate.reconcile.sync.warmup_shards import INDEX_ANNOTATION
from warmgate.reconcile.sync.warmup_state import WarmupSeen, evaluate_warmup
from warmgate.resources import desired_children

N = 2


@pytest.fixture(scope="module")
def sharded(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Both Pods run to their end; their summaries, the plans and the seconds."""
    tmp = tmp_path_factory.mktemp("sharded")
    sdd = tiny.tiny_sdd("eagle3", k=2)
    # A claim (the slices share their recipes on it; here a folder for the Pods' volume).
    cache = sdd.spec.warmup.cache.model_copy(update={"existing_claim": "recipes"})
    warmup = sdd.spec.warmup.model_copy(update={"shards": N, "cache": cache})
    sdd = sdd.model_copy(update={"spec": sdd.spec.model_copy(update={"warmup": warmup})})
    children = desired_children(sdd, planned(sdd), SETTINGS)
    data = children.warmup_configmap["data"]
    tree = runner_harness.stdlib_tree(tmp / "runner-tree")
    procs, pods = [], []
    began = time.monotonic()
    for i in range(N):
        pod = tmp / f"pod-{i}"
        pod.mkdir()
        for name, text in data.items():
            plan = tiny.local_plan(json.loads(text), models, tmp)  # the volume: shared
            plan["work_dir"] = str(pod / "work")
            plan["cache"]["local_dir"] = str(pod / "local" / "recipes")
            plan["report"]["termination_log"] = str(pod / "tl")
            (pod / name).write_text(json.dumps(plan))
        argv = [str(engine.PYTHON), "-m", "warmgate.warmup", "--shards", str(pod)]
        argv += ["--shard-index", str(i), "--quiet-engine"]
        out = (pod / "runner.out").open("w")
        procs.append(
            subprocess.Popen(
                argv, cwd=tree, env=engine.clean_env({}), stdout=out, stderr=subprocess.STDOUT
            )
        )
        pods.append((pod, out))
    try:
        codes = [p.wait(timeout=3000) for p in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=120)
        for _, out in pods:
            out.close()
    seconds = time.monotonic() - began
    record(f"sharded warmup, {N} slices and the merge", seconds)
    summaries = [json.loads((pod / "tl").read_text()) for pod, _ in pods]
    return {
        "codes": codes,
        "summaries": summaries,
        "pods": [pod for pod, _ in pods],
        "key": children.cache_key,
        "data": data,
        "volume": tmp / "volume",
        "seconds": seconds,
        "job": children.warmup_job,
    }


def test_each_slice_ran_its_own_real_engine_to_cpu_engine(sharded: dict[str, Any]) -> None:
    assert sharded["codes"] == [0, 0], [s["reason"] for s in sharded["summaries"]]
    key = sharded["key"]
    for i in range(N):
        report = json.loads(
            (sharded["volume"] / "reports" / f"{shard_key(key, i, N)}.json").read_text()
        )
        assert report["outcome"] == "cpu_engine", report["reason"]
        assert report["shard"]["role"] == "slice"
        assert report["probe"] is None  # a slice runs no probe: it needs the whole plan
        slice_plan = json.loads(sharded["data"][f"shard-{i}.json"])
        # The engine got the slice's own seed file (what a Gaudi engine would warm).
        assert report["engine"]["argv"][:2] == [str(engine.VLLM), "serve"]
        assert report["drafter_warmup"]["planned"] == len(slice_plan["drafter_warmup"]["shapes"])
    summary = sharded["summaries"][1]
    assert summary["key"] == shard_key(key, 1, N)
    assert summary["shard"] == {"role": "slice", "index": 1, "count": N}


def test_pod_0_merged_both_slices_and_probed_the_whole_plan(sharded: dict[str, Any]) -> None:
    final = sharded["summaries"][0]
    assert (final["outcome"], final["key"]) == ("cpu_engine", sharded["key"])
    assert final["shard"] == {
        "role": "merge",
        "index": 0,
        "count": N,
        "merged": N,
        "slice": "cpu_engine",
    }
    report = json.loads((sharded["volume"] / "reports" / f"{sharded['key']}.json").read_text())
    probe = report["probe"]
    assert probe is not None
    assert not probe["timed_out"]
    assert sum(step["sent"] for step in probe["steps"]) > 0
    assert all(step["ok"] == step["sent"] for step in probe["steps"]), probe["steps"]
    assert report["cache"]["merged"] == {"slices": N, "files": 0}
    # Nothing published: a CPU build verifies no Gaudi graph (docs/runner.md, "A CPU engine").
    assert not (sharded["volume"] / sharded["key"]).exists()


def test_the_operators_verdict_merges_the_three_summaries(sharded: dict[str, Any]) -> None:
    job = sharded["job"]
    job = {**job, "metadata": {**job["metadata"], "uid": "uid-job"}}
    job["status"] = {"succeeded": N, "conditions": [{"type": "Complete", "status": "True"}]}
    pods = []
    for i, summary in enumerate(sharded["summaries"]):
        meta = {
            "name": f"p-{i}",
            "creationTimestamp": "2026-12-05T12:00:00Z",
            "annotations": {INDEX_ANNOTATION: str(i)},
            "labels": {"batch.kubernetes.io/controller-uid": "uid-job"},
            "ownerReferences": [{"kind": "Job", "uid": "uid-job", "controller": True}],
            "finalizers": ["batch.kubernetes.io/job-tracking"],
        }
        status = {
            "phase": "Succeeded",
            "containerStatuses": [
                {"name": "warmup", "state": {"terminated": {"message": json.dumps(summary)}}}
            ],
        }
        pods.append({"metadata": meta, "spec": job["spec"]["template"]["spec"], "status": status})
    state = evaluate_warmup(job, pods, sharded["key"], WarmupSeen(accept_cpu=True))
    assert (state.verdict.status, state.verdict.reason) == ("True", "CPUEngine")
    assert state.summary.shards is not None
    assert (state.summary.shards.planned, state.summary.shards.verified) == (N, N)
