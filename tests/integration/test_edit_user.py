"""Issue 34: nothing a namespace user with `edit` writes decides Warmed, what serves, or the status.

The attacker is a ServiceAccount bound to the built-in `edit` rules (`support.edit_user`),
acting with its own token against the real apiserver; the operator is a real process. No
kubelet, Job, Deployment or ReplicaSet controller runs here: the test plays them as the
integration tier does (`support.api_controllers`), always as the admin, and every forgery is
sent as the user. Each test is one case of the issue and fails with its guard removed.
"""

from __future__ import annotations

import http.server
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from runner_harness import free_port
from support.api_controllers import (
    finish,
    get,
    rolled_out,
    runner_summary,
    seeds_example,
    serve,
    started,
)
from support.dripping import DrippingBoard
from support.edit_user import EditUser
from support.kube_objects import condition_map, serving_pod, warmup_pod
from support.operators import OPERATOR_ENV, running_operator
from support.paths import CRD_PATH, REPO_ROOT
from support.runner_pods import running_on_loopback, wait_until, with_status_port

from warmgate.devcluster.controlplane import ControlPlane, OperatorProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]
CHART = REPO_ROOT / "charts" / "warmgate"
NEW_PLAN = {"spec": {"speculative": {"numSpeculativeTokens": 3}}}
QUIET_S = 6.0  # how long "never" is watched: six resyncs of this module's operator


@pytest.fixture(scope="module")
def user(
    control_plane: ControlPlane, module_namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> EditUser:
    user = EditUser(control_plane, module_namespace, tmp_path_factory.mktemp("user"))
    assert user.who() == user.subject
    denied = user.kubectl(
        "auth", "can-i", "patch", "specdecodedeployments.warmgate.dev", "--subresource=status",
        check=False,
    )  # fmt: skip
    assert denied.stdout.strip() == "no"
    return user


def events(cp: ControlPlane, ns: str, name: str) -> list[dict[str, Any]]:
    found = get(cp, "-n", ns, "events", f"--field-selector=involvedObject.name={name}")
    return list(found["items"])


def reasons(cp: ControlPlane, ns: str, name: str) -> set[str]:
    return {str(e.get("reason")) for e in events(cp, ns, name)}


def exists(cp: ControlPlane, ns: str, kind: str, name: str) -> bool:
    return cp.kubectl("get", kind, name, "-n", ns, check=False).returncode == 0


def serving(cp: ControlPlane, ns: str, name: str) -> dict[str, Any]:
    """An object whose plan was verified and rolled out (Ready), and its served record."""
    warmup = started(cp, ns, name)["status"]["warmup"]
    finish(cp, ns, warmup["jobName"], runner_summary("verified", warmup["cacheKey"]), ok=True)
    cp.kubectl("wait", "-n", ns, f"deployment/{name}-serving", "--for=create", "--timeout=60s")
    serve(cp, ns, get(cp, "-n", ns, "deployment", f"{name}-serving"), f"{name}-a")
    rolled_out(cp, ns, f"{name}-serving", ready=1)
    cp.kubectl("wait", "-n", ns, f"sdd/{name}", "--for=condition=Ready", "--timeout=60s")
    wait_until(lambda: exists(cp, ns, "configmap", f"{name}-served"))
    obj = get(cp, "-n", ns, "sdd", name)
    assert obj["status"]["serving"]["recordDigest"].startswith("sha256:")
    return obj


def new_plan_warming(cp: ControlPlane, ns: str, name: str, before: str) -> dict[str, Any]:
    """The owner changes the plan (k 2 -> 3): a new Job warms it while the old plan serves."""
    cp.kubectl("patch", "sdd", name, "-n", ns, "--type=merge", "-p", json.dumps(NEW_PLAN))
    return dict(
        wait_until(
            lambda: (
                (w := get(cp, "-n", ns, "sdd", name)["status"]["warmup"]).get("jobName")
                not in (None, before)
                and w
            )
        )
    )


def never(what: Any, seconds: float = QUIET_S) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert not what(), "it happened"
        time.sleep(0.3)


def test_case1_a_forged_verdict_in_the_served_record_warms_nothing(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str, user: EditUser
) -> None:
    """Patch the record's warmup.json cacheKey to the new plan's, delete the new Job: the
    operator used to say Warmed=True from the record and roll the unwarmed plan out."""
    cp, ns, name = control_plane, module_namespace, "forged-verdict"
    obj = serving(cp, ns, name)
    warming = new_plan_warming(cp, ns, name, obj["status"]["warmup"]["jobName"])
    served = get(cp, "-n", ns, "deployment", f"{name}-serving")
    record = json.loads(user.kubectl("get", "configmap", f"{name}-served", "-o", "json").stdout)
    forged = {**json.loads(record["data"]["warmup.json"]), "cacheKey": warming["cacheKey"]}
    patch = {"data": {"warmup.json": json.dumps(forged)}}
    user.kubectl("patch", "configmap", f"{name}-served", "--type=merge", "-p", json.dumps(patch))
    user.kubectl("delete", "job", warming["jobName"], "--cascade=background", "--wait=false")

    def forged_verdict() -> bool:
        now = get(cp, "-n", ns, "sdd", name)
        return condition_map(now)["Warmed"][0] == "True"

    never(forged_verdict)
    assert exists(cp, ns, "job", warming["jobName"])  # made again: the plan is warmed
    assert "RecordNotVerified" in reasons(cp, ns, name)
    assert not exists(cp, ns, "configmap", f"{name}-served")
    now = get(cp, "-n", ns, "deployment", f"{name}-serving")
    assert now["spec"]["template"] == served["spec"]["template"]  # still the verified plan


def test_case2_a_forged_deployment_in_the_served_record_is_never_created(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str, user: EditUser
) -> None:
    """Set another image in the record's deployment.json and delete the Deployment while a
    new plan warms: the operator used to recreate it with the user's image."""
    cp, ns, name = control_plane, module_namespace, "forged-deploy"
    obj = serving(cp, ns, name)
    new_plan_warming(cp, ns, name, obj["status"]["warmup"]["jobName"])
    record = json.loads(user.kubectl("get", "configmap", f"{name}-served", "-o", "json").stdout)
    deployment = json.loads(record["data"]["deployment.json"])
    for container in deployment["spec"]["template"]["spec"]["containers"]:
        container["image"] = "attacker.example/evil:1"
    patch = {"data": {"deployment.json": json.dumps(deployment)}}
    user.kubectl("patch", "configmap", f"{name}-served", "--type=merge", "-p", json.dumps(patch))
    user.kubectl("delete", "deployment", f"{name}-serving", "--wait=false")
    never(lambda: exists(cp, ns, "deployment", f"{name}-serving"))
    assert "RecordNotVerified" in reasons(cp, ns, name)
    assert "Restored" not in reasons(cp, ns, name)


def test_case5_a_deep_termination_message_does_not_freeze_the_status(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str, user: EditUser
) -> None:
    """A Pod running the Job's template (made by the user, with the Job's labels, owner
    reference and tracking finalizer) ends with "[" * 4096 as its termination message (its
    runner's file written through pods/exec): every sync used to raise RecursionError."""
    cp, ns, name = control_plane, module_namespace, "deep-message"
    warmup = started(cp, ns, name)["status"]["warmup"]
    job = get(cp, "-n", ns, "job", warmup["jobName"])
    pod = warmup_pod(
        ns, warmup["jobName"], job["metadata"]["uid"], "deep", template=job["spec"]["template"]
    )
    user.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    status = {
        "phase": "Failed",
        "containerStatuses": [
            {
                "name": "warmup",
                "image": "vllm-gaudi:test",
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": 1, "message": "[" * 4096}},
            }
        ],
    }
    cp.kubectl(  # the kubelet writes what the container left
        "patch", "pod", pod["metadata"]["name"], "-n", ns, "--subresource=status",
        "--type=merge", "-p", json.dumps({"status": status}),
    )  # fmt: skip

    def ended() -> bool:
        warmed = get(cp, "-n", ns, "sdd", name)["status"]["conditions"]
        message = next(c["message"] for c in warmed if c["type"] == "Warmed")
        return "ended (no runner summary)" in message

    wait_until(ended, timeout=30)
    assert "RecursionError" not in operator.log.read_text()


class Board:
    """A status port answering one document (what any Pod can answer), set by the test."""

    def __init__(self) -> None:
        self.port = free_port()
        self.body = b"{}"
        board = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                answer = board.body
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                del args

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def board() -> Iterator[Board]:
    served = Board()
    yield served
    served.close()


@pytest.mark.parametrize(
    ("stem", "document"),
    [
        ("inf", '{{"v": 1, "mode": "warmup", "key": "{key}", "elapsed_s": 1e999}}'),
        (
            "int64",
            '{{"v": 1, "mode": "warmup", "key": "{key}", "elapsed_s": 1, "progress": '
            '{{"prompt": [100000000000000000000, 100000000000000000000]}}}}',
        ),
    ],
)
def test_case6_unbounded_numbers_on_a_status_board_do_not_freeze_the_status(
    *,
    control_plane: ControlPlane,
    operator: OperatorProcess,
    module_namespace: str,
    user: EditUser,
    board: Board,
    stem: str,
    document: str,
) -> None:
    """A running warmup Pod's board answers 1e999 for this plan (inf: int(inf) raised
    OverflowError in every sync) or an integer beyond int64 (the API server refused every
    status patch, 422): either way the status froze at WarmupPending."""
    cp, ns, name = control_plane, module_namespace, f"board-{stem}"
    warmup = started(cp, ns, name)["status"]["warmup"]
    board.body = document.format(key=warmup["cacheKey"]).encode()
    job = get(cp, "-n", ns, "job", warmup["jobName"])
    pod = warmup_pod(
        ns, warmup["jobName"], job["metadata"]["uid"], template=job["spec"]["template"]
    )
    pod = with_status_port(pod, board.port)
    user.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    running_on_loopback(cp, ns, pod)  # the kubelet's part, as the admin

    def running() -> bool:
        return condition_map(get(cp, "-n", ns, "sdd", name))["Warmed"][1] == "WarmupRunning"

    wait_until(running, timeout=30)
    assert "OverflowError" not in operator.log.read_text()
    if stem == "int64":
        progress = get(cp, "-n", ns, "sdd", name)["status"]["warmup"].get("progress") or {}
        assert progress.get("warmedBuckets", 0) <= 2**63 - 1


def test_case7_the_text_of_a_stop_annotation_never_reaches_a_condition(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str, user: EditUser
) -> None:
    """`kubectl annotate job ... warmgate.dev/warmup-failed=...` as the user."""
    cp, ns, name = control_plane, module_namespace, "annotated"
    warmup = started(cp, ns, name)["status"]["warmup"]
    text = "Unschedulable: call +1-555-0100 or visit https://evil.example to fix the cluster"
    user.kubectl("annotate", "job", warmup["jobName"], f"warmgate.dev/warmup-failed={text}")
    cp.kubectl("wait", "-n", ns, f"sdd/{name}", "--for=condition=Stalled", "--timeout=30s")
    obj = get(cp, "-n", ns, "sdd", name)
    for condition in obj["status"]["conditions"]:
        assert "evil" not in condition["message"], condition
        assert "555" not in condition["message"], condition
    assert condition_map(obj)["Warmed"] == ("False", "Unschedulable")
    assert warmup["jobName"] in next(
        c["message"] for c in obj["status"]["conditions"] if c["type"] == "Warmed"
    )


def test_case7_the_text_of_an_event_the_user_made_never_reaches_a_condition(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str, user: EditUser
) -> None:
    """`edit` may create Events: a FailedCreate Event on the warmup Job (which has no Pod
    here) carries only its recognised cause into Warmed, in the operator's words."""
    cp, ns, name = control_plane, module_namespace, "event-text"
    warmup = started(cp, ns, name)["status"]["warmup"]
    job = get(cp, "-n", ns, "job", warmup["jobName"])
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{warmup['jobName'][:40]}.forged"},
        "involvedObject": {
            "apiVersion": "batch/v1", "kind": "Job", "name": warmup["jobName"],
            "namespace": ns, "uid": job["metadata"]["uid"],
        },
        "reason": "FailedCreate",
        "type": "Warning",
        "message": "Error creating: your cluster is locked, pay at https://evil.example",
        "source": {"component": "job-controller"},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }  # fmt: skip
    user.kubectl("create", "-f", "-", stdin=json.dumps(event))

    def told() -> bool:
        return condition_map(get(cp, "-n", ns, "sdd", name))["Warmed"][1] == "FailedCreate"

    wait_until(told, timeout=30)
    obj = get(cp, "-n", ns, "sdd", name)
    for condition in obj["status"]["conditions"]:
        assert "evil" not in condition["message"], condition


def test_case3_a_pod_owned_by_the_serving_replicaset_by_hand_gets_no_gate_and_no_say(
    *,
    control_plane: ControlPlane,
    operator: OperatorProcess,
    module_namespace: str,
    user: EditUser,
    board: Board,
) -> None:
    """The user's Pod: the serving labels and plan annotations, a controller owner reference to
    the serving ReplicaSet (its UID is readable), its own image, a status board saying it ran
    an unwarmed shape. Its gate used to be opened ("WarmupVerified") and its board read into
    status.drift, an Event, a seed proposal and Ready's reason UnwarmedShapeObserved."""
    cp, ns, name = control_plane, module_namespace, "forged-pod"
    serving(cp, ns, name)
    board.body = json.dumps(
        {"v": 1, "mode": "serve", "unwarmed": ["('decode', 3, 1, 40)"], "unwarmed_count": 1}
    ).encode()
    honest = json.loads(user.kubectl("get", "pod", f"{name}-a", "-o", "json").stdout)
    meta = honest["metadata"]
    forged: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-forged",
            "labels": meta["labels"],
            "annotations": meta.get("annotations") or {},
            "ownerReferences": meta["ownerReferences"],
        },
        "spec": honest["spec"],
    }
    for container in forged["spec"]["containers"]:
        container["image"] = "attacker.example/board:1"
    forged = with_status_port(forged, board.port)
    user.kubectl("apply", "-f", "-", stdin=json.dumps(forged))
    cp.kubectl(  # the kubelet's part, as the admin
        "patch", "pod", f"{name}-forged", "-n", ns, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"phase": "Running", "podIP": "127.0.0.1"}}),
    )  # fmt: skip

    def believed() -> bool:
        pod = get(cp, "-n", ns, "pod", f"{name}-forged")
        gates = (pod.get("status") or {}).get("conditions") or []
        obj = get(cp, "-n", ns, "sdd", name)
        return (
            any(c.get("type") == "warmgate.dev/warmed" for c in gates)
            or "drift" in obj["status"]
            or condition_map(obj)["Ready"][1] == "UnwarmedShapeObserved"
        )

    never(believed)
    assert "UnwarmedShapeObserved" not in reasons(cp, ns, name)


def test_case4_a_slow_board_does_not_stall_its_objects_sync(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str, user: EditUser
) -> None:
    """A warmup Pod's board answers one byte every 1.5 s: the read's 2 s timeout was per read,
    so the object's sync waited for the whole answer (minutes) before it wrote anything."""
    cp, ns, name = control_plane, module_namespace, "slow-board"
    warmup = started(cp, ns, name)["status"]["warmup"]
    doc = {"v": 1, "mode": "warmup", "key": warmup["cacheKey"], "stage": "x"}
    slow = DrippingBoard(json.dumps(doc).encode(), pause=1.5)
    try:
        job = get(cp, "-n", ns, "job", warmup["jobName"])
        template = job["spec"]["template"]
        pod = warmup_pod(ns, warmup["jobName"], job["metadata"]["uid"], template=template)
        pod = with_status_port(pod, slow.port)
        user.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
        start = time.monotonic()
        running_on_loopback(cp, ns, pod)

        def running() -> bool:
            now = condition_map(get(cp, "-n", ns, "sdd", name))["Warmed"][1]
            return now == "WarmupRunning"

        wait_until(running, timeout=30)
        assert time.monotonic() - start < 30
    finally:
        slow.close()


def test_case8_an_object_the_operator_cannot_read_keeps_opening_its_gates(
    control_plane: ControlPlane, warmgate_crd: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """keep_serving, through the operator process (its call and its open_gates survived every
    test before: only a unit test called it directly). The object serves; the cluster's CRD
    gains a field this operator does not know and the object sets it (version skew); the
    ReplicaSet replaces the serving Pod: the new Pod's gate opens, and the object says why it
    cannot be read."""
    cp, ns, name = control_plane, namespace, "unreadable"
    with running_operator(cp, ns, tmp_path / "first.log", OPERATOR_ENV):
        serving(cp, ns, name)
    newer = yaml.safe_load(CRD_PATH.read_text())
    schema = newer["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    schema["properties"]["futureField"] = {"type": "string", "description": "From v2."}
    try:
        cp.kubectl("replace", "-f", "-", stdin=json.dumps(newer))
        doc = get(cp, "-n", ns, "sdd", name)
        doc["spec"]["futureField"] = "set"
        for key in ("resourceVersion", "managedFields", "generation", "uid", "creationTimestamp"):
            doc["metadata"].pop(key, None)
        doc.pop("status", None)
        stored_with_the_new_field(cp, doc)
        cp.kubectl("apply", "-f", "-", stdin=json.dumps(doc))
        deployment = get(cp, "-n", ns, "deployment", f"{name}-serving")
        rs = get(
            cp, "-n", ns, "replicaset", f"{name}-serving-g{deployment['metadata']['generation']}"
        )
        cp.kubectl("delete", "pod", f"{name}-a", "-n", ns, "--wait=false")
        replacement = serving_pod(ns, rs, f"{name}-b")  # the ReplicaSet controller's new Pod
        cp.kubectl("apply", "-f", "-", stdin=json.dumps(replacement))
        with running_operator(cp, ns, tmp_path / "second.log", OPERATOR_ENV):

            def gated() -> bool:
                pod = get(cp, "-n", ns, "pod", f"{name}-b")
                conditions = (pod.get("status") or {}).get("conditions") or []
                return any(
                    c.get("type") == "warmgate.dev/warmed" and c.get("status") == "True"
                    for c in conditions
                )

            wait_until(gated, timeout=30)
            obj = get(cp, "-n", ns, "sdd", name)
            assert condition_map(obj)["Stalled"] == ("True", "InvalidSpec")
    finally:
        current = get(cp, "crd", "specdecodedeployments.warmgate.dev")
        original = yaml.safe_load(CRD_PATH.read_text())
        original["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        cp.kubectl("replace", "-f", "-", stdin=json.dumps(original))


def stored_with_the_new_field(cp: ControlPlane, doc: dict[str, Any]) -> None:
    """Wait until the server stores the new field (it swaps a CRD's storage asynchronously)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        dry = cp.kubectl(
            "apply", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(doc)
        )
        if "futureField" in json.loads(dry.stdout)["spec"]:
            return
        time.sleep(0.2)
    raise TimeoutError("the server never stored spec.futureField")


def test_case8_a_pod_on_the_nodes_network_is_never_read(
    *,
    control_plane: ControlPlane,
    operator: OperatorProcess,
    module_namespace: str,
    user: EditUser,
    board: Board,
) -> None:
    """The hostNetwork refusal of runner_endpoints (no test failed without it): a warmup Pod
    of the Job's template on the node's network (its IP the node's) is never asked, so the
    progress its port claims never reaches the status."""
    cp, ns, name = control_plane, module_namespace, "host-network"
    warmup = started(cp, ns, name)["status"]["warmup"]
    board.body = json.dumps(
        {
            "v": 1, "mode": "warmup", "key": warmup["cacheKey"], "stage": "engine",
            "progress": {"prompt": [3, 4]}, "elapsed_s": 5,
        }
    ).encode()  # fmt: skip
    job = get(cp, "-n", ns, "job", warmup["jobName"])
    template = job["spec"]["template"]
    pod = warmup_pod(ns, warmup["jobName"], job["metadata"]["uid"], template=template)
    pod = with_status_port(pod, board.port)
    pod["spec"]["hostNetwork"] = True
    user.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    running_on_loopback(cp, ns, pod)

    def running() -> bool:
        return condition_map(get(cp, "-n", ns, "sdd", name))["Warmed"][1] == "WarmupRunning"

    wait_until(running, timeout=30)
    never(lambda: "progress" in get(cp, "-n", ns, "sdd", name)["status"]["warmup"])


def test_case9_the_operators_own_namespace_serves_no_object_unless_allowed(
    control_plane: ControlPlane, warmgate_crd: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """The chart tells the operator its namespace (downward API) and the opt-in; an object in
    that namespace is Stalled OperatorNamespace and gets no Job; allowed, it warms. (The edit
    user's rights there are the premise: it may exec into Pods and update Leases.)"""
    cp, ns = control_plane, namespace
    helm = cp.assets / "helm"
    if not helm.is_file():
        reason = f"no helm binary at {helm}: run `hack/provision-envtest.sh helm`"
        print(reason)
        pytest.skip(reason)
    rendered = subprocess.run(
        [str(helm), "template", "wg", str(CHART), f"--namespace={ns}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    (deployment,) = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment"]
    env = {e["name"]: e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["WARMGATE_OPERATOR_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.namespace"
    )
    assert env["WARMGATE_ALLOW_OPERATOR_NAMESPACE"]["value"] == "false"
    own = {**OPERATOR_ENV, "WARMGATE_OPERATOR_NAMESPACE": ns}
    with running_operator(cp, ns, tmp_path / "own.log", own):
        cp.kubectl("apply", "-f", "-", stdin=json.dumps(seeds_example(ns, "in-operator-ns")))
        cp.kubectl(
            "wait", "-n", ns, "sdd/in-operator-ns", "--for=condition=Stalled", "--timeout=60s"
        )
        obj = get(cp, "-n", ns, "sdd", "in-operator-ns")
        assert condition_map(obj)["Stalled"] == ("True", "OperatorNamespace")
        assert get(cp, "-n", ns, "jobs")["items"] == []
    allowed = {**own, "WARMGATE_ALLOW_OPERATOR_NAMESPACE": "true"}
    with running_operator(cp, ns, tmp_path / "allowed.log", allowed):
        cp.kubectl(
            "wait", "-n", ns, "sdd/in-operator-ns", "--timeout=90s",
            "--for=jsonpath={.status.warmup.jobName}",
        )  # fmt: skip


def test_the_user_may_write_what_the_cases_forge_and_not_the_status(
    control_plane: ControlPlane, module_namespace: str, user: EditUser, tmp_path: Path
) -> None:
    """The premise of every case: `edit` writes ConfigMaps, Jobs' annotations, Pods; not the
    object's status (docs/operator.md, "Who can forge what")."""
    del control_plane, tmp_path
    for args in (
        ("patch", "configmaps"),
        ("delete", "jobs.batch"),
        ("patch", "jobs.batch"),
        ("create", "pods"),
        ("delete", "deployments.apps"),
        ("create", "pods/exec"),
        ("update", "leases.coordination.k8s.io"),
        ("create", "events"),  # so an Event's text is no evidence either
    ):
        assert user.kubectl("auth", "can-i", *args, "-n", module_namespace).stdout.strip() == "yes"
    for args in (
        ("patch", "specdecodedeployments.warmgate.dev", "--subresource=status"),
        ("patch", "pods", "--subresource=status"),
        ("patch", "jobs.batch", "--subresource=status"),
    ):
        done = user.kubectl("auth", "can-i", *args, "-n", module_namespace, check=False)
        assert done.stdout.strip() == "no", args
