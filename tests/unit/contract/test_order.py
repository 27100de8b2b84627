"""The warmup order (plan.json): clear validation errors, version refusal, digests the operator
reproduces."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from runner_harness import make_plan
from support.engines import CONFIG_A

from warmgate.buckets import EngineShapeConfig, plan_buckets
from warmgate.contract.drafterwarm import make_spec
from warmgate.contract.engine import LOGGING_ENV
from warmgate.contract.order import (
    RUNNER_OWNED_ENV,
    PlanError,
    bucket_digest,
    load_plan,
    parse_plan,
)
from warmgate.warmup.engine.launch import engine_argv, engine_env


@pytest.fixture
def raw(tmp_path: Path) -> dict[str, Any]:
    return make_plan(tmp_path)


def problems(doc: object) -> list[str]:
    with pytest.raises(PlanError) as caught:
        parse_plan(doc)
    return caught.value.problems


def test_valid_plan_parses_with_defaults(raw: dict[str, Any]) -> None:
    plan = parse_plan(raw)
    assert plan.engine.tensor_parallel_size == 1
    assert plan.engine.served_model_name == "standin/model"
    assert plan.cache.size_mb == 8192
    assert plan.report_dir == Path(raw["cache"]["volume_dir"]) / "reports"
    assert [s.token_pattern for s in plan.probe.steps] == ["varied", "varied", "repeat"]
    assert plan.plan_hash.startswith("sha256:")


def test_plan_hash_ignores_key_order(raw: dict[str, Any]) -> None:
    reordered = json.loads(json.dumps(raw, sort_keys=True))
    assert parse_plan(reordered).plan_hash == parse_plan(raw).plan_hash


@pytest.mark.parametrize("version", [0, 2, "1", None])
def test_unknown_format_version_is_refused_first(raw: dict[str, Any], version: object) -> None:
    raw["format_version"] = version
    raw["engine"] = "garbage"  # not reported: the version check comes first
    (only,) = problems(raw)
    assert "this runner reads format 1" in only


def test_every_problem_is_reported_with_its_path(raw: dict[str, Any]) -> None:
    raw["engine"]["port"] = "8000"
    raw["engine"]["surprise"] = 1
    raw["cache"]["key"] = "../up"
    del raw["plan_id"]
    raw["probe"]["steps"][0]["concurrency"] = 0
    found = problems(raw)
    assert "plan.engine.port: expected an integer, got '8000'" in found
    assert "plan.engine.surprise: unknown field" in found
    assert any(p.startswith("plan.cache.key: '../up' must match") for p in found)
    assert "plan.plan_id: required" in found
    assert "plan.probe.steps[0].concurrency: expected a value in [1, 1024], got 0" in found


@pytest.mark.parametrize("name", RUNNER_OWNED_ENV)
def test_runner_owned_env_is_refused(raw: dict[str, Any], name: str) -> None:
    raw["engine"]["env"][name] = "WARNING"
    (only,) = problems(raw)
    assert only == f"plan.engine.env.{name}: set by the runner; remove it from engine.env"


@pytest.mark.parametrize("flag", ["--enforce-eager", "--enforce_eager"])
def test_enforce_eager_is_refused(raw: dict[str, Any], flag: str) -> None:
    raw["engine"]["args"].append(flag)
    (only,) = problems(raw)
    assert only == (
        f"plan.engine.args: {flag} skips graph warmup, so nothing would be warmed; remove it"
    )


def test_probe_must_stay_bounded(raw: dict[str, Any]) -> None:
    raw["probe"]["max_requests"] = 10
    raw["probe"]["steps"][1]["prompt_tokens"] = 4095
    found = problems(raw)
    assert "plan.probe.steps: 20 requests in all exceed max_requests 10" in found
    assert (
        "plan.probe.steps[1].prompt_tokens + max_tokens exceed engine.max_model_len 4096" in found
    )


def test_bad_digest_format(raw: dict[str, Any]) -> None:
    raw["buckets"]["expected"]["prompt"]["digest"] = "md5:abc"
    assert any("digest: expected 'sha256:'" in p for p in problems(raw))


def test_load_plan_reports_unreadable_and_invalid_json(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="cannot read plan"):
        load_plan(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(PlanError, match="is not valid JSON"):
        load_plan(tmp_path / "bad.json")


def test_digest_is_sha256_of_compact_sorted_json() -> None:
    rows = [(1, 128, 0), (1, 1, 1)]
    expected = hashlib.sha256(b"[[1,1,1],[1,128,0]]").hexdigest()
    assert bucket_digest(rows) == "sha256:" + expected
    assert bucket_digest([list(r) for r in reversed(rows)]) == bucket_digest(rows)


def test_digest_matches_warmgate_buckets_lists_and_doc_counts() -> None:
    config = EngineShapeConfig(**CONFIG_A, num_gpu_blocks=8192, num_speculative_tokens=1)
    plan = plan_buckets(config)
    assert (len(plan.prompt_buckets), len(plan.decode_buckets)) == (63, 105)  # §6 config A
    assert bucket_digest(plan.decode_buckets) == bucket_digest(sorted(plan.decode_buckets))
    assert bucket_digest(plan.seed_decode_buckets) != bucket_digest(plan.decode_buckets)


def test_engine_command_line_and_environment(
    raw: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The image's own ENV may set vLLM's logging; the runner's settings win (defect 4).
    monkeypatch.setenv("VLLM_LOGGING_LEVEL", "WARNING")
    monkeypatch.setenv("VLLM_CONFIGURE_LOGGING", "0")
    monkeypatch.setenv("VLLM_LOGGING_CONFIG_PATH", "/etc/logging.json")
    monkeypatch.setenv("VLLM_LOGGING_PREFIX", "[svc] ")
    raw["engine"]["env"]["VLLM_DEVELOPER_MODE"] = "1"
    plan = parse_plan(copy.deepcopy(raw))
    argv = engine_argv(plan)
    assert argv[: len(raw["engine"]["command"]) + 1] == [*raw["engine"]["command"], "standin/model"]
    assert argv[argv.index("--port") + 1] == str(raw["engine"]["port"])
    assert json.loads(argv[argv.index("--speculative-config") + 1])["num_speculative_tokens"] == 1
    assert argv[-6:] == raw["engine"]["args"]
    env = engine_env(plan, tmp_path / "seed.txt", reuse_cache=True)
    assert env["VLLM_BUCKETING_FROM_FILE"] == str(tmp_path / "seed.txt")
    assert env["VLLM_SKIP_WARMUP"] == "false"
    assert env["PT_HPU_RECIPE_CACHE_CONFIG"] == f"{plan.cache.local_dir},False,8192"
    assert env["VLLM_DEVELOPER_MODE"] == "1"
    assert {k: env[k] for k in LOGGING_ENV} == {
        "VLLM_CONFIGURE_LOGGING": "1",
        "VLLM_LOGGING_LEVEL": "INFO",
        "VLLM_LOGGING_PREFIX": "",
        "VLLM_LOGGING_STREAM": "ext://sys.stdout",
        "VLLM_LOGGING_COLOR": "0",
        "NO_COLOR": "1",
    }
    assert "VLLM_LOGGING_CONFIG_PATH" not in env


@pytest.mark.parametrize("folder", ["/", "/tmp", "relative/dir"])
def test_local_cache_folder_must_be_safe_to_empty(raw: dict[str, Any], folder: str) -> None:
    raw["cache"]["local_dir"] = folder
    (only,) = problems(raw)
    assert only.startswith("plan.cache.local_dir: expected an absolute path at least two levels")


@pytest.mark.parametrize("name", RUNNER_OWNED_ENV)
def test_the_api_refuses_every_variable_the_runner_owns(name: str) -> None:
    # The plan comes from spec.engine.env; the API must refuse what the runner would refuse.
    from pydantic import ValidationError

    from warmgate.api.vllm_spec import EngineSpec

    with pytest.raises(ValidationError, match="env must not set"):
        EngineSpec.model_validate({"maxModelLen": 4096, "env": [{"name": name, "value": "0"}]})


def test_known_unwarmable_shapes_parse_as_the_engine_logs_them(raw: dict[str, Any]) -> None:
    assert parse_plan(raw).buckets.known_unwarmable == ()
    raw["buckets"]["known_unwarmable"] = [["prompt", 1, 8192, 1], ["decode", 256, 1, 13056]]
    buckets = parse_plan(raw).buckets
    assert buckets.known_unwarmable == (("prompt", 1, 8192, 1), ("decode", 256, 1, 13056))
    assert buckets.known_configs == {"('prompt', 1, 8192, 1)", "('decode', 256, 1, 13056)"}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"prompt": 1}, "plan.buckets.known_unwarmable: expected a list"),
        ([["prompt", 1, 8192]], "plan.buckets.known_unwarmable: expected [phase, batch, query"),
        ([["mixed", 1, 8192, 1]], "plan.buckets.known_unwarmable: expected [phase, batch, query"),
    ],
)
def test_a_malformed_known_unwarmable_shape_is_refused(
    raw: dict[str, Any], value: object, problem: str
) -> None:
    raw["buckets"]["known_unwarmable"] = value
    assert any(p.startswith(problem) for p in problems(raw)), problems(raw)


@pytest.mark.parametrize(
    ("field", "key", "where"),
    [
        ("drafter_warmup", "shapes", "plan.drafter_warmup.shapes"),
        ("drafter_sweep", "assumptions", "plan.drafter_sweep.assumptions"),
    ],
)
def test_the_drafter_documents_report_a_wrong_format_and_a_list_that_is_none(
    raw: dict[str, Any], field: str, key: str, where: str
) -> None:
    """Every document names its format and its lists the same way (known_unwarmable above)."""
    spec = make_spec("eagle3", 2, 128, 4096, [("decode", 2, 1, 8)])
    sweep = {"format": "warmgate-drafter-sweep/1", "method": "eagle3", "k": 2, "request": {}}
    sweep |= {"steps": [], "targets": 0, "undriven": [], "budget_s": 0, "seconds": [0, 0]}
    sweep |= {"arrival_steps": 2, "driven": 0}
    raw[field] = spec.to_json() if field == "drafter_warmup" else sweep
    parse_plan(raw)
    raw[field] = {**raw[field], "format": "other/9", key: {"a": 1}}
    found = problems(raw)
    assert any(p.startswith(f"plan.{field}.format: this runner reads") for p in found), found
    assert f"{where}: expected a list, got {{'a': 1}}" in found, found
