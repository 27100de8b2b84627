"""The recipe-cache key changes with every input that invalidates recipes, and only with those."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from support.resource_cases import EXAMPLES

from warmgate.api import SpecDecodeDeployment, parse_manifest
from warmgate.buckets import BucketPlan
from warmgate.contract.order import KEY_RE
from warmgate.reconcile.planning.evaluate import evaluate
from warmgate.resources import cache_key

BASE = next(p for p in EXAMPLES if p.stem == "llama31-8b-eagle3-gaudi2")


def _key(**patch: Any) -> str:
    """The key of the eagle3 example with `spec` fields merged in (one level deep)."""
    sdd, plan = _planned(patch)
    return cache_key(sdd, plan)


def _planned(patch: dict[str, Any]) -> tuple[SpecDecodeDeployment, BucketPlan]:
    doc = yaml.safe_load(BASE.read_text())
    for section, value in patch.items():
        if isinstance(value, dict):
            doc["spec"].setdefault(section, {}).update(value)
        else:
            doc["spec"][section] = value
    sdd = parse_manifest(doc)
    plan = evaluate(sdd).plan
    assert plan is not None
    return sdd, plan


def test_the_key_is_stable_and_a_valid_runner_key() -> None:
    key = _key()
    assert key == _key()
    assert KEY_RE.match(key)
    assert key.startswith("gaudi2-tp1-")
    assert len(key) <= 128  # status.warmup.cacheKey


@pytest.mark.parametrize(
    "patch",
    [
        {"image": "registry.example.com/ml/vllm-gaudi:v0.27.0"},
        {"device": "gaudi3"},
        {"engine": {"tensorParallelSize": 2}},
        {"engine": {"dtype": "float32"}},
        {"engine": {"profile": "main-2026-08"}},
        {"engine": {"numGpuBlocks": 9000}},
        {"engine": {"acceptCPUEngine": True}},
        {"engine": {"maxNumSeqs": 64}},
        {"engine": {"extraArgs": ["--kv-cache-dtype=fp8_inc"]}},
        {"engine": {"env": [{"name": "PT_HPU_LAZY_MODE", "value": "1"}]}},
        {"speculative": {"numSpeculativeTokens": 3}},
        {"speculative": {"draftModel": {"name": "other/eagle3-head"}}},
        {"model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "revision": "abc123"}},
        {"buckets": {"mergedPrefill": True}},
    ],
    ids=lambda p: next(iter(p)) + ":" + str(next(iter(p.values())))[:40],
)
def test_what_invalidates_recipes_changes_the_key(patch: dict[str, Any]) -> None:
    assert _key(**patch) != _key()


@pytest.mark.parametrize(
    "patch",
    [
        {"serving": {"replicas": 5, "port": 9000, "serviceType": "NodePort"}},
        {"warmup": {"timeoutSeconds": 7200, "retries": 0, "probeWorkload": False}},
        {"warmup": {"placement": {"nodeSelector": {"pool": "gaudi"}}}},
        {"model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "tokenSecretRef": {"name": "x"}}},
    ],
    ids=lambda p: next(iter(p)),
)
def test_what_changes_no_graph_keeps_the_key(patch: dict[str, Any]) -> None:
    base = yaml.safe_load(BASE.read_text())["spec"]["model"]
    if "model" in patch:
        patch["model"] = {**base, **patch["model"]}
    assert _key(**patch) == _key()


def test_the_cpu_opt_in_off_leaves_every_key_as_it_was() -> None:
    """acceptCPUEngine false is the default: no key (and no warmed plan) changes with it."""
    assert _key(engine={"acceptCPUEngine": False}) == _key()
