"""Scenario n: a namespace user (a ServiceAccount bound to the built-in `edit` ClusterRole, acting
with its own token) forges what the operator reads (issue 23's e2e list and item 3).

`taken`: before the object exists, the user creates a ConfigMap under the name of its seed
file (`<name>-plan-<hash of the cache key>`, computable from the spec alone), a ConfigMap
under the name of its served record (`<name>-served`) and a Service under the serving name,
each labelled like the operator's children, and a Pod that claims to be the warmup Pod
(the operator's labels) whose termination message says "verified". The object is Stalled
with NotOwned naming each name it reaches, is never Warmed from any of them, and nothing of
the user's is modified; once the user deletes them, it warms and serves from its own children.
(The warmup Job's and plan.json ConfigMap's names depend on the object's UID: they cannot be
taken before it exists.)

`forgery`: while the operator's own Job runs the (slow) stand-in warmup, the user creates a
Pod with the Job's controller-uid label, a controller owner reference to the Job and the Job
controller's tracking finalizer, whose container exits 0 with a "verified" summary for the
plan's cache key (and a marker KV block count, 4242). Beside the runner's active Pod, the real
Job controller mostly deletes it as one Pod too many (parallelism 1; recorded, not judged). The user
then deletes the runner's Pod and forges again while the Job waits out its retry backoff: the
Job controller adopts that Pod, counts its success and completes the Job. (Now and then the Job
controller keeps the first forged Pod instead, counts it and removes the runner's Pod: the Job
has then ended from the forgery already, and the second is not made.) The operator never
reads it as the verdict (Warning Event UntrustedPod naming the Pod and the Job's end, the plan
warmed again by a new Job), and the object goes Ready from its own runner.
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
    Sampler,
    condition,
    is_true,
    restricted_container,
    running_runner,
    sdd,
    wait_for,
)
from support.kube_objects import runner_summary

from warmgate.api import SpecDecodeDeployment
from warmgate.reconcile.planning.evaluate import evaluate
from warmgate.reconcile.sync.subject import warmup_target
from warmgate.resources import desired_children
from warmgate.settings import Settings

TAKEN, FORGERY = "taken", "forgery"
MARKER_KV_BLOCKS = 4242
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
TRACKING = "batch.kubernetes.io/job-tracking"


def _names(manifest: Manifest, operator_image: str) -> dict[str, str]:
    """The names the operator will use, computed from the spec as anyone can (warmgate's own
    planning, in this process): the seed ConfigMap, the served record, the Service."""
    obj = SpecDecodeDeployment.model_validate(
        {**manifest, "metadata": {**manifest["metadata"], "uid": "any", "generation": 1}}
    )
    result = evaluate(obj)
    target = warmup_target(obj, result)
    assert target is not None
    children = desired_children(obj, target[0], Settings(operator_image=operator_image))
    name = manifest["metadata"]["name"]
    return {
        "seed": children.plan_configmap["metadata"]["name"],
        "served": f"{name}-served",
        "service": children.service["metadata"]["name"],
    }


def _looks_like(name: str, component: str) -> dict[str, str]:
    return {"warmgate.dev/name": name, "warmgate.dev/component": component}


def _exits_saying(name: str, image: str, message: str, labels: dict[str, str]) -> Manifest:
    """A Pod (Pod Security restricted) whose only container writes ``message`` as its
    termination message and exits 0."""
    container = {
        "name": "warmup",
        "image": image,
        "imagePullPolicy": "Never",
        "command": ["/bin/sh", "-c", 'printf "%s" "$SAY" > /dev/termination-log'],
        "env": [{"name": "SAY", "value": message}],
        "securityContext": restricted_container(),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "containers": [container],
        },
    }


def _pre_create(intruder: EditUser, names: dict[str, str], image: str) -> dict[str, Manifest]:
    """The user's objects under the operator's names, made before the object exists."""
    made = {
        "seed": intruder.create({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": names["seed"], "labels": _looks_like(TAKEN, "plan")},
            "data": {"buckets.txt": "# the intruder's seed file\n"},
        }),
        "served": intruder.create({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": names["served"], "labels": _looks_like(TAKEN, "served")},
            "data": {"warmup": json.dumps({"cacheKey": "forged"})},
        }),
        "service": intruder.create({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": names["service"], "labels": _looks_like(TAKEN, "serving")},
            "spec": {"selector": {"app": "intruder"}, "ports": [{"port": 8000}]},
        }),
    }  # fmt: skip
    said = json.dumps(runner_summary("verified", "gaudi2-tp1-forged", kv_blocks=MARKER_KV_BLOCKS))
    pod = _exits_saying(f"{TAKEN}-warmup-forged", image, said, _looks_like(TAKEN, "warmup"))
    made["pod"] = intruder.create(pod)
    return made


def _forge(intruder: EditUser, job: Manifest, image: str, suffix: str) -> Manifest:
    """The Pod that claims to be the Job's: its controller-uid label, a controller owner
    reference to it, the Job controller's tracking finalizer; it says "verified"."""
    meta, key = job["metadata"], job["metadata"]["annotations"]["warmgate.dev/cache-key"]
    said = json.dumps(runner_summary("verified", key, kv_blocks=MARKER_KV_BLOCKS))
    labels = {
        **(job["spec"]["template"]["metadata"].get("labels") or {}),
        CONTROLLER_UID: meta["uid"],
        "batch.kubernetes.io/job-name": meta["name"],
    }
    pod = _exits_saying(f"{meta['name'][:50]}-{suffix}", image, said, labels)
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "uid": meta["uid"],
         "controller": True},
    ]  # fmt: skip
    pod["metadata"]["finalizers"] = [TRACKING]
    return intruder.create(pod)


def _stalled_naming(obj: Manifest | None, name: str) -> bool:
    stalled = condition(obj, "Stalled")
    return stalled.get("reason") == "NotOwned" and name in str(stalled.get("message"))


@pytest.fixture(scope="module")
def run(e2e: E2ECluster, namespace: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    ns, image = namespace, e2e.images.engine.ref
    intruder = EditUser(e2e, ns, tmp_path_factory.mktemp("intruder"), "intruder")
    found: dict[str, Any] = {"whoami": intruder.kubectl("auth", "whoami", "-o", "json").stdout}
    rights = ("create pods", "patch specdecodedeployments.warmgate.dev/status")
    found["can"] = {right: _can(intruder, right) for right in rights}
    taken = sdd(TAKEN, ns, image)
    names = _names(taken, e2e.images.operator.ref)
    found["names"], found["theirs"] = names, _pre_create(intruder, names, image)
    e2e.apply(sdd(FORGERY, ns, image, faults="slow_warmup=25"))
    e2e.apply(taken)

    def probe() -> Manifest:
        objects = {n: e2e.get_or_none("sdd", "-n", ns, n) for n in (TAKEN, FORGERY)}
        pods = [_brief(p) for p in e2e.items("pods", ns, FORGERY)]
        return {**objects, "jobs": e2e.items("jobs", ns, FORGERY), "pods": pods}

    marks: dict[str, float] = {"applied": time.monotonic()}
    with Sampler(probe) as sampler:
        _forgery_steps(e2e, intruder, ns, found, marks)  # while the slow runner runs
        _taken_steps(e2e, intruder, ns, found, marks)
        for name in (TAKEN, FORGERY):
            e2e.wait_ready(ns, name, timeout_s=240, check=True)
        marks["both Ready"] = time.monotonic()
    found["samples"], found["marks"] = sampler.samples, marks
    found["events"] = e2e.get("events", "-n", ns)["items"]
    found["logs"] = _logs(e2e, found)
    for what, at in marks.items():
        print(f"scenario n: {what}: {at - marks['applied']:.1f} s after the apply")
    return found


def _brief(pod: Manifest) -> Manifest:
    """What the timeline shows of a Pod: who made it, its phase, finalizers, deletion."""
    meta, status = pod["metadata"], pod.get("status") or {}
    return {
        "name": meta["name"],
        "owner": [o.get("uid") for o in meta.get("ownerReferences") or []],
        "phase": status.get("phase"),
        "finalizers": meta.get("finalizers"),
        "deleting": bool(meta.get("deletionTimestamp")),
    }


def _logs(e2e: E2ECluster, found: dict[str, Any]) -> list[str]:
    """The controller-manager's and the operator's log lines about the forged Pod or its Job."""
    forged = (found[f]["metadata"]["name"] for f in ("forged", "forged2") if f in found)
    words = (*forged, "UntrustedPod")
    path = e2e.control_plane_logs / "kube-controller-manager.log"
    lines = path.read_text(errors="replace").splitlines() if path.exists() else []
    operator = e2e.kubectl("logs", "-n", "warmgate-system", "deploy/warmgate", check=False)
    lines += operator.stdout.splitlines()
    return [line[:400] for line in lines if any(w in line for w in words)]


def _can(intruder: EditUser, right: str) -> str:
    """`kubectl auth can-i` as the user: yes or no (it exits 1 on no)."""
    return intruder.kubectl("auth", "can-i", *right.split(), check=False).stdout.strip()


def _taken_steps(
    e2e: E2ECluster, intruder: EditUser, ns: str, found: dict[str, Any], marks: dict[str, float]
) -> None:
    """NotOwned naming the seed ConfigMap; the user deletes it; NotOwned naming what serving
    reaches next; the user deletes the rest."""
    names = found["names"]

    def stalled_on(*held: str) -> Manifest | None:
        obj = e2e.get("sdd", "-n", ns, TAKEN)
        return obj if any(_stalled_naming(obj, name) for name in held) else None

    what = "taken: Stalled NotOwned naming the seed ConfigMap"
    found["stalled on seed"] = wait_for(what, lambda: stalled_on(names["seed"]), 60)
    marks["taken: Stalled on the seed ConfigMap"] = time.monotonic()
    found["jobs while stalled"] = e2e.items("jobs", ns, TAKEN)
    found["theirs while stalled"] = _theirs(e2e, ns, found["theirs"])
    intruder.kubectl("delete", "configmap", names["seed"])
    marks["taken: the user deleted the seed ConfigMap"] = time.monotonic()
    what = "taken: Stalled NotOwned naming the Service or the served record"
    found["stalled on serving"] = wait_for(
        what, lambda: stalled_on(names["service"], names["served"]), 180
    )
    marks["taken: Stalled on a serving name"] = time.monotonic()
    found["theirs while warmed"] = _theirs(e2e, ns, found["theirs"])
    intruder.kubectl("delete", "service", names["service"])
    intruder.kubectl("delete", "configmap", names["served"])
    marks["taken: the user deleted the rest"] = time.monotonic()


def _theirs(e2e: E2ECluster, ns: str, theirs: dict[str, Manifest]) -> dict[str, Manifest | None]:
    """The user's objects as they are now (None: gone)."""
    kinds = {"seed": "configmap", "served": "configmap", "service": "service", "pod": "pod"}
    return {
        key: e2e.get_or_none(kinds[key], "-n", ns, obj["metadata"]["name"])
        for key, obj in theirs.items()
    }


def _forgery_steps(
    e2e: E2ECluster, intruder: EditUser, ns: str, found: dict[str, Any], marks: dict[str, float]
) -> None:
    """Two forged Pods: one while the runner's Pod is active (the Job has its one Pod), one in
    the Job's retry backoff after the user deleted the runner's Pod (the Job has none)."""
    runner = wait_for("forgery: the runner runs", lambda: running_runner(e2e, ns, FORGERY), 180)
    job_name = runner["metadata"]["labels"]["batch.kubernetes.io/job-name"]
    job = e2e.get("job", "-n", ns, job_name)
    found["job"], found["runner"] = job, runner
    found["forged"] = _forge(intruder, job, e2e.images.engine.ref, "forged")
    marks["forgery: forged Pod created beside the runner's"] = time.monotonic()
    found["forged ended"] = _ended(e2e, ns, found["forged"], 90)
    marks["forgery: forged Pod ended"] = time.monotonic()
    time.sleep(3)  # the Job controller's next pass over the Job
    found["job after"] = e2e.get_or_none("job", "-n", ns, job_name)
    found["forged after"] = e2e.get_or_none("pod", "-n", ns, found["forged"]["metadata"]["name"])
    found["runner after"] = e2e.get_or_none("pod", "-n", ns, runner["metadata"]["name"])
    found["counted"] = found["forged"]
    if _counted_at_once(e2e, ns, job_name, found["runner after"]):
        # The Job controller took the forged Pod over the runner's: it counted its success,
        # ended the Job and removed the runner's Pod. No second forgery is needed.
        marks["forgery: the Job counted the forged Pod and ended"] = time.monotonic()
        return
    intruder.kubectl("delete", "pod", runner["metadata"]["name"], "--wait=false")
    marks["forgery: the user deleted the runner's Pod"] = time.monotonic()

    def backing_off() -> Manifest | None:
        status = e2e.get("job", "-n", ns, job_name).get("status") or {}
        idle = not status.get("active") and not status.get("terminating")
        return status if int(status.get("failed") or 0) >= 1 and idle else None

    found["job in backoff"] = wait_for("forgery: the Job's retry backoff", backing_off, 120)
    marks["forgery: the Job in its retry backoff"] = time.monotonic()
    found["forged2"] = _forge(intruder, job, e2e.images.engine.ref, "forged2")
    marks["forgery: forged Pod created in the backoff"] = time.monotonic()
    found["forged2 ended"] = _ended(e2e, ns, found["forged2"], 90)
    marks["forgery: second forged Pod ended"] = time.monotonic()
    found["counted"] = found["forged2"]


def _counted_at_once(e2e: E2ECluster, ns: str, job: str, runner: Manifest | None) -> bool:
    """Whether the Job controller, with two Pods for parallelism 1, kept the forged one: the
    runner's Pod is then gone or being deleted, and the Job counts a success (waited for)."""
    if runner is not None and not runner["metadata"].get("deletionTimestamp"):
        return False

    def succeeded() -> bool:
        status = (e2e.get_or_none("job", "-n", ns, job) or {}).get("status") or {}
        return int(status.get("succeeded") or 0) >= 1

    wait_for("forgery: the Job to count the forged Pod's success", succeeded, 60)
    return True


def _ended(e2e: E2ECluster, ns: str, pod: Manifest, timeout: float) -> Manifest:
    """The Pod once it ended, or {"status": {"phase": "deleted"}} once it is gone (the Job
    controller may delete it before it runs)."""
    name = pod["metadata"]["name"]

    def ended() -> Manifest | None:
        found = e2e.get_or_none("pod", "-n", ns, name)
        if found is None:
            return {"status": {"phase": "deleted"}}
        state = (found.get("status") or {}).get("phase")
        return found if state in ("Succeeded", "Failed") else None

    return dict(wait_for(f"forgery: {name} ended", ended, timeout))


def _warmed_samples(run: Any, name: str) -> list[Manifest]:
    return [s.data[name] for s in run["samples"] if is_true(s.data.get(name), "Warmed")]


def test_the_intruder_is_the_edit_service_account_and_cannot_write_the_status(run: Any) -> None:
    assert json.loads(run["whoami"])["status"]["userInfo"]["username"].endswith(":intruder")
    assert run["can"]["create pods"] == "yes"
    assert run["can"]["patch specdecodedeployments.warmgate.dev/status"] == "no"


def test_names_taken_beforehand_stall_with_not_owned_and_nothing_of_theirs_changes(
    run: Any,
) -> None:
    seed = run["stalled on seed"]
    assert not is_true(seed, "Warmed")
    assert run["jobs while stalled"] == []  # the warmup did not start on someone else's seed
    serving = condition(run["stalled on serving"], "Stalled")["message"]
    print(f"scenario n: serving stalled with: {serving}")
    for when in ("theirs while stalled", "theirs while warmed"):
        for key, now in run[when].items():
            if key == "seed" and when == "theirs while warmed":
                continue  # the user deleted it in between
            before = run["theirs"][key]
            assert now is not None, f"{key} was deleted {when}"
            assert now["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"] or (
                key == "pod"  # the kubelet writes the user's Pod's status
            )
            assert now.get("data") == before.get("data")
            assert now["metadata"].get("ownerReferences") == before["metadata"].get(
                "ownerReferences"
            )


def test_the_user_pod_that_claims_to_be_the_warmup_gives_no_verdict(run: Any) -> None:
    for obj in _warmed_samples(run, TAKEN):
        warmup = obj["status"].get("warmup") or {}
        assert warmup.get("kvBlocks") != MARKER_KV_BLOCKS
        assert warmup.get("cacheKey") != "gaudi2-tp1-forged"


def _first_job_seen(run: Any) -> list[Manifest]:
    """The first Job of `forgery` (the one the forged Pod claimed) in every sample."""
    first = run["job"]["metadata"]["uid"]
    return [j for s in run["samples"] for j in s.data["jobs"] if j["metadata"]["uid"] == first]


def _true(job: Manifest, type_: str) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") == type_ and c.get("status") == "True" for c in conditions)


def test_what_the_job_controller_did_with_the_forged_pod(run: Any) -> None:
    """Recorded for docs/operator.md: did the real Job controller adopt, count and complete?"""
    forged = run["forged after"] or {}
    seen = _first_job_seen(run)
    print(f"scenario n: the forged Pod ended {run['forged ended']['status'].get('phase')}")
    print(f"scenario n: its finalizers then: {forged.get('metadata', {}).get('finalizers')}")
    print(f"scenario n: the Job 3 s later: {json.dumps((run['job after'] or {}).get('status'))}")
    most = max((int((j.get("status") or {}).get("succeeded") or 0) for j in seen), default=0)
    kinds = sorted(
        {c["type"] for j in seen for c in (j.get("status") or {}).get("conditions") or []}
    )
    print(f"scenario n: the Job's largest succeeded count {most}, its conditions {kinds}")
    runner = run["runner after"] or {}
    deleting = bool(runner.get("metadata", {}).get("deletionTimestamp"))
    phase = runner.get("status", {}).get("phase")
    print(f"scenario n: the runner's Pod 3 s later: {phase}, being deleted: {deleting}")
    _timeline(run)
    for line in run["logs"]:
        print(f"scenario n: log: {line}")
    assert seen


def _timeline(run: Any) -> None:
    """Each change of the first Job's status and of the `forgery` Pods, by sample time."""
    first, last = run["job"]["metadata"]["uid"], ""
    for sample in run["samples"]:
        jobs = [j.get("status") or {} for j in sample.data["jobs"] if j["metadata"]["uid"] == first]
        status: Manifest = {"gone": True}
        if jobs:
            status = {k: v for k, v in jobs[0].items() if k not in ("conditions", "startTime")}
            status["true"] = [
                c["type"] for c in jobs[0].get("conditions") or [] if c["status"] == "True"
            ]
        now = json.dumps({"job": status, "pods": sample.data["pods"]})
        if now != last:
            print(f"scenario n: t={sample.at:.1f} s {now}")
            last = now


def test_the_forged_pod_never_gives_warmed_and_is_named_in_a_warning(run: Any) -> None:
    first = run["job"]["metadata"]["uid"]
    for obj in _warmed_samples(run, FORGERY):
        warmup = obj["status"]["warmup"]
        assert warmup.get("kvBlocks") != MARKER_KV_BLOCKS
        print(f"scenario n: Warmed by Job {warmup.get('jobName')} uid {warmup.get('jobUid')}")
    for event in run["events"]:
        if event.get("type") == "Warning" and event["involvedObject"].get("name") == FORGERY:
            print(f"scenario n: Event {event['reason']}: {event['message']}")
    # The runner's Pod was deleted: the first Job can only have ended from the forged one.
    warned = [e for e in run["events"] if e.get("reason") == "UntrustedPod"]
    assert warned, "no UntrustedPod Event: the Job did not end with the forged Pod counted"
    assert warned[0]["type"] == "Warning"
    # The Job controller counted the forged Pod's success and completed the Job: the operator
    # says which end it saw (reconcile/sync/warmup_state.py, _untrusted).
    completed = f"{run['job']['metadata']['name']} completed while it counted Pod"
    assert completed in warned[0]["message"]
    assert run["counted"]["metadata"]["name"] in warned[0]["message"]
    warmed_by = {s["status"]["warmup"].get("jobUid") for s in _warmed_samples(run, FORGERY)}
    assert warmed_by
    assert first not in warmed_by


def test_both_objects_end_ready_from_their_own_children(e2e: E2ECluster, namespace: str) -> None:
    for name in (TAKEN, FORGERY):
        obj = e2e.get("sdd", "-n", namespace, name)
        assert is_true(obj, "Ready")
        uid = obj["metadata"]["uid"]
        for kind in ("configmaps", "services", "jobs", "deployments"):
            for child in e2e.items(kind, namespace, name):
                owners = [o["uid"] for o in child["metadata"].get("ownerReferences") or []]
                assert owners == [uid], f"{kind} {child['metadata']['name']} is not {name}'s"
