"""Scenario v: a sharded warmup (issue 38) on the real node, with the stand-in engine (a test
double: no Gaudi here).

``spec.warmup.shards: 4``: the operator makes an Indexed Job of 4 completions; the real Job
controller runs its 4 Pods side by side on the node's stand-in cards, each warming its slice of
the plan (the stand-in writes one recipe file per bucket, STANDIN_BUCKET_RECIPES); Pod 0 merges
the slices' entries, runs the whole plan on them and publishes one entry under the plan's key.
The object goes Ready; status.warmup.shards reads planned 4 / verified 4; the serving Pod's
init container restores the merged entry and its engine finds every bucket's recipe there
(``standin-recipes compiled=0``: the stand-in's own stand-in for recipe cache hits, which only
Gaudi can confirm).

A second object whose engine fails in shard 2 only (the stand-in fault ``crash_at_start@2``,
read with the JOB_COMPLETION_INDEX the Job controller sets) is Warmed=False, its reason naming
"shard 2 of 4", though the Job controller deletes the other shards' Pods when the Job fails.
The failing object runs first (it ends in seconds and frees its cards), so the 4-shard warmup
never waits for cards the scenario itself holds.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from e2e_support import E2ECluster, Manifest, condition, is_true, sdd, wait_for

from warmgate.reconcile.sync.warmup_shards import INDEX_ANNOTATION

N = 4
READY = "sharded"
BROKEN = "sharded-broken"
RECIPES = {"name": "STANDIN_BUCKET_RECIPES", "value": "1"}
RECIPES_LINE = re.compile(r"standin-recipes compiled=(\d+) cached=(\d+)")


def sharded(name: str, ns: str, image: str, *env: Manifest, retries: int = 2) -> Manifest:
    doc = sdd(name, ns, image, cache_claim=True)
    doc["spec"]["warmup"].update({"shards": N, "retries": retries})
    doc["spec"]["engine"]["env"] = [RECIPES, *env]
    return doc


def job_pods(e2e: E2ECluster, ns: str, job: Manifest) -> list[Manifest]:
    selector = f"batch.kubernetes.io/job-name={job['metadata']['name']}"
    return list(e2e.get("pods", "-n", ns, "-l", selector)["items"])


def runner_summary(pod: Manifest) -> dict[str, Any]:
    (status,) = [s for s in pod["status"]["containerStatuses"] if s["name"] == "warmup"]
    return dict(json.loads(status["state"]["terminated"]["message"]))


@pytest.fixture(scope="module")
def run(e2e: E2ECluster, namespace: str) -> dict[str, Any]:
    """The failing object first, then the 4-shard one to Ready; the wall times of both."""
    image = e2e.images.engine.ref
    began = time.monotonic()
    fault = {"name": "STANDIN_FAULTS", "value": "crash_at_start@2"}
    e2e.apply(sharded(BROKEN, namespace, image, fault, retries=0))

    def broken_settled() -> Manifest | None:
        obj = e2e.get("sdd", "-n", namespace, BROKEN)
        warmed = condition(obj, "Warmed")
        return obj if warmed.get("reason") == "WarmupFailed" else None

    broken = wait_for(f"{BROKEN}: Warmed=False WarmupFailed", broken_settled, 240)
    (broken_job,) = e2e.items("jobs", namespace, BROKEN)
    failed_at = time.monotonic()
    e2e.apply(sharded(READY, namespace, image))

    def ready_or_stalled() -> Manifest | None:
        obj = e2e.get("sdd", "-n", namespace, READY)
        return obj if is_true(obj, "Ready") or is_true(obj, "Stalled") else None

    ready = wait_for(f"{READY}: Ready (or Stalled)", ready_or_stalled, 300)
    ready_at = time.monotonic()
    return {
        "ready": ready,
        "broken": broken,
        "broken_job": broken_job,
        "broken_s": failed_at - began,
        "ready_s": ready_at - failed_at,
    }


def test_four_shards_warm_side_by_side_and_the_object_goes_ready(
    e2e: E2ECluster, namespace: str, run: dict[str, Any]
) -> None:
    assert is_true(run["ready"], "Ready"), run["ready"]["status"]["conditions"]
    print(f"4-shard warmup to Ready: {run['ready_s']:.0f} s; failing shard's verdict: "
          f"{run['broken_s']:.0f} s")  # fmt: skip
    obj = e2e.get("sdd", "-n", namespace, READY)
    status = obj["status"]["warmup"]
    assert status["shards"] == {"planned": N, "running": 0, "verified": N}
    assert status["attempts"] == 1  # one try of the Job, though it ran N Pods
    (job,) = e2e.items("jobs", namespace, READY)
    assert is_true(job, "Complete"), job["status"]
    assert job["spec"]["completionMode"] == "Indexed"
    assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (N, N)
    pods = job_pods(e2e, namespace, job)
    # The real Job controller ran one Pod per completion index, on the node's stand-in cards.
    indexes = sorted(int(p["metadata"]["annotations"][INDEX_ANNOTATION]) for p in pods)
    assert indexes == list(range(N)), [p["metadata"]["name"] for p in pods]
    assert {p["spec"]["nodeName"] for p in pods} == {"warmgate-node"}
    assert {p["status"]["phase"] for p in pods} == {"Succeeded"}
    by_index = {int(p["metadata"]["annotations"][INDEX_ANNOTATION]): p for p in pods}
    key = status["cacheKey"]
    for i in range(1, N):
        summary = runner_summary(by_index[i])
        assert (summary["outcome"], summary["key"]) == ("verified", f"{key}.shard-{i}-of-{N}")
    merge = runner_summary(by_index[0])
    assert (merge["outcome"], merge["key"]) == ("verified", key)
    assert merge["shard"] == {
        "role": "merge", "index": 0, "count": N, "merged": N, "slice": "verified"
    }  # fmt: skip
    # The four Pods ran at once: each started before any other ended.
    started = [p["status"]["startTime"] for p in pods]
    ended = [
        s["state"]["terminated"]["finishedAt"]
        for p in pods
        for s in p["status"]["containerStatuses"]
        if s["name"] == "warmup"
    ]
    assert max(started) < min(ended), (started, ended)
    warmed = condition(obj, "Warmed")
    assert (warmed["status"], warmed["reason"]) == ("True", "WarmupSucceeded")


def test_the_serving_pod_restores_the_merged_entry_and_finds_every_recipe(
    e2e: E2ECluster, namespace: str, run: dict[str, Any]
) -> None:
    assert is_true(run["ready"], "Ready"), run["ready"]["status"]["conditions"]
    (pod,) = [
        p
        for p in e2e.items("pods", namespace, READY)
        if p["metadata"]["labels"].get("warmgate.dev/component") == "serving"
    ]
    name = pod["metadata"]["name"]
    restored = e2e.kubectl("logs", "-n", namespace, name, "-c", "restore-cache").stdout
    copied = json.loads(restored.strip().splitlines()[-1])
    assert copied["problems"] == [], restored
    assert copied["files"] > 0, restored
    # Pod 0's merge engine found every bucket's recipe in the merged cache (its last stand-in
    # line: the slice it warmed first compiled some); serving's engine, started from what its
    # init container restored (DELETE=False keeps it), finds the same, and compiles none (an
    # empty cache compiles them all).
    (job,) = e2e.items("jobs", namespace, READY)
    merge_pod = next(
        p
        for p in job_pods(e2e, namespace, job)
        if p["metadata"]["annotations"][INDEX_ANNOTATION] == "0"
    )
    merge_log = e2e.kubectl("logs", "-n", namespace, merge_pod["metadata"]["name"]).stdout
    merged = RECIPES_LINE.findall(merge_log)
    assert merged, merge_log[-2000:]
    assert merged[-1][0] == "0", merged

    def recipes_line() -> tuple[str, str] | None:
        logs = e2e.kubectl("logs", "-n", namespace, name, "-c", "vllm", check=False).stdout
        found = RECIPES_LINE.findall(logs)
        return found[-1] if found else None

    compiled, cached = wait_for("serving's stand-in recipe line", recipes_line, 60)
    assert (compiled, cached) == ("0", merged[-1][1])
    assert int(cached) > 0


def test_one_failing_shard_is_not_warmed_and_named(
    e2e: E2ECluster, namespace: str, run: dict[str, Any]
) -> None:
    obj = run["broken"]
    warmed = condition(obj, "Warmed")
    assert warmed["status"] == "False", warmed
    job = run["broken_job"]
    assert is_true(job, "Failed"), job["status"]
    assert re.search(rf"failed \(\w+\): shard 2 of {N}: engine_failed", warmed["message"]), warmed
    assert obj["status"]["warmup"]["shards"]["planned"] == N
    assert obj["status"]["warmup"]["shards"]["verified"] < N
    # Only shard 2's engine crashed: its own runner says so.
    pods = job_pods(e2e, namespace, job)
    failed = [p for p in pods if p["metadata"]["annotations"][INDEX_ANNOTATION] == "2"]
    assert failed, [p["metadata"]["name"] for p in pods]
    assert runner_summary(failed[-1])["outcome"] == "engine_failed"
    assert e2e.items("deployments", namespace, BROKEN) == []
