"""The pydantic models: defaults, aliases, strictness, loading manifests and their errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from support.api_models import all_models
from support.bad_manifests import base_manifest, merge_patch
from support.paths import EXAMPLES

from warmgate.api import (
    ManifestError,
    SpecDecodeDeployment,
    SpecDecodeDeploymentSpec,
    load_manifest,
    parse_manifest,
)
from warmgate.api.constants import API_VERSION, KIND


def _spec(**patch: Any) -> SpecDecodeDeploymentSpec:
    return parse_manifest(merge_patch(base_manifest(), {"spec": patch})).spec


def test_defaults_match_the_engine_and_the_docs() -> None:
    spec = _spec()
    assert spec.engine.tensor_parallel_size == 1
    assert spec.engine.block_size == 128  # vllm_gaudi/platform.py forces 128 unless set
    assert spec.engine.max_num_seqs == 128  # from base.yaml
    assert spec.engine.num_gpu_blocks is None
    assert spec.engine.profile == "v0.26.0"
    assert spec.buckets.strategy == "exp"  # VLLM_BUCKETING_STRATEGY default
    assert spec.buckets.contiguous_pa is False  # VLLM_CONTIGUOUS_PA unset -> false
    assert spec.buckets.coverage.complete is True
    assert spec.buckets.coverage.max_extra_buckets == 64
    assert spec.warmup.timeout_seconds == 3600
    assert spec.warmup.cache.max_size_mb == 8192
    assert spec.serving.replicas == 1
    assert spec.serving.port == 8000
    assert spec.model.revision == "main"


def test_engine_defaults_without_overrides() -> None:
    data = base_manifest()
    del data["spec"]["engine"]["maxNumSeqs"], data["spec"]["engine"]["maxNumBatchedTokens"]
    engine = parse_manifest(data).spec.engine
    assert (engine.max_num_seqs, engine.max_num_batched_tokens) == (256, 2048)


def test_dump_uses_camel_case_and_omits_unset_fields() -> None:
    dumped = _spec().model_dump(mode="json", by_alias=True, exclude_none=True)
    assert dumped["engine"]["maxModelLen"] == 8192
    assert dumped["buckets"]["contiguousPA"] is False
    assert dumped["warmup"]["cache"]["maxSizeMB"] == 8192
    assert "numGpuBlocks" not in dumped["engine"]


def test_round_trip_is_lossless() -> None:
    for path in EXAMPLES:
        sdd = load_manifest(path)
        assert parse_manifest(sdd.to_dict()) == sdd


def test_snake_case_names_are_accepted_in_python() -> None:
    spec = _spec(engine={"maxModelLen": 4096})
    again = spec.model_copy(update={"image": "x"})
    assert again.engine.max_model_len == 4096


@pytest.mark.parametrize(
    ("patch", "needle"),
    [
        (
            {"engine": {"maxNumSeqs": "8"}},
            "spec.engine.maxNumSeqs: Input should be a valid integer",
        ),
        ({"buckets": {"mergedPrefill": "yes"}}, "spec.buckets.mergedPrefill"),
        ({"engine": {"maxModelLength": 1}}, "spec.engine.maxModelLength: Extra inputs"),
    ],
)
def test_strict_types_and_unknown_fields_are_refused(patch: dict[str, Any], needle: str) -> None:
    with pytest.raises(ManifestError, match="invalid SpecDecodeDeployment") as info:
        parse_manifest(merge_patch(base_manifest(), {"spec": patch}))
    assert needle in str(info.value)


def test_load_manifest_reads_paths_text_and_multi_document_files(tmp_path: Path) -> None:
    text = EXAMPLES[0].read_text(encoding="utf-8")
    assert load_manifest(EXAMPLES[0]) == load_manifest(str(EXAMPLES[0])) == load_manifest(text)
    other = yaml.safe_dump({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
    bundle = tmp_path / "bundle.yaml"
    bundle.write_text(other + "---\n" + text, encoding="utf-8")
    assert load_manifest(bundle) == load_manifest(text)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("spec: [unclosed", "not valid YAML"),
        ("kind: Namespace\n---\nkind: Secret\n", "expected exactly one SpecDecodeDeployment"),
        ("apiVersion: warmgate.dev/v1\nkind: SpecDecodeDeployment\nspec: {}\n", "apiVersion"),
        (f"apiVersion: {API_VERSION}\nkind: {KIND}\nspec: {{}}\n", "spec.model: Field required"),
    ],
)
def test_load_manifest_errors_name_the_problem(text: str, needle: str) -> None:
    with pytest.raises(ManifestError) as info:
        load_manifest(text)
    assert needle in str(info.value)


def test_every_error_is_listed_on_its_own_line() -> None:
    data = merge_patch(base_manifest(), {"spec": {"device": "tpu", "serving": {"port": 0}}})
    with pytest.raises(ManifestError) as info:
        parse_manifest(data)
    lines = str(info.value).splitlines()
    assert lines[0] == "invalid SpecDecodeDeployment:"
    assert any(line.startswith("spec.device: ") for line in lines)
    assert any(line.startswith("spec.serving.port: ") for line in lines)


def test_status_round_trips_with_server_timestamps() -> None:
    data = base_manifest()
    data["status"] = {
        "observedGeneration": 3,
        "phase": "Ready",
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "ReplicasReady",
                "message": "2/2 replicas ready",
                "lastTransitionTime": "2026-11-29T10:00:00Z",
                "observedGeneration": 3,
            }
        ],
        "plan": {"hash": "abc", "totalBuckets": 145, "uncoveredShapes": []},
        "serving": {"replicas": 2, "readyReplicas": 2, "selector": "a=b"},
    }
    sdd = SpecDecodeDeployment.model_validate(data)
    assert sdd.to_dict()["status"] == data["status"]


def test_every_field_has_a_description() -> None:
    for model in all_models(SpecDecodeDeployment):
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"
