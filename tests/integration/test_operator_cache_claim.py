"""The recipe-cache claim's lifecycle on the real API server (issue 23 item 12).

The operator creates the claim of spec.warmup.cache.claimTemplate, named after the template;
a changed template gets a new claim, and the old one is deleted only once nothing of the
object mounts it: not while the Deployment of the last verified plan does, not while one of
its Pods still runs. A claim an earlier build made under `<parent>-recipe-cache` from the same
template stays the object's claim. No kubelet, Job, Deployment or PVC controller runs here: the
test plays them (api_controllers), and a deleted claim may stay Terminating on the
pvc-protection finalizer that no controller removes, so "deleted" means gone or carrying a
deletionTimestamp.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest
from support.api_controllers import (
    finish,
    get,
    replica_set_of,
    rolled_out,
    runner_summary,
    seeds_example,
)
from support.kube_objects import serving_pod
from support.polling import eventually

from warmgate.contract.order import parse_plan
from warmgate.devcluster.controlplane import ControlPlane, OperatorProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]
NAME = "cached"
CLAIMS = "warmgate.dev/component=recipe-cache"


def claims(cp: ControlPlane, ns: str) -> dict[str, dict[str, Any]]:
    found = get(cp, "-n", ns, "pvc", "-l", CLAIMS)["items"]
    return {c["metadata"]["name"]: c for c in found}


def claim_of(workload: dict[str, Any]) -> str:
    volumes = workload["spec"]["template"]["spec"]["volumes"]
    (name,) = [
        v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v
    ]
    return str(name)


def deleted(cp: ControlPlane, ns: str, name: str) -> bool:
    claim = claims(cp, ns).get(name)
    return claim is None or "deletionTimestamp" in claim["metadata"]


def warmed(cp: ControlPlane, ns: str, job: str, key: str) -> None:
    finish(cp, ns, job, runner_summary("verified", key, kv_blocks=4321), ok=True)


def sdd_with_template(ns: str, size: str) -> dict[str, Any]:
    doc = seeds_example(ns, NAME)
    doc["spec"]["warmup"] = {
        **(doc["spec"].get("warmup") or {}),
        "cache": {"claimTemplate": {"size": size}},
    }
    return doc


def serve_on_claim(cp: ControlPlane, ns: str, deployment: dict[str, Any], name: str) -> None:
    """A serving Pod of the Deployment's ReplicaSet, mounting the template's claim as the
    ReplicaSet controller would (the test ReplicaSet's template is the Deployment's)."""
    pod = serving_pod(ns, replica_set_of(cp, ns, deployment), name)
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(pod))


def new_job(cp: ControlPlane, ns: str, old: str) -> str:
    def moved() -> bool:
        warmup = get(cp, "-n", ns, "sdd", NAME)["status"].get("warmup") or {}
        return bool(warmup.get("jobName")) and warmup["jobName"] != old

    assert eventually(moved, 60), "no new warmup Job"
    return str(get(cp, "-n", ns, "sdd", NAME)["status"]["warmup"]["jobName"])


def test_a_changed_template_gets_a_new_claim_and_the_old_one_goes_once_unused(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    cp, ns = control_plane, module_namespace
    # A claim labelled like ours but made by someone else: never deleted.
    labels = {"warmgate.dev/name": NAME, "warmgate.dev/component": "recipe-cache"}
    foreign = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": f"{NAME}-recipe-cache-foreign", "namespace": ns, "labels": labels},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(foreign))
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(sdd_with_template(ns, "10Gi")))
    cp.kubectl(
        "wait", "-n", ns, f"sdd/{NAME}", "--for=jsonpath={.status.warmup.jobName}", "--timeout=90s"
    )
    obj = get(cp, "-n", ns, "sdd", NAME)
    uid, warmup = obj["metadata"]["uid"], obj["status"]["warmup"]
    owned = {n for n, c in claims(cp, ns).items() if c["metadata"].get("ownerReferences")}
    (first,) = owned
    assert first.startswith(f"{NAME}-recipe-cache-")
    assert claims(cp, ns)[first]["metadata"]["ownerReferences"][0]["uid"] == uid
    job = get(cp, "-n", ns, "job", warmup["jobName"])
    assert claim_of(job) == first
    # The runner is told who uses the claim's entries (read from the real API server).
    plan = json.loads(get(cp, "-n", ns, "configmap", warmup["jobName"])["data"]["plan.json"])
    assert uid in plan["cache"]["users"]["owners"]
    assert warmup["cacheKey"] in plan["cache"]["users"]["keys"]

    warmed(cp, ns, warmup["jobName"], warmup["cacheKey"])
    cp.kubectl("wait", "-n", ns, f"sdd/{NAME}", "--for=condition=Warmed", "--timeout=60s")
    serving = ("-n", ns, "deployment", "-l", "warmgate.dev/component=serving")
    assert eventually(lambda: bool(get(cp, *serving)["items"]), 60), "no serving Deployment"
    deployment = get(cp, "-n", ns, "deployment", f"{NAME}-serving")
    assert claim_of(deployment) == first
    serve_on_claim(cp, ns, deployment, f"{NAME}-old-pod")
    rolled_out(cp, ns, f"{NAME}-serving", ready=1)
    cp.kubectl("wait", "-n", ns, f"sdd/{NAME}", "--for=condition=Ready", "--timeout=60s")

    # A changed template: a new claim and a new warmup; the old claim still serves.
    patch = {"spec": {"warmup": {"cache": {"claimTemplate": {"size": "20Gi"}}}}}
    cp.kubectl("patch", "sdd", NAME, "-n", ns, "--type=merge", "-p", json.dumps(patch))
    job_name = new_job(cp, ns, warmup["jobName"])
    second = claim_of(get(cp, "-n", ns, "job", job_name))
    assert second != first
    assert claims(cp, ns)[second]["spec"]["resources"]["requests"]["storage"] == "20Gi"
    assert not eventually(lambda: deleted(cp, ns, first), 3), (
        "deleted while the Deployment mounts it"
    )

    # Verified on the new claim: the Deployment moves to it, an old Pod still runs on the old.
    key = get(cp, "-n", ns, "sdd", NAME)["status"]["warmup"]["cacheKey"]
    warmed(cp, ns, job_name, key)
    assert eventually(
        lambda: claim_of(get(cp, "-n", ns, "deployment", f"{NAME}-serving")) == second, 60
    )
    assert not eventually(lambda: deleted(cp, ns, first), 3), "deleted while a Pod mounts it"

    # The old Pod is gone: the old claim goes; the new one and the foreign one stay.
    cp.kubectl(
        "delete", "pod", f"{NAME}-old-pod", "-n", ns, "--grace-period=0", "--force", "--wait=false"
    )
    assert eventually(lambda: deleted(cp, ns, first), 60), "the old claim was not deleted"
    assert not deleted(cp, ns, second)
    assert not deleted(cp, ns, foreign["metadata"]["name"])
    events = get(cp, "-n", ns, "events", "--field-selector", f"involvedObject.name={NAME}")["items"]
    assert any(f"Deleted recipe-cache claim {first}" in e.get("message", "") for e in events)


def test_an_upgrade_keeps_the_claim_an_earlier_build_made_from_the_template(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    """Earlier builds named the claim `<parent>-recipe-cache`. The operator is paused while
    the object and such a claim (controlled by it, from the same template) are made, as an
    older build would have left them; resumed, it mounts that claim and makes no new one."""
    cp, ns, name = control_plane, module_namespace, "upgraded"
    doc = sdd_with_template(ns, "10Gi")
    doc["metadata"]["name"] = name
    os.kill(operator.proc.pid, signal.SIGSTOP)
    try:
        cp.kubectl("apply", "-f", "-", stdin=json.dumps(doc))
        uid = get(cp, "-n", ns, "sdd", name)["metadata"]["uid"]
        owner = {"apiVersion": "warmgate.dev/v1alpha1", "kind": "SpecDecodeDeployment"}
        owner |= {"name": name, "uid": uid, "controller": True, "blockOwnerDeletion": True}
        labels = {"warmgate.dev/name": name, "warmgate.dev/component": "recipe-cache"}
        meta = {"name": f"{name}-recipe-cache", "namespace": ns, "labels": labels}
        spec = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "10Gi"}}}
        claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "spec": spec}
        claim["metadata"] = {**meta, "ownerReferences": [owner]}
        cp.kubectl("apply", "-f", "-", stdin=json.dumps(claim))
    finally:
        os.kill(operator.proc.pid, signal.SIGCONT)
    cp.kubectl(
        "wait", "-n", ns, f"sdd/{name}", "--for=jsonpath={.status.warmup.jobName}", "--timeout=90s"
    )
    job = get(cp, "-n", ns, "job", get(cp, "-n", ns, "sdd", name)["status"]["warmup"]["jobName"])
    assert claim_of(job) == f"{name}-recipe-cache"
    mine = [n for n in claims(cp, ns) if n.startswith(f"{name}-")]
    assert mine == [f"{name}-recipe-cache"]


def test_a_forged_cache_key_is_left_out_of_the_users_the_runner_is_told(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    """Anyone who may create Deployments can label one as warmgate's serving Deployment and
    annotate any cache key. A key that can name an entry is kept (it can only keep an entry);
    one that cannot is dropped: the runner refuses a plan that carries it, so a forged
    annotation would have failed every warmup of the namespace."""
    cp, ns, name = control_plane, module_namespace, "forged-users"
    labels = {"app": "forged", "warmgate.dev/component": "serving"}
    forged = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "forged-serving",
            "namespace": ns,
            "labels": labels,
            "annotations": {"warmgate.dev/cache-key": "../../not a key"},
        },
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {"warmgate.dev/cache-key": "someone-elses-key"},
                },
                "spec": {"containers": [{"name": "c", "image": "localhost/none:1"}]},
            },
        },
    }
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(forged))
    doc = sdd_with_template(ns, "10Gi")
    doc["metadata"]["name"] = name
    done = cp.kubectl("apply", "-f", "-", stdin=json.dumps(doc), check=False)
    assert done.returncode == 0, done.stderr
    cp.kubectl(
        "wait", "-n", ns, f"sdd/{name}", "--for=jsonpath={.status.warmup.jobName}", "--timeout=90s"
    )
    warmup = get(cp, "-n", ns, "sdd", name)["status"]["warmup"]
    raw = json.loads(get(cp, "-n", ns, "configmap", warmup["jobName"])["data"]["plan.json"])
    keys = raw["cache"]["users"]["keys"]
    assert "someone-elses-key" in keys
    assert warmup["cacheKey"] in keys
    assert not [k for k in keys if "not a key" in k]
    # The runner's own parser takes the plan (it refused it before the fix).
    plan = parse_plan(raw)
    assert plan.cache.users is not None
    assert "someone-elses-key" in plan.cache.users.keys
