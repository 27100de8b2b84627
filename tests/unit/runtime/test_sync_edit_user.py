"""Issue 34 at the level of one sync: what a namespace user with `edit` writes decides nothing.

`edit` may write any ConfigMap, annotation, label or owner reference in the namespace and may
create Pods; it may not write the object's status. Each test forges one such input and checks
that the operator does not take it as evidence (the real apiserver and an `edit`-bound
ServiceAccount: tests/integration/test_edit_user.py).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from sync_world import LOG, NAME, NEW_PLAN, NS, World, serving

from warmgate.runtime.sync import refuse_namespace, refused_namespace
from warmgate.settings import Settings, SettingsError


def record(world: World) -> dict[str, Any]:
    return world.cluster.get("ConfigMap", NS, f"{NAME}-served")


def test_the_status_keeps_the_digest_of_the_served_record(world: World) -> None:
    serving(world)
    digest = digest_of(world)
    assert str(digest).startswith("sha256:")
    world.edit(**NEW_PLAN)  # a new plan warms: the served plan's digest stays
    world.sync()
    assert digest_of(world) == digest


def digest_of(world: World) -> str | None:
    status = world.sdd.status
    assert status is not None
    assert status.serving is not None
    return status.serving.record_digest


def test_a_forged_verdict_in_the_served_record_is_not_warmed(world: World) -> None:
    """Case 1: while a new plan warms, the record's warmup.json names the new plan's key and
    the new Job is deleted: the plan is warmed again, never Warmed from the record."""
    serving(world)
    served_template = world.deployment()["spec"]["template"]
    world.edit(**NEW_PLAN)
    world.sync()
    job = world.newest_job()
    key = job["metadata"]["annotations"]["warmgate.dev/cache-key"]
    live = record(world)
    warmup = json.loads(live["data"]["warmup.json"])
    live["data"]["warmup.json"] = json.dumps({**warmup, "cacheKey": key})
    del world.cluster.objects[("Job", NS, job["metadata"]["name"])]
    world.sync()
    assert world.conditions()["Warmed"][0] == "False"
    assert ("Job", NS, job["metadata"]["name"]) in world.cluster.objects  # warmed again
    assert ("ConfigMap", NS, f"{NAME}-served") not in world.cluster.objects
    assert "RecordNotVerified" in world.events.reasons()
    assert world.deployment()["spec"]["template"] == served_template  # not the new plan
    world.sync()
    assert world.conditions()["Warmed"][0] == "False"


def test_a_forged_deployment_in_the_served_record_is_never_created(world: World) -> None:
    """Case 2: the record's deployment.json runs another image, the Deployment is deleted
    while a new plan warms: nothing is restored from the record."""
    serving(world)
    world.edit(**NEW_PLAN)
    world.sync()
    live = record(world)
    deployment = json.loads(live["data"]["deployment.json"])
    for container in deployment["spec"]["template"]["spec"]["containers"]:
        container["image"] = "attacker.example/evil:1"
    live["data"]["deployment.json"] = json.dumps(deployment)
    del world.cluster.objects[("Deployment", NS, f"{NAME}-serving")]
    world.sync()
    world.sync()
    assert ("Deployment", NS, f"{NAME}-serving") not in world.cluster.objects
    assert "Restored" not in world.events.reasons()
    assert "RecordNotVerified" in world.events.reasons()


def test_an_edited_record_of_the_verified_plan_is_written_again(world: World) -> None:
    """While the spec's plan is verified, the record is derived again and rewritten."""
    serving(world)
    live = record(world)
    before = dict(live["data"])
    live["data"]["deployment.json"] = "{}"
    world.sync()
    assert record(world)["data"] == before
    assert "RecordNotVerified" in world.events.reasons()


def test_an_untouched_record_still_restores_the_served_plan(world: World) -> None:
    """The binding keeps issue 23 item 6: the operator's own record restores the Deployment."""
    served = world.deployment_deleted_while_a_new_plan_warms()
    assert world.deployment()["spec"]["template"] == served["spec"]["template"]
    assert "RecordNotVerified" not in world.events.reasons()


def test_an_object_in_the_operators_own_namespace_is_refused() -> None:
    """Case 9: where the operator runs, `edit` reaches its Pod (pods/exec) and its Lease; an
    object there is Stalled (OperatorNamespace) and nothing is created, unless allowed."""
    world = World()
    settings = replace(world.runtime.settings, operator_namespace=NS)
    world.runtime = replace(world.runtime, settings=settings)
    assert refused_namespace(world.sdd, settings)
    refuse_namespace(world.sdd, world.runtime, LOG)
    (status,) = world.cluster.status_writes
    stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "OperatorNamespace")
    assert "allowOperatorNamespace" in stalled["message"]
    assert world.cluster.of_kind("Job") == []
    allowed = replace(settings, allow_operator_namespace=True)
    assert not refused_namespace(world.sdd, allowed)
    assert not refused_namespace(world.sdd, replace(settings, operator_namespace="elsewhere"))


def test_the_operator_learns_its_namespace_and_the_opt_in_from_its_environment() -> None:
    env = {"WARMGATE_OPERATOR_NAMESPACE": "warmgate-system"}
    settings = Settings.from_environment(env)
    assert (settings.operator_namespace, settings.allow_operator_namespace) == (
        "warmgate-system",
        False,
    )
    allowed = {**env, "WARMGATE_ALLOW_OPERATOR_NAMESPACE": "true"}
    assert Settings.from_environment(allowed).allow_operator_namespace
    with pytest.raises(SettingsError, match="WARMGATE_ALLOW_OPERATOR_NAMESPACE"):
        Settings.from_environment({**env, "WARMGATE_ALLOW_OPERATOR_NAMESPACE": "maybe"})
