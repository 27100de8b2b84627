"""engine_shape_config: the one mapping from a spec to the planner's EngineShapeConfig."""

from __future__ import annotations

from typing import Any

import pytest
from support.bad_manifests import base_manifest, merge_patch
from support.paths import EXAMPLES

from warmgate.api import engine_shape_config, load_manifest, parse_manifest
from warmgate.buckets import EngineShapeConfig, plan_buckets


def _config(spec_patch: dict[str, Any], **kwargs: Any) -> EngineShapeConfig:
    sdd = parse_manifest(merge_patch(base_manifest(), {"spec": spec_patch}))
    return engine_shape_config(sdd, **kwargs)


def test_engine_fields_map_one_to_one() -> None:
    config = _config(
        {"engine": {"blockSize": 256, "numGpuBlocks": 3000, "profile": "main-2026-08"}}
    )
    assert config.max_num_seqs == 128
    assert config.max_model_len == 8192
    assert config.max_num_batched_tokens == 8192
    assert config.block_size == 256
    assert config.num_gpu_blocks == 3000
    assert config.num_speculative_tokens == 2
    assert config.profile == "main-2026-08"
    assert (config.strategy, config.contiguous_pa, config.merged_prefill) == ("exp", False, False)
    assert config.overrides is None
    assert config.bucket_file is None


def test_measured_blocks_fill_in_only_when_the_spec_does_not_pin_them() -> None:
    assert _config({}, num_gpu_blocks=5000).num_gpu_blocks == 5000
    pinned = _config({"engine": {"numGpuBlocks": 3000}}, num_gpu_blocks=5000)
    assert pinned.num_gpu_blocks == 3000


def test_exp_keeps_its_three_honoured_range_fields() -> None:
    config = _config({"buckets": {"prompt": {"bs": {"max": 4}, "ctx": {"max": 16}}}})
    assert (config.prompt_bs_max, config.prompt_ctx_bucket_max) == (4, 16)
    assert config.overrides is None
    query_one = _config({"buckets": {"prompt": {"query": {"min": 1}}}})
    assert query_one.query_min_env == 1


def test_lin_ranges_become_bucket_overrides() -> None:
    buckets = {
        "strategy": "pad",
        "prompt": {"query": {"min": 128, "step": 256, "max": 2048, "padPercent": 25}},
        "decode": {"bs": {"step": 8}, "block": {"min": 128, "padMax": 512}},
    }
    config = _config({"buckets": buckets})
    assert config.strategy == "pad"
    overrides = config.overrides
    assert overrides is not None
    assert (overrides.prompt_query_min, overrides.prompt_query_step) == (128, 256)
    assert (overrides.prompt_query_max, overrides.prompt_query_pad_percent) == (2048, 25)
    assert overrides.decode_bs_step == 8
    assert (overrides.decode_block_min, overrides.decode_block_pad_max) == (128, 512)
    assert overrides.decode_bs_min is None


def test_seeds_become_the_bucket_file() -> None:
    seeds = {"prompt": [[1, 128, 0], [2, 256, 4]], "decode": [[1, 1, 32], [8, 1, 256]]}
    config = _config({"buckets": {"seeds": seeds}})
    assert config.bucket_file == "(1, 128, 0)\n(2, 256, 4)\n(1, 1, 32)\n(8, 1, 256)\n"


def test_a_bare_spec_maps_like_the_whole_object() -> None:
    sdd = load_manifest(EXAMPLES[0])
    assert engine_shape_config(sdd.spec) == engine_shape_config(sdd)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_maps_and_plans(path: Any) -> None:
    config = engine_shape_config(load_manifest(path), num_gpu_blocks=4096)
    plan = plan_buckets(config)
    assert plan.prompt_buckets
    assert len(plan.decode_buckets) > len(plan.seed_decode_buckets)  # k >= 1 expands
    assert not plan.omitted_prompt  # the examples fit the engine
    assert not plan.omitted_decode


def test_container_resources_default_the_gaudi_cards_to_the_tp_size() -> None:
    from warmgate.api import Resources, container_resources

    assert container_resources(None, 4) == {"limits": {"habana.ai/gaudi": "4"}}
    numbers = Resources(requests={"cpu": 8}, limits={"habana.ai/gaudi": 2})
    assert container_resources(numbers, 2) == {  # quantities serialize as strings
        "requests": {"cpu": "8"},
        "limits": {"habana.ai/gaudi": "2"},
    }
    written = Resources(requests={"cpu": "8"}, limits={"habana.ai/gaudi": "2", "memory": "64Gi"})
    assert container_resources(written, 2) == {
        "requests": {"cpu": "8"},
        "limits": {"habana.ai/gaudi": "2", "memory": "64Gi"},
    }
