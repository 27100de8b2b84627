"""The operator process on a real API server, for issue 11: a plan too large is refused at
once, no finalizer is set (an older operator's is removed), unknown status fields are kept, and
a deleted object's metrics go with it."""

from __future__ import annotations

import json
import time

import pytest
from support.api_controllers import get, seeds_example, started
from support.examples import example_doc
from support.kube_objects import condition_map

from warmgate.api.constants import FINALIZER
from warmgate.devcluster.controlplane import ControlPlane, OperatorProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_plan_of_millions_of_buckets_is_refused_within_seconds(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    """Item 5: tried before, such an object had no status at all after 25 s."""
    doc = example_doc(
        "minimal-ngram",
        engine={"maxModelLen": 131072, "maxNumSeqs": 1024, "maxNumBatchedTokens": 8192},
        buckets={"strategy": "lin"},
    )
    doc["metadata"].update(namespace=module_namespace, name="huge")
    control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(doc))
    control_plane.kubectl(
        "wait", "-n", module_namespace, "sdd/huge", "--for=condition=Stalled", "--timeout=15s"
    )
    obj = get(control_plane, "-n", module_namespace, "sdd", "huge")
    assert condition_map(obj)["BucketsPlanned"] == ("False", "PlanTooLarge")
    planned = next(c for c in obj["status"]["conditions"] if c["type"] == "BucketsPlanned")
    assert "200,868 to 471,532 buckets" in planned["message"]
    assert "would take at least" in planned["message"]
    assert get(control_plane, "-n", module_namespace, "jobs")["items"] == []


def test_no_finalizer_is_set_and_an_older_operators_is_removed(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    """Issue 14: no per-object daemon, so no finalizer; the one earlier builds set
    (documented in docs/api.md and docs/operator.md) goes at the first sight of the object."""
    obj = started(control_plane, module_namespace, "unfinalized")
    assert "finalizers" not in obj["metadata"]
    assert FINALIZER == "warmgate.dev/finalizer"
    old = seeds_example(module_namespace, "finalized")
    old["metadata"]["finalizers"] = [FINALIZER, "example.com/keep"]
    started(control_plane, module_namespace, "finalized", old)
    deadline = time.monotonic() + 30
    while (
        left := get(control_plane, "-n", module_namespace, "sdd", "finalized")["metadata"].get(
            "finalizers"
        )
    ) != ["example.com/keep"]:
        assert time.monotonic() < deadline, left
        time.sleep(0.2)
    control_plane.kubectl(
        "patch", "sdd", "finalized", "-n", module_namespace, "--type=json",
        "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]',
    )  # fmt: skip


def test_status_fields_of_a_newer_operator_are_kept(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    """Item 13: a field this operator does not know neither freezes the object nor is lost."""
    ns = module_namespace
    started(control_plane, ns, "newer")
    future = {"status": {"futureField": "from v2", "warmup": {"futureDetail": 7}}}
    control_plane.kubectl(
        "patch", "sdd", "newer", "-n", ns, "--subresource=status", "--type=merge",
        "-p", json.dumps(future),
    )  # fmt: skip
    control_plane.kubectl(
        "patch", "sdd", "newer", "-n", ns, "--type=merge",
        "-p", json.dumps({"spec": {"serving": {"replicas": 2}}}),
    )  # fmt: skip
    control_plane.kubectl(
        "wait", "-n", ns, "sdd/newer", "--timeout=60s",
        "--for=jsonpath={.status.observedGeneration}=2",
    )  # fmt: skip
    status = get(control_plane, "-n", ns, "sdd", "newer")["status"]
    assert status["futureField"] == "from v2"
    assert status["warmup"]["futureDetail"] == 7
    assert "InvalidSpec" not in operator.log.read_text()


def test_a_deleted_objects_metrics_are_removed(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    ns = module_namespace
    control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(seeds_example(ns, "gone")))
    series = f'warmgate_coverage_proven{{name="gone",namespace="{ns}"}}'
    _wait_metrics(operator, lambda text: series in text)
    control_plane.kubectl("delete", "sdd", "gone", "-n", ns, "--timeout=60s")
    _wait_metrics(operator, lambda text: f'name="gone",namespace="{ns}"' not in text)


def _wait_metrics(operator: OperatorProcess, check: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check(operator.get("/metrics")):  # type: ignore[operator]
            return
        time.sleep(0.5)
    raise AssertionError("the metrics never showed the expected series")
