"""The object's names, computed once a decision (`identity`), are the ones the builders give
its children: the claim the template asks for and the one the children mount, the serving
Deployment's name and selector, the served record's name."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from support.examples import example_doc

from warmgate.api import SpecDecodeDeployment, parse_manifest
from warmgate.reconcile.sync.observed import Observed, controlled
from warmgate.reconcile.sync.subject import identity
from warmgate.resources import serving_name, serving_selector
from warmgate.resources.cache_claim import build_cache_claim
from warmgate.resources.pod import cache_claim_name
from warmgate.resources.served_record import served_record_name

UID = "6f1c2d3e-0000-4000-8000-00000000001d"
AT = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def _sdd(cache: dict[str, Any]) -> SpecDecodeDeployment:
    doc = example_doc("llama31-8b-seeds")
    doc["metadata"].update(name="named", namespace="llm", uid=UID, generation=1)
    doc["spec"]["warmup"] = {**(doc["spec"].get("warmup") or {}), "cache": cache}
    return parse_manifest(doc)


@pytest.mark.parametrize(
    "cache",
    [{}, {"existingClaim": "users-claim"}, {"claimTemplate": {"size": "10Gi"}}],
    ids=["no-claim", "existing-claim", "claim-template"],
)
def test_the_identity_names_what_the_builders_name(cache: dict[str, Any]) -> None:
    sdd = _sdd(cache)
    ids = identity(sdd)
    assert ids.uid == UID
    assert ids.claim == build_cache_claim(sdd)
    assert ids.claim_name == cache_claim_name(sdd)
    assert ids.serving_name == serving_name(sdd)
    assert ids.selector == serving_selector(sdd)
    assert ids.record_name == served_record_name(sdd)


def test_the_claim_mounted_is_the_users_or_the_templates() -> None:
    assert identity(_sdd({})).claim_name is None
    assert identity(_sdd({"existingClaim": "users-claim"})).claim_name == "users-claim"
    templated = identity(_sdd({"claimTemplate": {"size": "10Gi"}}))
    assert templated.claim is not None
    assert templated.claim_name == templated.claim["metadata"]["name"]
    assert str(templated.claim_name).startswith("named-recipe-cache-")


def _child(kind: str, name: str, controller: str | None) -> dict[str, Any]:
    refs = [] if controller is None else [{"controller": True, "uid": controller}]
    return {"kind": kind, "metadata": {"name": name, "uid": f"uid-{name}", "ownerReferences": refs}}


def test_what_the_object_controls_is_sorted_out_once_and_the_rest_is_foreign() -> None:
    """Only a controller reference to the object's UID makes a child its own; a label (how the
    snapshot lists them) or an owner reference without `controller` does not."""
    ours_job, their_job = _child("Job", "j1", UID), _child("Job", "j2", "other")
    ours_cm, bare_cm = _child("ConfigMap", "c1", UID), _child("ConfigMap", "c2", None)
    ours_claim, their_claim = _child("PVC", "p1", UID), _child("PVC", "p2", "other")
    seen = Observed(
        at=AT,
        claim=their_claim,
        jobs=(ours_job, their_job),
        configmaps=(ours_cm, bare_cm),
        claims=(ours_claim, their_claim),
        deployment=_child("Deployment", "d", UID),
        service=_child("Service", "s", "other"),
    )
    mine = controlled(seen, UID)
    assert (mine.claim, mine.deployment, mine.service) == (False, True, False)
    assert (mine.jobs, mine.configmaps, mine.claims) == ((ours_job,), (ours_cm,), (ours_claim,))
    assert mine.foreign == {("Job", "j2"), ("ConfigMap", "c2")}
    nothing = controlled(seen, "")  # no UID yet: it controls nothing
    assert (nothing.jobs, nothing.deployment) == ((), False)
