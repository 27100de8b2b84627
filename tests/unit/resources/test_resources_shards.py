"""The sharded warmup's children (issue 38): the Indexed Job and the slices' plan files."""

from __future__ import annotations

import json
from typing import Any

from support.examples import example_path, example_sdd
from support.resource_cases import SETTINGS, UID, make_case, planned

from warmgate.api import SpecDecodeDeployment
from warmgate.buckets import parse_bucket_file
from warmgate.buckets.shard import max_shards
from warmgate.contract.order import parse_plan
from warmgate.contract.shardspec import shard_key
from warmgate.resources import desired_children

EAGLE3 = "llama31-8b-eagle3-gaudi2"


def _sdd(stem: str, **warmup: Any) -> SpecDecodeDeployment:
    base = make_case(example_path(stem)).sdd
    spec = base.spec.model_copy(update={"warmup": base.spec.warmup.model_copy(update=warmup)})
    return base.model_copy(update={"spec": spec})


def test_one_shard_is_todays_warmup_byte_for_byte() -> None:
    for stem in (EAGLE3, "minimal-ngram", "llama31-8b-seeds"):
        case = make_case(example_path(stem))
        one = _sdd(stem, shards=1)
        default, explicit = (
            desired_children(case.sdd, case.to_run, SETTINGS),
            desired_children(one, planned(one), SETTINGS),
        )
        assert explicit.warmup_job == default.warmup_job
        assert explicit.warmup_configmap == default.warmup_configmap
        assert "shard" not in json.loads(default.warmup_configmap["data"]["plan.json"])
        assert "completionMode" not in default.warmup_job["spec"]


def test_four_shards_make_an_indexed_job_of_four_pods_on_one_node() -> None:
    sdd = _sdd(EAGLE3, shards=4)
    children = desired_children(sdd, planned(sdd), SETTINGS)
    job = children.warmup_job
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 4, 4)
    pod = spec["template"]["spec"]
    assert "--shards /etc/warmgate" in pod["containers"][0]["command"][2]
    # Each Pod requests the engine's cards (TP 1 here), as the unsharded Pod does.
    assert pod["containers"][0]["resources"]["limits"]["habana.ai/gaudi"] == "1"
    term = pod["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][-1]
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == {
        "batch.kubernetes.io/job-name": job["metadata"]["name"]
    }
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    # The user's own placement stays (nodeSelector of the example).
    assert pod["nodeSelector"] == {"habana.ai/gaudi.generation": "gaudi2"}
    # Pod 0 runs its slice and then the merge: twice the attempt's deadline.
    assert pod["activeDeadlineSeconds"] == 2 * sdd.spec.warmup.timeout_seconds
    unsharded = desired_children(make_case(example_path(EAGLE3)).sdd, planned(sdd), SETTINGS)
    assert job["metadata"]["name"] != unsharded.warmup_job["metadata"]["name"]


def test_the_slices_partition_the_plan_and_the_merge_runs_the_whole_plan() -> None:
    sdd = _sdd(EAGLE3, shards=4)
    bundle = planned(sdd)
    children = desired_children(sdd, bundle, SETTINGS)
    data = children.warmup_configmap["data"]
    assert sorted(data) == ["plan.json", *(f"shard-{i}.json" for i in range(4))]
    merge = parse_plan(json.loads(data["plan.json"]))
    whole = parse_plan(
        json.loads(
            desired_children(
                make_case(example_path(EAGLE3)).sdd, bundle, SETTINGS
            ).warmup_configmap["data"]["plan.json"]
        )
    )
    assert merge.shard is not None
    assert (merge.shard.role, merge.shard.count) == ("merge", 4)
    assert merge.buckets == whole.buckets
    assert merge.drafter_sweep == whole.drafter_sweep
    slices = [parse_plan(json.loads(data[f"shard-{i}.json"])) for i in range(4)]
    plan = bundle.buckets
    prompt = sorted(b for s in slices for b in _lines(s.buckets.seed_file_text, prompt=True))
    decode = sorted(b for s in slices for b in _lines(s.buckets.seed_file_text, prompt=False))
    assert prompt == plan.prompt_buckets
    assert decode == plan.seed_decode_buckets
    shapes = sorted(g for s in slices if s.drafter_warmup for g in s.drafter_warmup.shapes)
    assert bundle.drafter_warmup is not None
    assert shapes == sorted(bundle.drafter_warmup.shapes)
    for i, s in enumerate(slices):
        assert s.shard is not None
        assert (s.shard.role, s.shard.index, s.shard.count) == ("slice", i, 4)
        assert s.cache.key == shard_key(children.cache_key, i, 4)
        assert (s.cache.retain, s.cache.users, s.drafter_sweep) == (0, None, None)
        assert not s.drafter_hook.required


def _lines(text: str, *, prompt: bool) -> list[tuple[int, int, int]]:
    parsed = parse_bucket_file(text)
    return list(parsed.prompt if prompt else parsed.decode)


def _with_claim(stem: str, **warmup: Any) -> SpecDecodeDeployment:
    """The example with the eagle3 example's recipe-cache claim (the slices share it)."""
    return _sdd(stem, cache=example_sdd(EAGLE3).spec.warmup.cache, **warmup)


def test_every_pod_mounts_every_slices_plan_file() -> None:
    """The Pods read shard-<i>.json beside plan.json (--shards /etc/warmgate): the plan volume
    projects every file of the ConfigMap. (It once projected plan.json only: every Pod of the
    local node's scenario v ended plan_invalid, "cannot read plan /etc/warmgate/shard-3.json".)"""
    sdd = _sdd(EAGLE3, shards=4)
    children = desired_children(sdd, planned(sdd), SETTINGS)
    name = children.warmup_configmap["metadata"]["name"]
    (volume,) = [
        v
        for v in children.warmup_job["spec"]["template"]["spec"]["volumes"]
        if (v.get("configMap") or {}).get("name") == name
    ]
    keys = sorted(item["key"] for item in volume["configMap"]["items"])
    assert keys == sorted(children.warmup_configmap["data"]) == [
        "plan.json", *(f"shard-{i}.json" for i in range(4))
    ]  # fmt: skip
    assert all(item["path"] == item["key"] for item in volume["configMap"]["items"])


def test_shards_are_capped_at_what_the_plan_allows() -> None:
    sdd = _with_claim("llama31-8b-seeds", shards=8)
    bundle = planned(sdd)
    job = desired_children(sdd, bundle, SETTINGS).warmup_job
    assert max_shards(bundle.buckets) == 7
    assert job["spec"]["completions"] == 7


def test_uid_is_the_cases() -> None:  # keeps the helper honest: the server identity is set
    assert _sdd(EAGLE3).metadata.uid == UID
    assert example_sdd(EAGLE3).spec.warmup.shards == 1
