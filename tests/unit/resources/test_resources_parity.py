"""The serving Deployment runs the warmup Job's engine: same argv, same environment, same shapes."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from support.paths import REPO_ROOT
from support.resource_cases import Case

from warmgate.contract.order import parse_plan
from warmgate.resources.mounts import PLAN_DIR
from warmgate.warmup.engine.launch import engine_argv, engine_env

# What legitimately differs: where the runner finds itself, where each process reads the seed
# file (same content), and DELETE=True on the warmup's first fill against DELETE=False on reuse.
_PLACES = {"PYTHONPATH", "VLLM_BUCKETING_FROM_FILE", "PT_HPU_RECIPE_CACHE_CONFIG"}


def _warmup(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[str], dict[str, str], list[dict[str, Any]]]:
    """argv and env the runner gives the engine in the Job's container, and its env refs."""
    children = case.children()
    plan = parse_plan(json.loads(children.warmup_configmap["data"]["plan.json"]))
    job = children.warmup_job
    container = job["spec"]["template"]["spec"]["containers"][0]
    # The runner starts the engine with its own environment (the container's literal values)
    # plus the plan's (warmgate.warmup.engine.launch.engine_env): run exactly that function on it.
    literal = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    monkeypatch.setattr("warmgate.warmup.engine.launch.os.environ", literal)
    env = engine_env(plan, Path(plan.work_dir) / "buckets.txt", reuse_cache=True)
    refs = [e for e in container["env"] if "valueFrom" in e]
    return engine_argv(plan), env, refs


def _serving(case: Case) -> tuple[list[str], dict[str, Any], list[dict[str, Any]]]:
    deployment = case.children().serving_deployment
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    refs = [e for e in container["env"] if "valueFrom" in e]
    # `sh -c SERVE_COMMAND sh <engine argv>`: the engine runs under the runner's serve mode.
    shell, _dash_c, _script, name, *engine = container["command"]
    assert (shell, name) == ("/bin/sh", "sh")
    assert "-m warmgate.warmup --serve" in container["command"][2]
    return engine, env, refs


def _without_host(argv: list[str]) -> list[str]:
    i = argv.index("--host")
    return argv[:i] + argv[i + 2 :]


def test_the_same_command_line_up_to_the_listen_address(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    warm_argv, _, _ = _warmup(case, monkeypatch)
    serve_argv, _, _ = _serving(case)
    assert warm_argv[warm_argv.index("--host") + 1] == "127.0.0.1"
    assert serve_argv[serve_argv.index("--host") + 1] == "0.0.0.0"
    assert _without_host(warm_argv) == _without_host(serve_argv)


def test_the_same_environment_up_to_file_places(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, warm_env, warm_refs = _warmup(case, monkeypatch)
    _, serve_env, serve_refs = _serving(case)
    assert {k: v for k, v in warm_env.items() if k not in _PLACES} == {
        k: v for k, v in serve_env.items() if k not in _PLACES
    }
    assert warm_refs == serve_refs
    warm_cache = warm_env["PT_HPU_RECIPE_CACHE_CONFIG"].split(",")
    serve_cache = serve_env["PT_HPU_RECIPE_CACHE_CONFIG"].split(",")
    assert (warm_cache[0], warm_cache[2]) == (serve_cache[0], serve_cache[2])


def test_the_same_seed_file(case: Case) -> None:
    children = case.children()
    configmap, deployment = children.plan_configmap, children.serving_deployment
    pod = deployment["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "plan")
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    items = volume["configMap"]["items"]
    assert items[0] == {"key": "buckets.txt", "path": "buckets.txt"}
    # Issue 33: with a direct drafter warmup the serving engine reads its document from the same
    # volume (--drafter-warmup): it is mounted exactly when the ConfigMap has it.
    direct = "drafter-warmup.json" in configmap["data"]
    assert items[1:] == ([{"key": "drafter-warmup.json", "path": "drafter-warmup.json"}] * direct)
    command = " ".join(pod["containers"][0]["command"])
    assert (f"--drafter-warmup {PLAN_DIR}/drafter-warmup.json" in command) is direct
    mounts = pod["containers"][0]["volumeMounts"]
    assert {"name": "plan", "mountPath": PLAN_DIR} in [
        {k: m[k] for k in ("name", "mountPath")} for m in mounts
    ]
    assert all(item["key"] in configmap["data"] for item in items)
    plan = json.loads(children.warmup_configmap["data"]["plan.json"])
    assert configmap["data"]["buckets.txt"] == plan["buckets"]["seed_file_text"]


def test_the_engine_gets_the_bucketing_the_planner_assumed(case: Case) -> None:
    _, env, _ = _serving(case)
    cfg = case.plan.config
    assert env["VLLM_CONTIGUOUS_PA"] == str(cfg.contiguous_pa).lower()
    assert env["VLLM_MERGED_PREFILL"] == str(cfg.merged_prefill).lower()
    assert env["VLLM_BUCKETING_STRATEGY"] == cfg.strategy
    assert env["VLLM_SKIP_WARMUP"] == "false"
    for item in case.sdd.spec.engine.env or ():
        if item.value is not None:
            assert env[item.name] == item.value


def test_speculative_config_carries_method_k_and_draft(case: Case) -> None:
    argv, _, _ = _serving(case)
    config = json.loads(argv[argv.index("--speculative-config") + 1])
    spec = case.sdd.spec.speculative
    assert config["method"] == spec.method
    assert config["num_speculative_tokens"] == spec.num_speculative_tokens
    assert config.get("model") == (spec.draft_model.name if spec.draft_model else None)


def test_the_package_imports_neither_kopf_nor_kubernetes() -> None:
    for path in (REPO_ROOT / "warmgate" / "resources").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            for name in names:
                top = name.split(".")[0]
                assert top not in {"kopf", "kubernetes"}, f"{path.name} imports {name}"
                assert not name.startswith("warmgate.runtime"), f"{path.name} imports {name}"
