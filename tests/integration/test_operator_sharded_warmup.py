"""A sharded warmup against the real API server (issue 38): the Indexed Job the operator makes
for ``spec.warmup.shards: 4``, and its verdict from the four Pods' summaries; the shard count
from the free Gaudi cards (``auto``, and an explicit count falling back), read from Node and
Pod objects and kept with the Job.

No kubelet or Job controller runs in this tier, so the test plays them as the unsharded tests do
(support/api_controllers.finish): one Pod per completion index, each with the index annotation
the Job controller writes and the runner's termination summary, then the Job's condition.
"""

from __future__ import annotations

import json
import time
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


def _sharded(ns: str, name: str, shards: int | str = N) -> dict[str, Any]:
    doc = seeds_example(ns, name)
    warmup = doc["spec"].setdefault("warmup", {})
    warmup["shards"] = shards
    warmup["cache"] = {"claimTemplate": {"size": "1Gi"}, "maxSizeMB": 512}  # the slices share it
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


POOL = "warmgate.dev/test-pool"


def _node(cp: ControlPlane, name: str, pool: str, cards: int) -> None:
    """A Gaudi Node object (no kubelet behind it): labels, allocatable cards, Ready."""
    doc = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {POOL: pool, "habana.ai/gaudi.generation": "gaudi2"}},
    }
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(doc))
    ready = {"type": "Ready", "status": "True", "reason": "Test", "message": "a Node object"}
    status = {
        "capacity": {"habana.ai/gaudi": str(cards)},
        "allocatable": {"habana.ai/gaudi": str(cards)},
        "conditions": [ready],
    }
    patch = json.dumps({"status": status})
    cp.kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p", patch)
    # The apiserver taints a new Node not-ready; the node lifecycle controller (not run in
    # this tier) would remove it once the node is Ready.
    cp.kubectl("patch", "node", name, "--type=merge", "-p", '{"spec": {"taints": null}}')


def _hog(cp: ControlPlane, ns: str, name: str, node: str, cards: int) -> None:
    """A Pod bound to ``node`` holding ``cards`` (Pending forever: no kubelet runs it)."""
    limits = {"habana.ai/gaudi": str(cards)}
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": "pause", "resources": {"limits": limits}}],
        },
    }
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(doc))


def _pooled(ns: str, name: str, pool: str, shards: int | str) -> dict[str, Any]:
    doc = _sharded(ns, name, shards)
    doc["spec"]["warmup"]["placement"] = {"nodeSelector": {POOL: pool}}
    return doc


def _events(cp: ControlPlane, ns: str, name: str, reason: str) -> list[dict[str, Any]]:
    found = get(cp, "-n", ns, "events", f"--field-selector=involvedObject.name={name}")
    return [e for e in found["items"] if e.get("reason") == reason]


@pytest.fixture
def pools(control_plane: ControlPlane, module_namespace: str) -> Any:
    """Two pools of this module's own Nodes: 8 cards with 3 held, and 2 free of 2."""
    cp, ns = control_plane, module_namespace
    names = {"busy": f"{ns}-busy", "small": f"{ns}-small"}
    _node(cp, names["busy"], f"{ns}-busy", 8)
    _node(cp, names["small"], f"{ns}-small", 2)
    _hog(cp, ns, "hog", names["busy"], 3)
    yield names
    cp.kubectl("delete", "node", *names.values(), "--wait=false", check=False)


def test_auto_takes_the_free_cards_and_keeps_its_count_with_the_job(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str, pools: Any
) -> None:
    cp, ns = control_plane, module_namespace
    obj = started(cp, ns, "auto", _pooled(ns, "auto", f"{ns}-busy", "auto"))
    job_name = obj["status"]["warmup"]["jobName"]
    job = get(cp, "-n", ns, "job", job_name)
    # 8 cards, 3 held by a Pod bound to the node: 5 shards of TP 1 (the plan allows 7).
    assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (5, 5)
    (chosen,) = _events(cp, ns, "auto", "ShardsChosen")
    assert chosen["type"] == "Normal"
    assert (
        f"spec.warmup.shards auto: 5 of at most 7 shards (5 free habana.ai/gaudi cards on "
        f"{pools['busy']}, 1 per shard)"
    ) in chosen["message"]
    # The cards free up: the Job keeps its 5 shards (the same Job), nothing is made again.
    cp.kubectl("delete", "pod", "hog", "-n", ns, "--grace-period=0", "--force")
    time.sleep(4)  # a few resyncs of 1 s
    obj = get(cp, "-n", ns, "sdd", "auto")
    assert obj["status"]["warmup"]["jobName"] == job_name
    assert [j["metadata"]["name"] for j in get(cp, "-n", ns, "jobs")["items"] if
            j["metadata"]["name"].startswith("auto-")] == [job_name]  # fmt: skip


def test_an_explicit_count_falls_back_to_what_fits(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str, pools: Any
) -> None:
    cp, ns = control_plane, module_namespace
    obj = started(cp, ns, "fits", _pooled(ns, "fits", f"{ns}-small", 4))
    job = get(cp, "-n", ns, "job", obj["status"]["warmup"]["jobName"])
    assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (2, 2)
    (reduced,) = _events(cp, ns, "fits", "ShardsReduced")
    assert reduced["type"] == "Warning"
    assert (
        f"spec.warmup.shards 4: 2 of 4 shards, the most that fit (2 free habana.ai/gaudi cards "
        f"on {pools['small']}, 1 per shard)"
    ) in reduced["message"]


def test_auto_is_accepted_and_a_bad_word_refused_naming_the_field(
    control_plane: ControlPlane, module_namespace: str
) -> None:
    cp, ns = control_plane, module_namespace
    ok = cp.kubectl(
        "apply", "--dry-run=server", "-f", "-", stdin=json.dumps(_sharded(ns, "ok", "auto"))
    )
    assert ok.returncode == 0
    bad = cp.kubectl(
        "apply", "--dry-run=server", "-f", "-", stdin=json.dumps(_sharded(ns, "bad", "all")),
        check=False,
    )  # fmt: skip
    assert bad.returncode != 0
    assert "spec.warmup.shards" in bad.stderr
