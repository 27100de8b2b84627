"""The command-line contract: vLLM's own `vllm serve` parser reads every command warmgate builds.

Each example's warmup command (the runner plan's engine section, as the runner assembles it) and
serving command (the Deployment's container command), plus one SpecDecodeDeployment per
speculative method, are parsed by the pinned vLLM's parser (cli_contract.py, under the engine's
Python) into EngineArgs, and each value must be the one the spec asked for. Every flag warmgate
passes, reserves or refuses must exist in that parser under exactly its name (argparse would
otherwise accept an abbreviation), and every logging variable the runner sets must be one vLLM
reads: a vLLM that renames any of them fails here instead of in a warmup.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from realengine import engine
from realengine.conftest import record
from support.resource_cases import EXAMPLES, Case, make_case, planned

from warmgate.api import SpecDecodeDeployment
from warmgate.api.vllm_spec import REFUSED_ARGS, RESERVED_ARGS
from warmgate.buckets.engine.config import ENGINE_CLI_CHECKED
from warmgate.contract.order import _REFUSED_ARGS, parse_plan
from warmgate.resources.vllm_engine import model_argument, speculative_config
from warmgate.warmup.engine.launch import LOGGING_ENV, LOGGING_ENV_REMOVED, engine_command

SCRIPT = Path(__file__).with_name("cli_contract.py")
# Serving pins the KV block count the warmup measured when the spec does not: any count will do.
MEASURED_KV = 4321
# The flags engine_command (warmgate.warmup.engine) writes itself, and those engine_args
# (warmgate.resources.vllm_engine) writes from typed fields.
PINNED = (
    "--host",
    "--port",
    "--served-model-name",
    "--tensor-parallel-size",
    "--max-model-len",
    "--speculative-config",
    "--num-gpu-blocks-override",
)
TYPED = (
    "--revision",
    "--dtype",
    "--max-num-seqs",
    "--max-num-batched-tokens",
    "--block-size",
    "--gpu-memory-utilization",
    "--enable-prefix-caching",
    "--no-enable-prefix-caching",
)


def method_variants() -> list[Case]:
    """The minimal example once per speculative method, with a draft model where one is needed
    (and a draft tensor-parallel size), prefix caching on or off, and the n-gram window."""
    base = make_case(next(p for p in EXAMPLES if p.stem == "minimal-ngram"))
    raw = base.sdd.model_dump(by_alias=True, exclude_none=True, mode="json")
    specs: dict[str, dict[str, Any]] = {
        "eagle": {"draftModel": {"name": "org/eagle-head", "revision": "r1"}},
        "eagle3": {"draftModel": {"name": "org/eagle3-head", "tensorParallelSize": 1}},
        "mtp": {},
        "ngram": {"ngram": {"promptLookupMin": 2, "promptLookupMax": 5}},
    }
    cases = []
    for method, extra in specs.items():
        doc = json.loads(json.dumps(raw))
        doc["spec"]["speculative"] = {"method": method, "numSpeculativeTokens": 3, **extra}
        doc["spec"]["engine"]["enablePrefixCaching"] = method != "eagle"
        sdd = SpecDecodeDeployment.model_validate(doc)
        cases.append(Case(f"method-{method}", sdd, planned(sdd)))
    return cases


def commands(case: Case) -> dict[str, list[str]]:
    """The warmup and serving argv of one case, without the leading `vllm serve`."""
    children = case.children(kv_blocks=MEASURED_KV)
    plan = parse_plan(json.loads(children.warmup_configmap["data"]["plan.json"]))
    warmup = engine_command(plan.engine)
    container = children.serving_deployment["spec"]["template"]["spec"]["containers"][0]
    serving = container["command"][4:]  # ["/bin/sh", "-c", SERVE_COMMAND, "sh", *argv]
    for argv in (warmup, serving):
        assert argv[:2] == ["vllm", "serve"], argv
    return {f"{case.name}/warmup": warmup[2:], f"{case.name}/serving": serving[2:]}


def intended(case: Case, role: str) -> dict[str, Any]:
    """What the spec asks vLLM for: the values each parsed command must hold."""
    sdd, e = case.sdd, case.sdd.spec.engine
    kv = case.plan.config.num_gpu_blocks
    return {
        "model": model_argument(sdd),
        "served_model_name": [sdd.spec.model.name],
        "revision": None if sdd.spec.model.weights else sdd.spec.model.revision,
        "tensor_parallel_size": e.tensor_parallel_size,
        "dtype": e.dtype,
        "max_model_len": e.max_model_len,
        "max_num_seqs": e.max_num_seqs,
        "max_num_batched_tokens": e.max_num_batched_tokens,
        "block_size": e.block_size,
        "num_gpu_blocks_override": kv if kv is not None or role == "warmup" else MEASURED_KV,
        "gpu_memory_utilization": e.gpu_memory_utilization,
        "enable_prefix_caching": e.enable_prefix_caching,
        "speculative_config": speculative_config(sdd),
        "enforce_eager": False,
        "host": "127.0.0.1" if role == "warmup" else "0.0.0.0",
        "port": sdd.spec.serving.port,
    }


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    """Every example and one case per speculative method."""
    return [make_case(p) for p in EXAMPLES] + method_variants()


# The controls: a flag and a variable vLLM does not have, so the checks below can fail.
RENAMED_FLAG = "--max-model-length-renamed"
UNKNOWN_ENV = "VLLM_NO_SUCH_VARIABLE"


@pytest.fixture(scope="module")
def parsed(engine_installed: None, cases: list[Case]) -> dict[str, Any]:
    """vLLM's answer for every command, flag and variable (one engine-Python process)."""
    commands_ = {k: v for c in cases for k, v in commands(c).items()}
    commands_["control/renamed"] = [*commands_[f"{cases[0].name}/warmup"], RENAMED_FLAG, "1"]
    request = {"commands": commands_, "env": [*sorted(runner_env()), UNKNOWN_ENV]}
    # Offline mode makes EngineArgs resolve hub ids to local folders (absent here); the script
    # refuses every connection instead (cli_contract.no_network).
    began = time.monotonic()
    answer = engine.engine_python(SCRIPT.read_text(), request, env={"HF_HUB_OFFLINE": "0"})
    record(f"cli_contract.py: {len(commands_)} commands parsed by vLLM", time.monotonic() - began)
    assert isinstance(answer, dict)
    return answer


def runner_env() -> set[str]:
    """The vLLM variables the runner sets or removes (NO_COLOR is not vLLM's own)."""
    return {*LOGGING_ENV, *LOGGING_ENV_REMOVED} - {"NO_COLOR"}


def test_the_contract_ran_against_the_pinned_engine(parsed: dict[str, Any]) -> None:
    assert parsed["vllm"] == parsed["dist"] == engine.VLLM_VERSION
    # docs/buckets.md and warmgate/buckets/config.py name the version the contract checked
    assert engine.VLLM_VERSION in ENGINE_CLI_CHECKED
    docs = (engine.REPO / "docs" / "buckets.md").read_text()
    assert f"vLLM {engine.VLLM_VERSION}" in docs


def test_every_command_parses_to_the_intended_values(
    parsed: dict[str, Any], cases: list[Case]
) -> None:
    methods = set()
    for case in cases:
        for role in ("warmup", "serving"):
            got = parsed["commands"][f"{case.name}/{role}"]
            assert "error" not in got, f"{case.name}/{role}: {got}"
            assert got == intended(case, role), f"{case.name}/{role}"
            methods.add(got["speculative_config"]["method"])
    assert methods == {"eagle", "eagle3", "mtp", "ngram"}


def test_every_flag_warmgate_passes_reserves_or_refuses_exists(parsed: dict[str, Any]) -> None:
    options = set(parsed["options"])
    flags = {*PINNED, *TYPED, *RESERVED_ARGS, *REFUSED_ARGS, *_REFUSED_ARGS}
    assert len(options) > 100  # the whole serve parser, not an empty one
    assert sorted(flags - options) == []


def test_every_logging_variable_the_runner_sets_is_read_by_vllm(parsed: dict[str, Any]) -> None:
    assert parsed["env_known"] == sorted(runner_env())  # and not UNKNOWN_ENV


def test_a_renamed_flag_would_fail_the_contract(parsed: dict[str, Any]) -> None:
    assert "unrecognized arguments" in parsed["commands"]["control/renamed"]["error"]
    assert RENAMED_FLAG not in parsed["options"]
