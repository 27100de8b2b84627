"""Issue 37: the operator's /metrics against the real apiserver: exactly the list docs/operator.md
documents ("Metrics"), controller-runtime's controller, work-queue, API-request and
leader-election figures moving as the syncs run, and a frozen object (a sync that fails on
every pass: a ResourceQuota refuses its warmup Job) counted as one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.api_controllers import seeds_example
from support.paths import REPO_ROOT
from support.polling import eventually

from warmgate.devcluster.controlplane import ControlPlane, OperatorProcess

pytestmark = pytest.mark.integration

LEASE = "warmgate-metrics-test"
DOCS = REPO_ROOT / "docs" / "operator.md"
BEGIN, END = "<!-- metrics:begin -->", "<!-- metrics:end -->"
NAME = re.compile(r"`([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([a-z_,]*)\})?`")
# The series a family's samples carry besides its own name.
SUFFIXES = ("_bucket", "_sum", "_count")


def documented() -> dict[str, set[str]]:
    """Each metric of docs/operator.md's list: its name (as in a query) and label names."""
    text = DOCS.read_text(encoding="utf-8")
    block = text[text.index(BEGIN) + len(BEGIN) : text.index(END)]
    found: dict[str, set[str]] = {}
    for line in block.strip().splitlines():
        assert line.startswith("- `"), f"not one metric a line: {line!r}"
        names, _, _ = line.partition(": ")
        for name, labels in NAME.findall(names):
            assert name not in found, f"{name} is listed twice"
            found[name] = set(filter(None, labels.split(",")))
    return found


def exported(text: str) -> dict[str, set[str] | None]:
    """Each family of an exposition under the name a query uses (a counter's with `_total`):
    its label names, None when it exported no series yet."""
    found: dict[str, set[str] | None] = {}
    for family in text_string_to_metric_families(text):
        name = family.name + "_total" if family.type == "counter" else family.name
        labels = {k for s in family.samples for k in s.labels if k != "le"}
        found[name] = labels if family.samples else None
        for sample in family.samples:
            assert not sample.name.endswith("_created"), sample.name
    return found


def value(text: str, metric: str, /, **labels: str) -> float | None:
    """The value of the first series of ``metric`` with these labels (None: none)."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == metric and labels.items() <= sample.labels.items():
                return float(sample.value)
    return None


@pytest.fixture
def leader(
    control_plane: ControlPlane, warmgate_crd: ControlPlane, namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    """The operator with a leader Lease (so that its election gauge exists), resyncing each 2 s."""
    env = {
        "WARMGATE_LEADER_LEASE": LEASE,
        "WARMGATE_LEASE_NAMESPACE": namespace,
        "WARMGATE_RESYNC_SECONDS": "2",
        "WARMGATE_OPERATOR_IMAGE": "warmgate:test",
    }
    op = OperatorProcess(control_plane.kubeconfig, namespace, tmp_path / "op.log", env=env)
    try:
        yield op.wait_alive()
    finally:
        op.stop()


def _apply(cp: ControlPlane, doc: object) -> None:
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(doc))


def test_metrics_are_the_documented_list_and_move_like_controller_runtimes(
    control_plane: ControlPlane, namespace: str, leader: OperatorProcess
) -> None:
    ns = namespace
    _apply(control_plane, seeds_example(ns, "counted"))
    control_plane.kubectl(
        "wait", "-n", ns, "sdd/counted", "--for=jsonpath={.status.warmup.jobName}", "--timeout=90s"
    )

    def synced_twice() -> bool:
        text = leader.get("/metrics")
        return (value(text, "controller_runtime_reconcile_time_seconds_count") or 0) >= 2

    assert eventually(synced_twice, 60)
    text = leader.get("/metrics")
    docs, found = documented(), exported(text)
    assert set(found) == set(docs), (
        f"exported, not documented: {sorted(set(found) - set(docs))}; "
        f"documented, not exported: {sorted(set(docs) - set(found))}"
    )
    for name, labels in found.items():
        if labels is not None:
            assert labels == docs[name], name

    ctrl = {"controller": "specdecodedeployment"}
    queue = {"name": "specdecodedeployment", **ctrl}
    assert (value(text, "controller_runtime_reconcile_total", result="success", **ctrl) or 0) >= 1
    assert value(text, "controller_runtime_reconcile_total", result="requeue", **ctrl) == 0
    assert value(text, "controller_runtime_max_concurrent_reconciles", **ctrl) == 16
    assert (value(text, "workqueue_adds_total", **queue) or 0) >= 2
    assert (value(text, "workqueue_queue_duration_seconds_count", **queue) or 0) >= 2
    assert (value(text, "workqueue_work_duration_seconds_count", **queue) or 0) >= 2
    posts = value(text, "rest_client_requests_total", code="201", method="POST")
    assert (posts or 0) >= 3  # the warmup's ConfigMaps and Job at least
    watches = [
        s
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "rest_client_request_duration_seconds_count" and s.labels["verb"] == "GET"
    ]
    assert watches  # kopf's (its watches and lists) and the operator's client's, one host
    assert {s.labels["host"] for s in watches} == {urlsplit(control_plane.server).netloc}
    assert value(text, "leader_election_master_status", name=LEASE) == 1
    assert value(text, "warmgate_build_info", version="0.1.0") == 1
    last = value(
        text, "warmgate_last_successful_sync_timestamp_seconds", namespace=ns, name="counted"
    )
    assert last is not None
    assert last > 1.7e9
    assert value(text, "warmgate_sync_consecutive_failures", namespace=ns, name="counted") == 0


def test_a_frozen_object_counts_its_failed_passes_and_errors(
    control_plane: ControlPlane, namespace: str, leader: OperatorProcess
) -> None:
    # Every sync of the object fails at the same write: a ResourceQuota allows no Job.
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-jobs", "namespace": namespace},
        "spec": {"hard": {"count/jobs.batch": "0"}},
    }
    _apply(control_plane, quota)
    # No quota controller runs here: the test writes the usage it would (admission reads the
    # status, and refuses a Job once used + 1 exceeds hard).
    usage = {"status": {"hard": {"count/jobs.batch": "0"}, "used": {"count/jobs.batch": "0"}}}
    control_plane.kubectl(
        "patch", "-n", namespace, "resourcequota", "no-jobs", "--subresource=status",
        "--type=merge", "-p", json.dumps(usage),
    )  # fmt: skip
    before = leader.get("/metrics")
    ctrl = {"controller": "specdecodedeployment"}
    errors = value(before, "controller_runtime_reconcile_errors_total", **ctrl) or 0
    _apply(control_plane, seeds_example(namespace, "frozen"))

    def failures() -> float:
        text = leader.get("/metrics")
        series = {"namespace": namespace, "name": "frozen"}
        return value(text, "warmgate_sync_consecutive_failures", **series) or 0

    if not eventually(lambda: failures() >= 3, 60):
        obj = control_plane.kubectl("get", "-n", namespace, "sdd", "frozen", "-o", "json").stdout
        lines = [
            ln
            for ln in leader.get("/metrics").splitlines()
            if "rest_client_requests_total" in ln or "frozen" in ln or "reconcile_total" in ln
        ]
        quota = control_plane.kubectl("get", "-n", namespace, "resourcequota", "-o", "yaml").stdout
        pytest.fail("\n".join([json.loads(obj).get("status", {}).__repr__(), *lines, quota]))
    text = leader.get("/metrics")
    refused = value(text, "rest_client_requests_total", code="403", method="POST")
    assert (refused or 0) >= 3
    assert (value(text, "controller_runtime_reconcile_errors_total", **ctrl) or 0) >= errors + 3
    assert (value(text, "workqueue_retries_total", name="specdecodedeployment", **ctrl) or 0) >= 3
    # never went through: no last successful sync
    assert (
        value(text, "warmgate_last_successful_sync_timestamp_seconds", namespace=namespace) is None
    )
