"""A sharded warmup against the real API server (issue 38): the Indexed Job the operator makes
for ``spec.warmup.shards: 4``, and its verdict from the four Pods' summaries.

No kubelet or Job controller runs in this tier, so the test plays them as the unsharded tests do
(support/api_controllers.finish): one Pod per completion index, each with the index annotation
the Job controller writes and the runner's termination summary, then the Job's condition.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.api_controllers import (
    _patch_status,
    get,
    rolled_out,
    runner_summary,
    seeds_example,
    serve,
    started,
)
from support.kube_objects import condition_map, job_status, terminated_status, warmup_pod

from warmgate.contract.shardspec import shard_key
from warmgate.devcluster.controlplane import ControlPlane, OperatorProcess
from warmgate.reconcile.sync.warmup_shards import INDEX_ANNOTATION

pytestmark = [pytest.mark.integration, pytest.mark.slow]

N = 4


def _summaries(key: str, missing: int | None = None) -> dict[int, dict[str, Any]]:
    out = {}
    for i in range(N):
        if i == missing:
            continue
        if i == 0:
            shard = {"role": "merge", "index": 0, "count": N, "merged": N, "slice": "verified"}
            out[i] = runner_summary("verified", key, kv_blocks=4321, shard=shard)
        else:
            shard = {"role": "slice", "index": i, "count": N}
            out[i] = runner_summary("verified", shard_key(key, i, N), shard=shard)
    return out


def _finish_shards(cp: ControlPlane, ns: str, job: str, summaries: dict[int, Any]) -> None:
    """Play the kubelet and the Job controller for an Indexed Job: a Pod per index, then the
    Job's Complete condition."""
    stored = get(cp, "-n", ns, "job", job)
    uid, template = stored["metadata"]["uid"], stored["spec"]["template"]
    for index, summary in summaries.items():
        pod = warmup_pod(ns, job, uid, suffix=str(index), tracked=False, template=template)
        pod["metadata"]["annotations"] = {INDEX_ANNOTATION: str(index)}
        cp.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
        _patch_status(cp, ns, "pod", pod["metadata"]["name"], terminated_status(summary, True))
    _patch_status(cp, ns, "job", job, {**job_status(True), "succeeded": len(summaries)})


def _sharded(ns: str, name: str) -> dict[str, Any]:
    doc = seeds_example(ns, name)
    doc["spec"].setdefault("warmup", {})["shards"] = N
    return doc


def test_a_four_shard_object_goes_ready_on_every_shards_verdict(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    cp, ns = control_plane, module_namespace
    obj = started(cp, ns, "sharded", _sharded(ns, "sharded"))
    warmup = obj["status"]["warmup"]
    job = get(cp, "-n", ns, "job", warmup["jobName"])
    assert job["spec"]["completionMode"] == "Indexed"
    assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (N, N)
    cm_name = next(
        v["configMap"]["name"]
        for v in job["spec"]["template"]["spec"]["volumes"]
        if "configMap" in v and v["configMap"]["name"].startswith("sharded-warmup")
    )
    files = get(cp, "-n", ns, "configmap", cm_name)["data"]
    assert sorted(files) == ["plan.json", *(f"shard-{i}.json" for i in range(N))]
    _finish_shards(cp, ns, warmup["jobName"], _summaries(warmup["cacheKey"]))
    cp.kubectl("wait", "-n", ns, "sdd/sharded", "--for=condition=Warmed", "--timeout=60s")
    obj = get(cp, "-n", ns, "sdd", "sharded")
    assert obj["status"]["warmup"]["shards"] == {"planned": N, "running": 0, "verified": N}
    cp.kubectl("wait", "-n", ns, "deployment/sharded-serving", "--for=create", "--timeout=60s")
    deployment = get(cp, "-n", ns, "deployment", "sharded-serving")
    serve(cp, ns, deployment, "sharded-serving-a")
    rolled_out(cp, ns, "sharded-serving", ready=1)
    cp.kubectl("wait", "-n", ns, "sdd/sharded", "--for=condition=Ready", "--timeout=60s")
    # Serving is the plan's, as after an unsharded warmup (its recipe restore is the runner's,
    # tests/runner/test_runner_shards.py).
    assert (
        get(cp, "-n", ns, "sdd", "sharded")["status"]["serving"]["planHash"]
        == (obj["status"]["plan"]["hash"])
    )


def test_a_missing_slice_is_not_warmed_and_named(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    cp, ns = control_plane, module_namespace
    obj = started(cp, ns, "gap", _sharded(ns, "gap"))
    warmup = obj["status"]["warmup"]
    _finish_shards(cp, ns, warmup["jobName"], _summaries(warmup["cacheKey"], missing=2))
    cp.kubectl(
        "wait",
        "-n",
        ns,
        "sdd/gap",
        "--for=jsonpath={.status.conditions[?(@.type=='Warmed')].reason}=WarmupFailed",
        "--timeout=60s",
    )
    obj = get(cp, "-n", ns, "sdd", "gap")
    message = next(c["message"] for c in obj["status"]["conditions"] if c["type"] == "Warmed")
    assert f"shard 2 of {N}: no Pod" in message
    assert condition_map(obj)["Warmed"][0] == "False"
