"""Scenario t: issue 34's cases 1 and 3 on the real node, as a namespace user bound to `edit`.

`pod` (case 3): while the object serves, the user creates a Pod with the serving labels and
plan annotations and a controller owner reference to the serving ReplicaSet (its UID is
readable), running its own container that answers on the status port that it ran an
unwarmed shape. The real ReplicaSet controller counts the Pod as its own (the owner reference
and the selector match) and deletes one Pod too many (the least advanced: not ready before
ready); the test records when. Meanwhile the operator never opens the Pod's gate, and nothing
of its board reaches status.drift, Ready or an Event.

`record` (case 1): the owner changes the plan (k 2 -> 3, a slow stand-in warmup); while the
new plan warms, the user rewrites the served record's warmup.json so that its cacheKey names
the new plan and deletes the new Job. The operator deletes the edited record (Warning Event
RecordNotVerified), makes the Job again, never says Warmed from the record, and the new plan
rolls out only after its own runner verified it.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from e2e_support import (
    E2ECluster,
    EditUser,
    Manifest,
    condition,
    gate_open,
    is_true,
    restricted_container,
    sdd,
    wait_for,
)

NAME = "edit-user"
CACHE_KEY = "warmgate.dev/cache-key"
BOARD = json.dumps(
    {"v": 1, "mode": "serve", "unwarmed": ["('decode', 3, 1, 40)"], "unwarmed_count": 1}
)
# The user's container: a status board on the runner's port (Python from the engine image).
SERVE_BOARD = (
    "import http.server, os\n"
    "B = os.environ['BOARD'].encode()\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        self.send_response(200); self.end_headers(); self.wfile.write(B)\n"
    "http.server.HTTPServer(('', 9464), H).serve_forever()\n"
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _events(e2e: E2ECluster, ns: str) -> list[Manifest]:
    found = e2e.get("events", "-n", ns, f"--field-selector=involvedObject.name={NAME}")
    return list(found["items"])


def _forged_pod(honest: Manifest, image: str) -> Manifest:
    meta = honest["metadata"]
    container = {
        "name": "vllm",
        "image": image,
        "imagePullPolicy": "Never",
        "command": ["python3", "-c", SERVE_BOARD],
        "env": [{"name": "BOARD", "value": BOARD}],
        "ports": [{"name": "warmgate-status", "containerPort": 9464}],
        "securityContext": restricted_container(),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{NAME}-forged",
            "labels": meta["labels"],
            "annotations": meta.get("annotations") or {},
            "ownerReferences": meta["ownerReferences"],
        },
        "spec": {
            "automountServiceAccountToken": False,
            "containers": [container],
            "readinessGates": honest["spec"].get("readinessGates") or [],
        },
    }


@pytest.fixture(scope="module")
def run(e2e: E2ECluster, namespace: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    ns, image = namespace, e2e.images.engine.ref
    user = EditUser(e2e, ns, tmp_path_factory.mktemp("user"), "user")
    found: dict[str, Any] = {}
    e2e.apply(sdd(NAME, ns, image))
    assert e2e.wait_ready(ns, NAME).returncode == 0, "the object never went Ready"
    found["served"] = e2e.get("sdd", NAME, "-n", ns)

    # case 3: a Pod owned by the serving ReplicaSet by hand
    pods = e2e.items("pods", ns, NAME)
    honest = next(p for p in pods if "pod-template-hash" in p["metadata"]["labels"])
    start = time.monotonic()
    user.kubectl("create", "-f", "-", stdin=json.dumps(_forged_pod(honest, image)))
    samples = []
    while time.monotonic() - start < 20:
        pod = e2e.get_or_none("pod", f"{NAME}-forged", "-n", ns)
        obj = e2e.get("sdd", NAME, "-n", ns)
        samples.append((time.monotonic() - start, pod, obj))
        time.sleep(0.5)
    found["pod samples"] = samples
    found["pod gone after"] = next((t for t, pod, _ in samples if pod is None), None)
    found["events after pod"] = _events(e2e, ns)

    # case 1: the served record's verdict forged while a new plan warms
    env = [{"name": "STANDIN_FAULTS", "value": "slow_warmup=20"}]
    patch = {"spec": {"speculative": {"numSpeculativeTokens": 3}, "engine": {"env": env}}}
    e2e.kubectl("patch", "sdd", NAME, "-n", ns, "--type=merge", "-p", json.dumps(patch))
    old_key = found["served"]["status"]["warmup"]["cacheKey"]

    def new_job() -> Manifest | None:
        jobs = e2e.items("jobs", ns, NAME)
        return next((j for j in jobs if j["metadata"]["annotations"][CACHE_KEY] != old_key), None)

    job = wait_for("the new plan's Job", new_job)
    new_key = job["metadata"]["annotations"][CACHE_KEY]
    record = json.loads(user.kubectl("get", "configmap", f"{NAME}-served", "-o", "json").stdout)
    warmup = {**json.loads(record["data"]["warmup.json"]), "cacheKey": new_key}
    forged = {"data": {"warmup.json": json.dumps(warmup)}}
    user.kubectl("patch", "configmap", f"{NAME}-served", "--type=merge", "-p", json.dumps(forged))
    user.kubectl("delete", "job", job["metadata"]["name"], "--wait=false")
    found["forged at"] = time.monotonic()
    found["job"] = job
    record_samples = []

    def verified_by_a_job() -> bool:
        obj = e2e.get("sdd", NAME, "-n", ns)
        record_samples.append((time.monotonic() - found["forged at"], obj))
        return (obj["status"].get("serving") or {}).get("planHash") not in (
            None,
            found["served"]["status"]["serving"]["planHash"],
        )

    wait_for("the new plan rolled out", verified_by_a_job, 300)
    found["record samples"] = record_samples
    found["events"] = _events(e2e, ns)
    found["final"] = e2e.get("sdd", NAME, "-n", ns)
    return found


def test_the_forged_pods_gate_never_opened_and_its_board_counted_for_nothing(
    run: dict[str, Any],
) -> None:
    for at, pod, obj in run["pod samples"]:
        assert pod is None or not gate_open(pod), f"gate opened {at:.1f} s after the create"
        assert "drift" not in obj["status"], at
        assert condition(obj, "Ready").get("reason") != "UnwarmedShapeObserved", at
    assert "UnwarmedShapeObserved" not in {e["reason"] for e in run["events after pod"]}
    # What the real ReplicaSet controller did with the extra Pod (recorded, not judged).
    print(f"scenario t: the forged Pod was gone after {run['pod gone after']} s")


def test_the_forged_record_made_no_verdict(run: dict[str, Any]) -> None:
    for at, obj in run["record samples"]:
        warmed = condition(obj, "Warmed")
        assert "the plan serving now" not in str(warmed.get("message")), at
    assert "RecordNotVerified" in {e["reason"] for e in run["events"]}
    final = run["final"]
    assert is_true(final, "Warmed")
    assert final["status"]["warmup"]["jobName"] == run["job"]["metadata"]["name"]
    print(
        "scenario t: the new plan rolled out "
        f"{run['record samples'][-1][0]:.1f} s after the forgery, from its own Job"
    )
