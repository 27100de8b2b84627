"""What makes a warmup new (issue 11): content-named Jobs, re-warm, the claim, deadlines, security.

A fixed spec's children are one pure function of their inputs (test_resources_builders.py);
these tests change one input at a time and check what moves: the Job (and its plan.json) must
follow everything it contains, the cache key only what changes the graphs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from support.examples import example_sdd
from support.resource_cases import SETTINGS, UID, planned

from warmgate.api import SpecDecodeDeployment
from warmgate.api.constants import ANNOTATION_CACHE_CLAIM_UID, ANNOTATION_REWARM
from warmgate.resources import Children, desired_children
from warmgate.resources.warmup_children import (
    TERMINATION_GRACE_S,
    job_deadline_s,
    pod_failure_backoff_s,
)

STEM = "llama31-8b-seeds"


def _sdd(annotations: dict[str, str] | None = None, **spec: Any) -> SpecDecodeDeployment:
    sdd = example_sdd(STEM, namespace="llm", name="served", uid=UID, **spec)
    if annotations:
        meta = sdd.metadata.model_copy(update={"annotations": annotations})
        sdd = sdd.model_copy(update={"metadata": meta})
    return sdd


def _children(sdd: SpecDecodeDeployment, claim_uid: str | None = None) -> Children:
    return desired_children(sdd, replace(planned(sdd), cache_claim_uid=claim_uid), SETTINGS)


def _names(children: Children) -> tuple[str, str, str, str]:
    return (
        children.cache_key,
        children.plan_configmap["metadata"]["name"],
        children.warmup_configmap["metadata"]["name"],
        children.warmup_job["metadata"]["name"],
    )


BASE = _children(_sdd())


@pytest.mark.parametrize(
    "warmup",
    [
        {"timeoutSeconds": 7200},
        {"retries": 5},
        {"pendingTimeoutSeconds": 600},
        {"placement": {"nodeSelector": {"habana.ai/gaudi.generation": "gaudi2"}}},
        {"resources": {"requests": {"memory": "64Gi"}}},
        {"probeWorkload": False},
    ],
    ids=lambda w: next(iter(w)),
)
def test_a_warmup_change_gets_a_new_job_and_plan_file_but_keeps_the_key(
    warmup: dict[str, Any],
) -> None:
    """Item 6: the fix of a failed warmup takes effect (a new Job, never the old plan.json)."""
    key, seeds, plan_file, job = _names(_children(_sdd(warmup=warmup)))
    assert (key, seeds) == _names(BASE)[:2]  # no graph changed: same key, same seed file
    assert plan_file != _names(BASE)[2]
    assert job != _names(BASE)[3]


def test_the_same_spec_gets_the_same_job() -> None:
    assert _names(_children(_sdd())) == _names(BASE)


def test_a_rewarm_annotation_is_a_new_cache_key_and_a_new_job() -> None:
    """Item 6: `warmgate.dev/rewarm` warms again, from an empty cache entry."""
    first = _names(_children(_sdd({ANNOTATION_REWARM: "2026-12-01T10:00:00Z"})))
    again = _names(_children(_sdd({ANNOTATION_REWARM: "2026-12-01T11:00:00Z"})))
    assert len({first, again, _names(BASE)}) == 3
    assert all(len({a, b, c}) == 3 for a, b, c in zip(first, again, _names(BASE), strict=True))
    assert _names(_children(_sdd({"example.com/unrelated": "x"}))) == _names(BASE)


def test_a_replaced_cache_claim_gets_a_new_job() -> None:
    """Item 7: the claim's UID is part of the Job, so a new claim means a new warmup."""
    spec = {"cache": {"claimTemplate": {"size": "100Gi"}}}
    old = _children(_sdd(warmup=spec), claim_uid="uid-old")
    new = _children(_sdd(warmup=spec), claim_uid="uid-new")
    assert old.cache_key == new.cache_key
    assert _names(old)[3] != _names(new)[3]
    annotations = new.warmup_job["metadata"]["annotations"]
    assert annotations[ANNOTATION_CACHE_CLAIM_UID] == "uid-new"


def test_the_job_controllers_backoff_schedule() -> None:
    """k8s v1.37 job controller: 10 s doubled per failure, capped at 10 minutes."""
    assert [pod_failure_backoff_s(n) for n in range(1, 9)] == [10, 20, 40, 80, 160, 320, 600, 600]


def _worst_case_s(timeout: int, retries: int, pending: int) -> int:
    """Every attempt stays Pending as long as allowed, then runs to its deadline and is
    killed (grace included); the controller waits its backoff before each retry."""
    clock = 0
    for attempt in range(retries + 1):
        clock += pod_failure_backoff_s(attempt)
        clock += pending + timeout + TERMINATION_GRACE_S
    return clock


@pytest.mark.parametrize("retries", [0, 2, 6, 10])
def test_the_job_deadline_holds_every_attempt_with_its_backoff(retries: int) -> None:
    """Item 14: with retries 6 the backoffs alone are 630 s, more than the old 300 s margin, so
    the Job's deadline killed the last attempt before its own deadline."""
    warmup = {"timeoutSeconds": 3600, "retries": retries, "pendingTimeoutSeconds": 1800}
    sdd = _sdd(warmup=warmup)
    job = _children(sdd).warmup_job
    deadline = job["spec"]["activeDeadlineSeconds"]
    assert deadline == job_deadline_s(sdd.spec.warmup)
    assert deadline >= _worst_case_s(3600, retries, 1800)
    assert deadline <= _worst_case_s(3600, retries, 1800) + 120  # and not much more


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod.get("initContainers", []), *pod["containers"]]


def _pods(children: Children) -> list[dict[str, Any]]:
    return [
        children.warmup_job["spec"]["template"]["spec"],
        children.serving_deployment["spec"]["template"]["spec"],
    ]


def test_both_pods_are_hardened_by_default() -> None:
    """Item 10: no API token, the runtime's seccomp profile, no privilege escalation."""
    for pod in _pods(_children(_sdd(warmup={"cache": {"claimTemplate": {"size": "100Gi"}}}))):
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in _containers(pod):
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
            assert "privileged" not in container["securityContext"]
        volumes = {next(k for k in v if k != "name") for v in pod["volumes"]}
        assert volumes <= {"configMap", "emptyDir", "persistentVolumeClaim"}  # no hostPath


RESTRICTED_POD = {
    "seccompProfile": {"type": "RuntimeDefault"},
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "fsGroup": 1000,
}


@pytest.mark.parametrize(
    "spec",
    [
        {},  # issue 23 item 14: restricted by default, user 1000
        {"runAsUser": 1000},  # issue 11 item 10: as before with a user named
        {"podSecurity": "restricted"},
    ],
)
def test_every_container_is_non_root_without_capabilities_by_default(spec: dict[str, Any]) -> None:
    """The Pods meet Pod Security "restricted" unless the spec opts out."""
    sdd = _sdd(**spec, warmup={"cache": {"claimTemplate": {"size": "100Gi"}}})
    for pod in _pods(_children(sdd)):
        assert pod["securityContext"] == RESTRICTED_POD
        for container in _containers(pod):
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False
            assert security["capabilities"] == {"drop": ["ALL"]}
            assert security["runAsNonRoot"] is True
            assert "runAsUser" not in security  # the Pod's user wins over the image's


def test_baseline_keeps_the_images_user_and_capabilities() -> None:
    """The opt-out for images that need root or capabilities (Gaudi device files)."""
    sdd = _sdd(podSecurity="baseline")
    for pod in _pods(_children(sdd)):
        assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
        engine = pod["containers"][0]["securityContext"]
        assert engine == {"allowPrivilegeEscalation": False}
    named = _sdd(podSecurity="baseline", runAsUser=4242)
    for pod in _pods(_children(named)):
        assert pod["securityContext"]["runAsUser"] == 4242
        assert "capabilities" not in pod["containers"][0]["securityContext"]


def _token_env(sdd: Any) -> list[list[str]]:
    """The containers' env names holding the Hub token, per Pod."""
    return [
        [e["name"] for c in _containers(pod) for e in c.get("env", []) if e["name"] == "HF_TOKEN"]
        for pod in _pods(_children(sdd))
    ]


def test_the_hub_token_reaches_only_pods_that_download_from_the_hub() -> None:
    """Issue 23 item 14: weights from a claim, nothing downloaded: no token in the Pods."""
    token = {"tokenSecretRef": {"name": "hf"}}
    hub = _sdd(model={"name": "meta-llama/Llama-3.1-8B-Instruct", **token})
    assert _token_env(hub) == [["HF_TOKEN"], ["HF_TOKEN"]]
    claim = {"weights": {"claimName": "llama-weights", "path": "/llama"}}
    model = {"name": "meta-llama/Llama-3.1-8B-Instruct", **token, **claim}
    # The example's EAGLE-3 draft is a Hub id: still downloaded, so the token stays.
    assert _token_env(_sdd(model=model)) == [["HF_TOKEN"], ["HF_TOKEN"]]
    local_draft = {"method": "eagle3", "numSpeculativeTokens": 2, "draftModel": {"name": "/d"}}
    assert _token_env(_sdd(model=model, speculative=local_draft)) == [[], []]
