"""The tier's SpecDecodeDeployment for the tiny model, and the runner plan the operator builds.

The plan is the operator's own (``desired_children(...).runner_plan``: flags, probe, drafter
sweep, hook), with only what a local run must change: the engine command is the engine venv's
``vllm serve``, the model and draft are the folders models.py made, the port is a free one,
and the volume, work and report paths are under the test's folder. Everything else (limits,
KV blocks, speculative config, timeouts scaled for a loaded 2-core machine) is as planned.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from realengine import engine
from support.resource_cases import SETTINGS, planned

from warmgate.api import SpecDecodeDeployment, parse_manifest
from warmgate.resources import desired_children

# The tiny engine's limits: 4 sequences of at most 512 tokens, 256 tokens a step, 128-token
# blocks (vllm-gaudi's default; the CPU backend takes 64 too), 512 KV blocks pinned.
LIMITS = {
    "maxModelLen": 512,
    "maxNumSeqs": 4,
    "maxNumBatchedTokens": 256,
    "blockSize": 128,
    "numGpuBlocks": 512,
}
DRAFTS = {"eagle": "eagle", "eagle3": "eagle3"}  # method -> models.py folder


def tiny_sdd(
    method: str = "eagle3",
    k: int = 2,
    *,
    prefix_caching: bool | None = None,
    accept: bool = True,
    probe: bool = True,
    block: int = 128,
) -> SpecDecodeDeployment:
    """The tiny model's SDD: the CPU engine accepted (unless ``accept`` is false); ``probe``
    false leaves the runner only the drafter sweep (spec.warmup.probeWorkload)."""
    speculative: dict[str, Any] = {"method": method, "numSpeculativeTokens": k}
    if method in DRAFTS:
        speculative["draftModel"] = {"name": f"warmgate-test/tiny-{method}"}
    # -O0: no torch.compile, whose CPU graphs take minutes to build here and verify nothing
    # warmgate asks of the engine (a user's extraArgs, passed as the operator passes them).
    engine_spec: dict[str, Any] = {**LIMITS, "acceptCPUEngine": accept, "extraArgs": ["-O0"]}
    engine_spec["blockSize"] = block
    if prefix_caching is not None:
        engine_spec["enablePrefixCaching"] = prefix_caching
    doc = {
        "apiVersion": "warmgate.dev/v1alpha1",
        "kind": "SpecDecodeDeployment",
        "metadata": {"name": f"tiny-{method}", "namespace": "tier", "uid": "uid-tiny"},
        "spec": {
            "model": {"name": "warmgate-test/tiny-llama", "vocabSize": 512, "parameters": "1M"},
            "image": "localhost/warmgate-vllm-cpu:test",
            "device": "gaudi2",
            "engine": engine_spec,
            "speculative": speculative,
            "warmup": {"probeWorkload": probe},
        },
    }
    return parse_manifest(doc)


def operator_plan(sdd: SpecDecodeDeployment) -> dict[str, Any]:
    """The runner plan the operator writes into the warmup ConfigMap for ``sdd``."""
    children = desired_children(sdd, planned(sdd), SETTINGS)
    doc = json.loads(children.warmup_configmap["data"]["plan.json"])
    assert doc == json.loads(json.dumps(children.runner_plan))
    return doc


def local_plan(
    doc: dict[str, Any], models: dict[str, Path], tmp: Path, *, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """The operator's plan, pointed at this machine's engine, models and folders."""
    plan = copy.deepcopy(doc)
    eng = plan["engine"]
    eng["command"] = [str(engine.VLLM), "serve"]
    eng["model"] = str(models["target"])
    eng["port"] = engine.free_port()
    spec = eng.get("speculative_config") or {}
    if spec.get("method") in DRAFTS:
        spec["model"] = str(models[DRAFTS[spec["method"]]])
    eng["env"] = {**eng["env"], **(env or {})}
    plan["cache"]["volume_dir"] = str(tmp / "volume")
    plan["cache"]["local_dir"] = str(tmp / "local" / "recipes")
    plan["report"] = {"dir": str(tmp / "volume" / "reports"), "termination_log": str(tmp / "tl")}
    plan["work_dir"] = str(tmp / "work")
    # A loaded 2-core machine: the CPU engine starts in 35 s to 5 min.
    plan["timeouts"] = {
        "total_s": 2700,
        "facts_s": 300,
        "startup_s": 900,
        "probe_s": 900,
        "sweep_s": 900,
        "stop_grace_s": 60,
    }
    return plan
