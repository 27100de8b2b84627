"""Recipe-cache leaks (issue 23 item 12), as decisions: which claims go, and who the runner is
told uses the entries of a claim. Data in, data out: each snapshot is built by hand."""

from __future__ import annotations

import copy
import json
import logging
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from support.examples import example_doc
from support.fake_cluster import FakeCluster
from support.kube_objects import job_status, serving_pod

from warmgate.api import SpecDecodeDeployment, SpecDecodeDeploymentStatus, parse_manifest
from warmgate.contract.order import CacheUsers
from warmgate.kube.cluster import ClusterError
from warmgate.reconcile.planning.evaluate import evaluate
from warmgate.reconcile.sync.actions import Create, Delete, Replace
from warmgate.reconcile.sync.decide import decide
from warmgate.reconcile.sync.decide_collect import claims_to_list, decide_collect
from warmgate.reconcile.sync.observed import Observed
from warmgate.reconcile.sync.subject import Subject, subject, warmup_target
from warmgate.resources import Children, desired_children
from warmgate.resources.cache_claim import build_cache_claim, legacy_claim_name
from warmgate.resources.pod import cache_claim_name
from warmgate.runtime.gather import Gatherer, NoEndpoints, cache_users, gather
from warmgate.settings import Settings

NS, NAME, UID = "llm", "cached", "6f1c2d3e-0000-4000-8000-0000000000cc"
AT = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SETTINGS = Settings(operator_image="warmgate:test")
TEMPLATE = {"claimTemplate": {"size": "10Gi"}}


def sdd_with(cache: dict[str, Any], uid: str = UID) -> SpecDecodeDeployment:
    doc = example_doc("llama31-8b-seeds")
    doc["metadata"].update(name=NAME, namespace=NS, uid=uid, generation=1)
    doc["spec"]["warmup"] = {**(doc["spec"].get("warmup") or {}), "cache": cache}
    return parse_manifest(doc)


def stored(manifest: dict[str, Any], uid: str) -> dict[str, Any]:
    found = copy.deepcopy(manifest)
    found["metadata"].update(uid=uid, resourceVersion="7")
    return found


def children(sdd: SpecDecodeDeployment, users: CacheUsers | None = None) -> Children:
    target = warmup_target(sdd, evaluate(sdd))
    assert target is not None
    return desired_children(sdd, replace(target[0], cache_users=users), SETTINGS)


def old_claim(size: str = "20Gi") -> dict[str, Any]:
    """The claim this object made from an earlier template."""
    claim = build_cache_claim(sdd_with({"claimTemplate": {"size": size}}))
    assert claim is not None
    return stored(claim, f"claim-{size}")


def deletes(actions: tuple[Any, ...]) -> list[tuple[str, str]]:
    return [(a.kind, a.target["metadata"]["name"]) for a in actions if isinstance(a, Delete)]


def _subject(sdd: SpecDecodeDeployment, seen: Observed) -> Subject:
    return subject(sdd, evaluate(sdd), seen)


def collect(sdd: SpecDecodeDeployment, **seen: Any) -> tuple[Any, ...]:
    observed = Observed(at=AT, configmaps=(), **seen)
    return decide_collect(subject(sdd, evaluate(sdd), observed), observed, children(sdd))


def test_a_changed_template_names_a_new_claim_which_the_job_and_deployment_mount() -> None:
    one, two = sdd_with(TEMPLATE), sdd_with({"claimTemplate": {"size": "20Gi"}})
    assert cache_claim_name(one) != cache_claim_name(two)
    assert cache_claim_name(one) == cache_claim_name(sdd_with(TEMPLATE))
    assert str(cache_claim_name(one)).startswith(f"{NAME}-recipe-cache-")
    wanted = children(one)
    for workload in (wanted.warmup_job, wanted.serving_deployment):
        volumes = workload["spec"]["template"]["spec"]["volumes"]
        claims = [
            v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v
        ]
        assert claims == [cache_claim_name(one)]


def test_an_old_template_claim_nothing_mounts_is_deleted() -> None:
    old = old_claim()
    actions = collect(sdd_with(TEMPLATE), claims=(old,))
    assert deletes(actions) == [("PersistentVolumeClaim", old["metadata"]["name"])]
    (delete,) = [a for a in actions if isinstance(a, Delete)]
    assert delete.done is not None
    assert "no longer used" in delete.done.message


def test_a_removed_templates_claim_goes_too() -> None:
    old = old_claim()
    assert deletes(collect(sdd_with({}), claims=(old,))) == [
        ("PersistentVolumeClaim", old["metadata"]["name"])
    ]


def test_the_current_templates_claim_stays() -> None:
    current = stored(build_cache_claim(sdd_with(TEMPLATE)) or {}, "claim-now")
    assert deletes(collect(sdd_with(TEMPLATE), claims=(current,))) == []


def deployment_on(claim: dict[str, Any]) -> dict[str, Any]:
    """The serving Deployment of the last verified plan, still mounting the old claim."""
    served = copy.deepcopy(
        children(sdd_with({"claimTemplate": {"size": "20Gi"}})).serving_deployment
    )
    names = [
        v["persistentVolumeClaim"]["claimName"]
        for v in served["spec"]["template"]["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    ]
    assert names == [claim["metadata"]["name"]]
    return stored(served, "deploy-uid")


def test_an_old_claim_stays_while_the_deployment_or_a_serving_pod_mounts_it() -> None:
    old = old_claim()
    deployment = deployment_on(old)
    sdd = sdd_with(TEMPLATE)
    assert deletes(collect(sdd, claims=(old,), deployment=deployment)) == []
    # The Deployment moved on; a Pod of its old template still runs (maxUnavailable 0).
    rs = stored(copy.deepcopy(deployment), "rs-uid")
    rs["kind"] = "ReplicaSet"
    pod = stored(serving_pod(NS, rs, "old-pod"), "pod-uid")
    assert deletes(collect(sdd, claims=(old,), serving_pods=(pod,))) == []
    assert deletes(collect(sdd, claims=(old,))) != []


def test_a_claim_not_controlled_by_this_object_is_never_deleted() -> None:
    """Labels are anyone's: a claim labelled as this object's but made by someone else, or
    controlled by another object, is not ours to delete."""
    foreign = old_claim()
    foreign["metadata"]["ownerReferences"] = []
    other = old_claim("30Gi")
    other["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    assert deletes(collect(sdd_with(TEMPLATE), claims=(foreign, other))) == []


def test_a_claim_being_deleted_or_a_failed_read_sends_no_delete() -> None:
    old = old_claim()
    old["metadata"]["deletionTimestamp"] = "2026-11-29T11:59:30Z"  # Pods still on it
    assert deletes(collect(sdd_with(TEMPLATE), claims=(old,))) == []
    seen = Observed(at=AT, configmaps=(), claims=(old_claim(),), failed={"serving": "x"})
    assert deletes(decide_collect(_subject(sdd_with(TEMPLATE), seen), seen, None)) == []


def test_claims_are_listed_only_where_an_old_one_can_be() -> None:
    plain = sdd_with({})
    assert not claims_to_list(plain, Observed(at=AT))
    assert claims_to_list(sdd_with(TEMPLATE), Observed(at=AT))
    existing = sdd_with({"existingClaim": "team-cache"})
    on_existing = stored(children(existing).warmup_job, "job-uid")
    assert not claims_to_list(existing, Observed(at=AT, jobs=(on_existing,)))
    # The template was removed: the old Job (a record kept) still names the claim.
    old_job = stored(children(sdd_with(TEMPLATE)).warmup_job, "job-uid")
    old_job["status"] = job_status(True)
    assert claims_to_list(plain, Observed(at=AT, jobs=(old_job,)))


def test_the_runner_is_told_who_uses_the_claim_without_changing_the_jobs_name() -> None:
    sdd = sdd_with({"existingClaim": "team-cache"})
    users = CacheUsers.listed(("uid-other",), ("gaudi2-tp1-other",), 1_790_000_000)
    seen = Observed(
        at=AT, claim=stored({"metadata": {"name": "team-cache"}}, "c"), cache_users=users
    )
    decision = decide(sdd, evaluate(sdd), seen, SETTINGS)
    created = {
        a.manifest["kind"] + "/" + a.manifest["metadata"]["name"]: a.manifest
        for a in decision.actions
        if isinstance(a, Create)
    }
    job = next(m for k, m in created.items() if k.startswith("Job/"))
    plan = json.loads(created["ConfigMap/" + job["metadata"]["name"]]["data"]["plan.json"])
    key = plan["cache"]["key"]
    assert plan["cache"]["users"] == {
        "owners": sorted(["uid-other", UID]),
        "keys": sorted(["gaudi2-tp1-other", key]),
        "as_of_unix": 1_790_000_000,
    }
    without = decide(sdd, evaluate(sdd), Observed(at=AT, claim=seen.claim), SETTINGS)
    names = [a.manifest["metadata"]["name"] for a in without.actions if isinstance(a, Create)]
    assert job["metadata"]["name"] in names  # the same Job with or without the users
    plain = json.loads(children(sdd).warmup_configmap["data"]["plan.json"])
    assert "users" not in plain["cache"]
    assert plain["cache"]["namespace"] == NS  # the runner tags what it publishes with it


def test_the_users_are_every_object_of_the_namespace_and_the_keys_they_use() -> None:
    cluster = FakeCluster()
    for uid, key in (("uid-a", "gaudi2-tp1-aaa"), ("uid-b", None)):
        doc = example_doc("llama31-8b-seeds")
        doc["metadata"].update(name=uid, namespace=NS, uid=uid)
        if key:
            doc["status"] = {"warmup": {"cacheKey": key}}
        cluster.put({**doc, "kind": "SpecDecodeDeployment"})
    served = copy.deepcopy(children(sdd_with({})).serving_deployment)
    cluster.put(served)
    reads = Gatherer(cluster, NoEndpoints(), logging.getLogger("test"))
    found = cache_users(reads, NS, AT)
    assert found is not None
    assert sorted(found.owners) == ["uid-a", "uid-b"]
    annotation = served["metadata"]["annotations"]["warmgate.dev/cache-key"]
    assert sorted(set(found.keys)) == sorted({"gaudi2-tp1-aaa", annotation})
    assert found.as_of_unix == int(AT.timestamp())
    # A failed read leaves the prune out, not the warmup: no part of the sync fails.
    cluster.fail = {"list:SpecDecodeDeployment": ClusterError("refused", 503)}
    assert cache_users(reads, NS, AT) is None
    assert reads.failed == {}


def recorded(sdd: SpecDecodeDeployment, claim_uid: str) -> SpecDecodeDeployment:
    """The object whose status records its plan verified on the claim with ``claim_uid``."""
    key = children(sdd).cache_key
    warmed = {"type": "Warmed", "status": "True", "reason": "WarmupSucceeded", "message": "m"}
    warmed |= {"lastTransitionTime": "2026-11-29T11:00:00Z", "observedGeneration": 1}
    status = {"conditions": [warmed], "warmup": {"cacheKey": key, "cacheClaimUid": claim_uid}}
    return sdd.model_copy(update={"status": SpecDecodeDeploymentStatus.model_validate(status)})


def deployment_write(action: Any) -> bool:
    manifest = getattr(action, "manifest", None) or {}
    return isinstance(action, (Create, Replace)) and manifest.get("kind") == "Deployment"


def test_a_failed_warmup_read_never_moves_serving_to_another_claim() -> None:
    """The template changed (a new claim name) and this sync's warmup reads failed: the record
    vouches for the old claim, so the Deployment must not move to the new, empty one."""
    old = old_claim()  # 20Gi, the claim the Deployment mounts and the record vouches for
    deployment = deployment_on(old)
    changed = recorded(sdd_with(TEMPLATE), old["metadata"]["uid"])
    seen = Observed(at=AT, deployment=deployment, failed={"warmup": "Could not read"})
    writes = decide(changed, evaluate(changed), seen, SETTINGS).actions
    assert not [a for a in writes if deployment_write(a)], writes
    # The template unchanged and its claim read: the recorded plan is kept for serving.
    same = recorded(sdd_with({"claimTemplate": {"size": "20Gi"}}), old["metadata"]["uid"])
    seen = Observed(at=AT, claim=old, deployment=deployment, failed={"warmup": "Could not"})
    warm = decide(same, evaluate(same), seen, SETTINGS)
    assert not [a for a in warm.actions if deployment_write(a)]


def legacy_claim(sdd: SpecDecodeDeployment, size: str = "10Gi") -> dict[str, Any]:
    """The claim an earlier build made from the template, under `<parent>-recipe-cache`."""
    claim = build_cache_claim(sdd)
    assert claim is not None
    claim = stored(claim, "legacy-uid")
    claim["metadata"]["name"] = legacy_claim_name(sdd)
    claim["spec"]["resources"]["requests"]["storage"] = size
    return claim


def gathered_claim(sdd: SpecDecodeDeployment, *stored_claims: dict[str, Any]) -> Any:
    cluster = FakeCluster()
    for claim in stored_claims:
        cluster.put(claim)
    log = logging.getLogger("test")
    seen, _ = gather(sdd, evaluate(sdd), cluster, endpoints=NoEndpoints(), log=log, at=AT)
    return seen.claim


def test_an_upgrade_keeps_the_claim_an_earlier_build_made_from_the_same_template() -> None:
    """Earlier builds named the claim `<parent>-recipe-cache`: while it is the object's and
    asks for what the template says, it stays the object's claim (no new, empty cache)."""
    sdd = sdd_with(TEMPLATE)
    legacy = legacy_claim(sdd)
    assert gathered_claim(sdd, legacy)["metadata"]["name"] == f"{NAME}-recipe-cache"
    assert gathered_claim(sdd, legacy_claim(sdd, "20Gi")) is None  # another template since
    foreign = legacy_claim(sdd)
    foreign["metadata"]["ownerReferences"] = []
    assert gathered_claim(sdd, foreign) is None
    current = stored(build_cache_claim(sdd) or {}, "claim-now")
    assert gathered_claim(sdd, legacy, current)["metadata"]["uid"] == "claim-now"


def test_the_adopted_claim_is_mounted_kept_and_its_record_stands() -> None:
    sdd = recorded(sdd_with(TEMPLATE), "legacy-uid")
    legacy = legacy_claim(sdd)
    decision = decide(sdd, evaluate(sdd), Observed(at=AT, claim=legacy), SETTINGS)
    assert [c.status for c in decision.status.conditions or [] if c.type == "Warmed"] == ["True"]
    created = [a.manifest for a in decision.actions if isinstance(a, Create)]
    assert "PersistentVolumeClaim" not in [m["kind"] for m in created]
    (deployment,) = [m for m in created if m["kind"] == "Deployment"]
    assert claim_of(deployment) == legacy["metadata"]["name"]
    seen = Observed(at=AT, configmaps=(), claim=legacy, claims=(legacy,))
    assert deletes(decide_collect(_subject(sdd, seen), seen, None)) == []


def claim_of(workload: dict[str, Any]) -> str:
    volumes = workload["spec"]["template"]["spec"]["volumes"]
    (name,) = [
        v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v
    ]
    return str(name)
