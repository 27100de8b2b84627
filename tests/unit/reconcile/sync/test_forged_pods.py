"""Issue 23 item 3: a Pod made to look like the warmup Job's never gives Warmed=True.

Anyone who may create Pods can give one the Job's controller-uid label, a controller owner
reference to the Job and the Job controller's tracking finalizer; the Job controller adopts
it and counts its success. The verdict is read only from a Pod that runs the pod template
the operator wrote into the Job. Each test builds the Job from the operator's own manifest
(`desired_children`) and the Pods as the API server would store them.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from functools import cache
from typing import Any

from support.examples import example_sdd
from support.kube_objects import job_status, runner_summary, terminated_status, warmup_pod

from warmgate.api import SpecDecodeDeployment
from warmgate.reconcile.planning.evaluate import PlanningResult, evaluate
from warmgate.reconcile.sync.actions import Create, Decision, Delete
from warmgate.reconcile.sync.decide import decide
from warmgate.reconcile.sync.observed import Observed
from warmgate.reconcile.sync.pod_template import job_mismatch, template_mismatch
from warmgate.reconcile.sync.subject import warmup_target
from warmgate.reconcile.sync.warmup_state import evaluate_warmup, owned_pods
from warmgate.resources import desired_children
from warmgate.settings import Settings

NS, NAME, UID = "llm", "forged", "6f1c2d3e-0000-4000-8000-0000000000bb"
JOB_UID = "job-uid"
AT = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SETTINGS = Settings(operator_image="warmgate:test")
# What a namespace user's Pod runs instead of the runner: it just says "verified".
FORGER = ["/bin/sh", "-c", "cat /verified > /dev/termination-log"]


@cache
def _planned() -> tuple[SpecDecodeDeployment, PlanningResult]:
    sdd = example_sdd("llama31-8b-seeds", namespace=NS, name=NAME, uid=UID)
    return sdd, evaluate(sdd)


def _children() -> Any:
    sdd, result = _planned()
    target = warmup_target(sdd, result)
    assert target is not None
    return desired_children(sdd, target[0], SETTINGS)


def _job(ok: bool | None = True) -> dict[str, Any]:
    """The operator's Job as stored; ``ok``: Complete (True), Failed (False) or running."""
    job = copy.deepcopy(_children().warmup_job)
    job["metadata"].update(uid=JOB_UID, creationTimestamp="2026-11-29T11:59:00Z")
    job["status"] = {"active": 1} if ok is None else job_status(ok)
    return job


def _defaulted(template: dict[str, Any]) -> dict[str, Any]:
    """The template as the API server stores it in a Pod: defaults and admission's additions."""
    spec = copy.deepcopy(template["spec"])
    for container in [*spec["containers"], *spec.get("initContainers", [])]:
        container.update(imagePullPolicy="IfNotPresent")
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        for var in container.get("env") or []:
            ref = (var.get("valueFrom") or {}).get("fieldRef")
            if ref is not None:
                ref["apiVersion"] = "v1"
        for mount in container.get("volumeMounts") or []:
            mount.setdefault("readOnly", False)
    for volume in spec["volumes"]:
        if "configMap" in volume:
            volume["configMap"]["defaultMode"] = 420
    spec.update(dnsPolicy="ClusterFirst", schedulerName="default-scheduler", priority=0)
    spec["tolerations"] = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}]
    return {"metadata": template.get("metadata", {}), "spec": spec}


def _pod(job: dict[str, Any], suffix: str, said: str | None, ok: bool = True) -> dict[str, Any]:
    """A Pod with the Job's label, owner reference and tracking finalizer, running the Job's
    template as the server defaults it, its runner's summary saying ``said``."""
    template = _defaulted(job["spec"]["template"])
    pod = warmup_pod(NS, job["metadata"]["name"], JOB_UID, suffix, template=template)
    pod["metadata"]["creationTimestamp"] = f"2026-11-29T11:59:0{len(suffix)}Z"
    summary = None if said is None else runner_summary(said, _children().cache_key)
    pod["status"] = terminated_status(summary, ok)
    return pod


def _forged(job: dict[str, Any], ok: bool = True) -> dict[str, Any]:
    """The namespace user's Pod: the Job's metadata, its own command, a "verified" summary."""
    pod = _pod(job, "forged", "verified", ok)
    warmup = next(c for c in pod["spec"]["containers"] if c["name"] == "warmup")
    warmup["command"] = FORGER
    return pod


def _decided(seen: Observed) -> Decision:
    sdd, result = _planned()
    return decide(sdd, result, seen, SETTINGS)


def _warmed(decision: Decision) -> tuple[str, str]:
    (warmed,) = [c for c in decision.status.conditions or [] if c.type == "Warmed"]
    return warmed.status, warmed.reason


def test_a_forged_pod_the_job_counted_gives_no_warmed_and_the_plan_is_warmed_again() -> None:
    """The forged Pod completed the Job (the Job controller counted its success and stopped
    the runner's Pod): the outcome is nobody's verdict; the Job is deleted with a Warning
    Event naming the Pod, so the next sync warms the plan again instead of staying stuck."""
    job = _job(ok=True)
    real = _pod(job, "r", None, ok=False)  # the runner's Pod, stopped by the Job controller
    forged = _forged(job)
    assert owned_pods(job, [real, forged]) == [real]
    decision = _decided(Observed(at=AT, jobs=(job,), job_pods={JOB_UID: (real, forged)}))
    assert _warmed(decision) == ("False", "WarmupPending")
    (delete,) = [a for a in decision.actions if isinstance(a, Delete)]
    assert delete.kind == "Job"
    assert delete.done is not None
    assert (delete.done.type, delete.done.reason) == ("Warning", "UntrustedPod")
    assert forged["metadata"]["name"] in delete.done.message
    assert "container warmup: command differs" in delete.done.message
    assert f"{job['metadata']['name']} completed while it counted Pod" in delete.done.message
    assert not any(isinstance(a, Create) for a in decision.actions)


def test_a_pod_that_runs_the_jobs_template_is_the_runner_and_is_trusted() -> None:
    """Same metadata, the operator's exact containers: the real runner ran the real plan."""
    job = _job(ok=True)
    pod = _pod(job, "r", "verified")
    decision = _decided(Observed(at=AT, jobs=(job,), job_pods={JOB_UID: (pod,)}))
    assert _warmed(decision) == ("True", "WarmupSucceeded")


def test_the_runners_verdict_stands_beside_a_forged_failure() -> None:
    job = _job(ok=True)
    pods = (_pod(job, "r", "verified"), _forged(job, ok=False))
    assert evaluate_warmup(job, list(pods), _children().cache_key).verdict.status == "True"


def test_a_job_failed_with_a_forged_pod_is_warmed_again_not_stalled() -> None:
    """A forged Pod that exits with a permanent code fails the Job by its podFailurePolicy:
    the object is not left Stalled on someone else's failure."""
    job = _job(ok=False)
    state = evaluate_warmup(job, [_forged(job, ok=False)], _children().cache_key)
    assert (state.verdict.status, state.rerun, state.stalled) == ("False", True, False)
    assert state.untrusted is not None
    assert "failed while it counted Pod" in state.verdict.message


def test_what_the_api_server_defaults_is_no_mismatch_but_each_operator_field_is() -> None:
    template = _job()["spec"]["template"]
    pod = _defaulted(template)
    assert template_mismatch(pod, template) is None
    for field, value in [("image", "other:1"), ("args", ["x"]), ("workingDir", "/tmp")]:
        changed = copy.deepcopy(pod)
        changed["spec"]["containers"][0][field] = value
        assert template_mismatch(changed, template) == f"container warmup: {field} differs"
    changed = copy.deepcopy(pod)
    changed["spec"]["initContainers"][0]["command"] = ["sh", "-c", "cp /fake /runner"]
    assert template_mismatch(changed, template) == "container copy-runner: command differs"
    changed = copy.deepcopy(pod)
    changed["spec"]["containers"][0]["env"].append({"name": "PYTHONPATH", "value": "/evil"})
    assert template_mismatch(changed, template) == "container warmup: env differs"
    changed = copy.deepcopy(pod)
    (plan,) = [v for v in changed["spec"]["volumes"] if v["name"] == "plan"]
    plan["configMap"]["name"] = "my-own-plan"
    assert template_mismatch(changed, template) == "volume plan differs"


def test_a_sidecar_that_reaches_the_runner_is_refused_and_one_that_does_not_is_allowed() -> None:
    template = _job()["spec"]["template"]
    pod = _defaulted(template)
    own = {"name": "mesh", "image": "proxy:1", "volumeMounts": [{"name": "m", "mountPath": "/m"}]}
    pod["spec"]["containers"].append(own)
    pod["spec"]["volumes"].append({"name": "m", "emptyDir": {}})
    assert template_mismatch(pod, template) is None  # a webhook's sidecar, on its own volume
    reaching = copy.deepcopy(pod)
    reaching["spec"]["containers"][-1]["volumeMounts"].append({"name": "runner", "mountPath": "/r"})
    assert template_mismatch(reaching, template) == "container mesh mounts runner"
    shared = copy.deepcopy(pod)
    shared["spec"]["shareProcessNamespace"] = True
    assert template_mismatch(shared, template) == "it shares its process namespace"
    host = copy.deepcopy(pod)
    host["spec"]["volumes"][-1] = {"name": "m", "hostPath": {"path": "/var/lib/kubelet"}}
    assert template_mismatch(host, template) == "volume m is a hostPath"


def test_a_job_under_the_operators_name_with_another_template_is_not_owned() -> None:
    """The operator's Job deleted and made again under its name, with the owner reference
    copied and a template of one's own: its Pods run that template, so reading them would
    take a forged verdict. The Job is NotOwned, and nothing of it is read or changed."""
    job = _job(ok=True)
    job["spec"]["template"]["spec"]["containers"][0]["command"] = FORGER
    assert job_mismatch(job, _children().warmup_job) == "container warmup: command differs"
    pod = _pod(job, "f", "verified")
    decision = _decided(Observed(at=AT, jobs=(job,), job_pods={JOB_UID: (pod,)}))
    assert _warmed(decision) == ("False", "NotOwned")
    assert not [a for a in decision.actions if getattr(a, "kind", "") == "Job"]


def test_the_operators_job_as_the_api_server_stores_it_is_its_own() -> None:
    """The stored Job's template carries the server's defaults (the init container's
    terminationMessagePath, which the operator does not set): no mismatch, and the Pods the
    Job controller makes from it give the verdict."""
    job = _job(ok=True)
    job["spec"]["template"] = _defaulted(job["spec"]["template"])
    assert job_mismatch(job, _children().warmup_job) is None
    pod = _pod(job, "r", "verified")
    decision = _decided(Observed(at=AT, jobs=(job,), job_pods={JOB_UID: (pod,)}))
    assert _warmed(decision) == ("True", "WarmupSucceeded")


def test_a_job_of_the_same_plan_under_another_name_still_matches() -> None:
    """Each Job mounts the plan.json ConfigMap named after itself."""
    job = _job()
    renamed = copy.deepcopy(job)
    renamed["metadata"]["name"] = "forged-warmup-0123456789"
    for volume in renamed["spec"]["template"]["spec"]["volumes"]:
        if volume.get("configMap", {}).get("name") == job["metadata"]["name"]:
            volume["configMap"]["name"] = renamed["metadata"]["name"]
    assert job_mismatch(renamed, _children().warmup_job) is None
