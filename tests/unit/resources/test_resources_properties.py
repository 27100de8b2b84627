"""Properties over many engine shapes: the runner accepts every plan, names stay valid."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from support.resource_cases import EXAMPLES, SETTINGS, planned

from warmgate.api import parse_manifest
from warmgate.contract.order import parse_plan
from warmgate.reconcile.planning.evaluate import evaluate
from warmgate.resources import desired_children
from warmgate.resources.names import DNS_1035_LABEL, MAX_NAME
from warmgate.warmup.engine.launch import engine_argv

MINIMAL = next(p for p in EXAMPLES if p.stem == "minimal-ngram")


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    """The minimal example with a drawn engine shape, method, k, name and timeout."""
    doc: dict[str, Any] = yaml.safe_load(MINIMAL.read_text())
    mns = draw(st.sampled_from([1, 4, 16, 64, 256]))
    block = draw(st.sampled_from([64, 128]))
    name = draw(st.from_regex(r"[a-z][a-z0-9.-]{0,80}[a-z0-9]", fullmatch=True))
    doc["metadata"] |= {"name": name, "namespace": "ns", "uid": "u-1"}
    doc["spec"]["engine"] = {
        "maxModelLen": draw(st.sampled_from([128, 1000, 2048, 4096, 8192])),
        "maxNumSeqs": mns,
        "maxNumBatchedTokens": max(mns, block, draw(st.sampled_from([256, 2048, 8192]))),
        "blockSize": block,
        "tensorParallelSize": draw(st.sampled_from([1, 2, 8])),
    }
    method = draw(st.sampled_from(["ngram", "mtp", "eagle"]))
    doc["spec"]["speculative"] = {
        "method": method,
        "numSpeculativeTokens": draw(st.integers(1, 4)),
        **({"draftModel": {"name": "org/draft"}} if method == "eagle" else {}),
    }
    cpa = draw(st.booleans())
    if cpa:
        doc["spec"]["engine"]["numGpuBlocks"] = draw(st.sampled_from([512, 4096]))
    doc["spec"]["buckets"] = {
        "strategy": draw(st.sampled_from(["exp", "lin", "pad"])),
        "contiguousPA": cpa,
        "mergedPrefill": draw(st.booleans()),
        "coverage": {"complete": False},  # warm whatever was planned
    }
    doc["spec"]["warmup"] = {"timeoutSeconds": draw(st.integers(60, 86400))}
    return doc


@settings(deadline=None)
@given(specs())
def test_every_drawn_spec_builds_a_plan_the_runner_accepts(doc: dict[str, Any]) -> None:
    sdd = parse_manifest(doc)
    plan = evaluate(sdd).plan
    assume(plan is not None)  # shapes the engine itself refuses never reach the builders
    assert plan is not None
    refusal = ""
    try:
        children = desired_children(sdd, planned(sdd), SETTINGS)
    except ValueError as exc:  # the designed refusal, reported as BuildFailed (Stalled)
        refusal = str(exc)
    if refusal:
        assert "over a ConfigMap's 1 MiB" in refusal
        return
    runner_plan = parse_plan(children.runner_plan)
    deployment = children.serving_deployment
    name = deployment["metadata"]["name"]
    assert len(name) <= MAX_NAME
    assert DNS_1035_LABEL.match(name)
    served = deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    warmed = engine_argv(runner_plan)
    assert served[served.index("--port") :] == warmed[warmed.index("--port") :]
