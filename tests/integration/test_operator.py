"""The operator process plans, proves and reports SpecDecodeDeployments on a real apiserver."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from support.api_controllers import get
from support.examples import example_doc
from support.kube_objects import condition_map

from warmgate.api import parse_manifest
from warmgate.devcluster.controlplane import ControlPlane, OperatorProcess
from warmgate.reconcile.planning.evaluate import evaluate

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def operator_env() -> dict[str, str]:
    """The operator with its default resync (15 s) and image."""
    return {}


def example(name: str, namespace: str, rename: str, **spec_changes: Any) -> dict[str, Any]:
    doc = example_doc(name.removesuffix(".yaml"), **spec_changes)
    doc["metadata"].update(namespace=namespace, name=rename)
    return doc


def apply(cp: ControlPlane, doc: dict[str, Any]) -> None:
    cp.kubectl("apply", "--validate=strict", "-f", "-", stdin=json.dumps(doc))


def wait_for(
    cp: ControlPlane, ns: str, name: str, condition: str, timeout: int = 90
) -> dict[str, Any]:
    cp.kubectl("wait", "-n", ns, f"sdd/{name}", f"--for={condition}", f"--timeout={timeout}s")
    return get(cp, "-n", ns, "sdd", name)


def wait_planned(
    cp: ControlPlane, ns: str, name: str, generation: int, timeout: float = 90
) -> dict[str, Any]:
    """The object once BucketsPlanned is settled (True or False) for this generation."""
    deadline = time.monotonic() + timeout
    while True:
        obj = get(cp, "-n", ns, "sdd", name)
        planned = next(
            (
                c
                for c in obj.get("status", {}).get("conditions", [])
                if c["type"] == "BucketsPlanned"
            ),
            {},
        )
        if planned.get("observedGeneration") == generation and planned["status"] != "Unknown":
            return obj
        assert time.monotonic() < deadline, f"generation {generation} never planned: {planned}"
        time.sleep(0.2)


def test_example_is_planned_proven_and_reported(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    ns = module_namespace
    doc = example("llama31-8b-eagle3-gaudi2.yaml", ns, "eagle3")
    apply(control_plane, doc)
    # eagle3 k=2 at maxModelLen = maxNumBatchedTokens leaves one prefill no warmup can compile:
    # CoverageProven is False (UnwarmableShapes) and the completed plan is warmed anyway.
    obj = wait_for(control_plane, ns, "eagle3", "condition=CoverageProven=False")
    expected = evaluate(parse_manifest(doc)).summary
    assert expected is not None
    plan = obj["status"]["plan"]
    assert plan["hash"] == expected.hash
    assert plan["totalBuckets"] == expected.total_buckets
    assert plan["extraBuckets"] == expected.extra_buckets > 0
    assert obj["status"]["observedGeneration"] == 1
    assert condition_map(obj) == {
        "BucketsPlanned": ("True", "Planned"),
        "CoverageProven": ("False", "UnwarmableShapes"),
        # No Job controller runs in this tier: the Job never creates its Pod, and the status
        # says so (the e2e tier sees WarmupRunning while the runner runs).
        "Warmed": ("False", "WarmupPending"),
        "Ready": ("False", "WarmupPending"),
        "Reconciling": ("True", "WarmupPending"),
    }
    wide = control_plane.kubectl("get", "-n", ns, "sdd", "eagle3", "-o", "wide")
    assert str(expected.total_buckets) in wide.stdout
    events = control_plane.kubectl(
        "get",
        "events",
        "-n",
        ns,
        "-o",
        "json",
        "--field-selector",
        "involvedObject.name=eagle3",
    )
    reasons = [e["reason"] for e in json.loads(events.stdout)["items"]]
    assert "UnwarmableShapes" in reasons
    assert "Logging" not in reasons  # kopf's per-resync "succeeded" lines must not become Events
    metrics = operator.get("/metrics")
    assert f'warmgate_coverage_proven{{name="eagle3",namespace="{ns}"}} 0.0' in metrics


def test_spec_change_replans_with_a_new_generation(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    ns = module_namespace
    doc = example("llama31-8b-seeds.yaml", ns, "replanned")
    apply(control_plane, doc)
    first = wait_for(control_plane, ns, "replanned", "condition=CoverageProven")
    doc["spec"]["speculative"]["numSpeculativeTokens"] = 3
    apply(control_plane, doc)
    # observedGeneration=2 comes first with the Planning notice (BucketsPlanned=Unknown, the
    # last plan still in status.plan): wait for the planning of generation 2 to be done.
    second = wait_planned(control_plane, ns, "replanned", generation=2)
    assert second["status"]["plan"]["hash"] != first["status"]["plan"]["hash"]
    replanned = evaluate(parse_manifest(doc)).summary
    assert replanned is not None
    assert second["status"]["plan"]["hash"] == replanned.hash


def test_unplannable_spec_stalls_without_crashing_the_operator(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    ns = module_namespace
    bad = example("llama31-8b-seeds.yaml", ns, "unplannable")
    apply(control_plane, bad)
    wait_for(control_plane, ns, "unplannable", "condition=CoverageProven")
    bad["spec"]["buckets"]["seeds"]["decode"] = [[16, 1, 8]]  # bs 16 > 8 blocks: engine drops it
    apply(control_plane, bad)
    obj = wait_for(control_plane, ns, "unplannable", "condition=Stalled")
    assert "plan" not in obj["status"]  # the summary of generation 1 does not describe this one
    assert condition_map(obj)["BucketsPlanned"] == ("False", "PlanFailed")
    assert obj["status"]["phase"] == "Failed"
    assert "Generated 0 decode buckets" in obj["status"]["conditions"][0]["message"]
    # The operator is still alive and still serves other objects.
    apply(control_plane, example("llama31-8b-seeds.yaml", ns, "after-a-bad-one"))
    wait_for(control_plane, ns, "after-a-bad-one", "condition=CoverageProven")
    assert operator.proc.poll() is None
    assert "Traceback" not in operator.log.read_text()


def test_policy_caps_and_allowances_are_reported(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    ns = module_namespace
    capped = example(
        "minimal-ngram.yaml",
        ns,
        "capped",
        buckets={"coverage": {"maxExtraBuckets": 3}},
    )
    apply(control_plane, capped)
    name = capped["metadata"]["name"]
    obj = wait_for(control_plane, ns, name, "condition=Stalled")
    assert condition_map(obj)["CoverageProven"] == ("False", "ExtraBucketsCapped")
    assert obj["status"]["plan"]["uncoveredCount"] > 0
    allowed = example("llama31-8b-lin-contiguous-pa.yaml", ns, "allowed")
    apply(control_plane, allowed)
    obj = wait_for(control_plane, ns, allowed["metadata"]["name"], "condition=BucketsPlanned")
    assert condition_map(obj)["CoverageProven"] == ("False", "UncoveredShapesAllowed")
    assert "Stalled" not in condition_map(obj)


def _counter(metrics: str, name: str) -> float:
    lines = [line for line in metrics.splitlines() if line.startswith(f"{name} ")]
    assert lines, f"{name} is not on /metrics"
    return float(lines[0].split()[1])


def test_objects_with_one_config_share_one_planning(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    """Issue 14 item 2: the plan cache is keyed by the planner's inputs, shared by objects."""
    ns = module_namespace
    before = operator.get("/metrics")
    engine = {"maxNumSeqs": 24, "maxModelLen": 2048, "maxNumBatchedTokens": 2048}
    twins = [example("minimal-ngram", ns, f"twin-{i}", engine=engine) for i in range(3)]
    other = example("minimal-ngram", ns, "twin-other", engine={**engine, "maxNumSeqs": 20})
    for doc in [*twins, other]:
        apply(control_plane, doc)
    hashes = {
        doc["metadata"]["name"]: wait_for(
            control_plane, ns, doc["metadata"]["name"], "condition=BucketsPlanned"
        )["status"]["plan"]["hash"]
        for doc in [*twins, other]
    }
    assert len({hashes[f"twin-{i}"] for i in range(3)}) == 1
    assert hashes["twin-other"] != hashes["twin-0"]
    after = operator.get("/metrics")
    misses = _counter(after, "warmgate_plan_cache_misses_total")
    assert misses - _counter(before, "warmgate_plan_cache_misses_total") == 2
    assert (
        _counter(after, "warmgate_plan_cache_hits_total")
        - _counter(before, "warmgate_plan_cache_hits_total")
        >= 2
    )
