"""The object one decision is about: the plan it warms, its names, what of the snapshot it
controls, and its served record, computed once (`subject`).

Every part of a decision (`decide_warmup`, `decide_serving`, `decide_collect`) asks the same
questions of the object and of the snapshot: which plan may warm, under which cache key
(`warmup_target`); which UID must a child's controller reference
carry, what is the recipe-cache claim of the template called, which claim do the children
mount, what are the serving Deployment, its selector and the served record called (`identity`,
from the same builders that name the children, `warmgate.resources`); which of the objects read
does it control (`observed.controlled`); is its served record there, bound to the status'
digest (`served.read_record`). `subject` answers them once, so the parts take values instead of
asking again.
"""

from __future__ import annotations

from dataclasses import dataclass

from warmgate.api import Manifest, SpecDecodeDeployment
from warmgate.reconcile.planning.evaluate import PlanningResult
from warmgate.reconcile.sync.observed import Controlled, Observed, controlled
from warmgate.reconcile.sync.served import RecordSeen, kept_digest, read_record
from warmgate.resources import PlanBundle, cache_key, serving_name, serving_selector
from warmgate.resources.cache_claim import build_cache_claim
from warmgate.resources.served_record import served_record_name


@dataclass(frozen=True)
class Identity:
    """``uid``: the object's UID ("" before the server gave it one: it controls nothing).
    ``claim``: the recipe-cache claim the template asks for (None without a template).
    ``claim_name``: the claim the children mount (the user's existingClaim, the template's, or
    None). ``serving_name``: the Deployment's and the Service's; ``selector``: the serving
    Pods' label selector (status.serving.selector); ``record_name``: the served record's."""

    uid: str
    claim: Manifest | None
    claim_name: str | None
    serving_name: str
    selector: str
    record_name: str


def identity(sdd: SpecDecodeDeployment) -> Identity:
    """The object's UID and its children's names (module docstring)."""
    claim = build_cache_claim(sdd)
    # `pod.cache_claim_name`: the user's existing claim, else the template's
    existing = sdd.spec.warmup.cache.existing_claim
    template_name = claim["metadata"]["name"] if claim is not None else None
    return Identity(
        uid=sdd.metadata.uid or "",
        claim=claim,
        claim_name=existing if existing is not None else template_name,
        serving_name=serving_name(sdd),
        selector=serving_selector(sdd),
        record_name=served_record_name(sdd),
    )


@dataclass(frozen=True)
class Subject:
    """The object one decision is about, as one snapshot shows it (module docstring): the plan
    it warms with its cache key (None: nothing may warm), its names, what of the snapshot it
    controls, its served record."""

    target: tuple[PlanBundle, str] | None
    ids: Identity
    mine: Controlled
    record: RecordSeen


def subject(sdd: SpecDecodeDeployment, planning: PlanningResult, seen: Observed) -> Subject:
    """The plan to warm, the object's names, what of ``seen`` it controls, its record."""
    target = warmup_target(sdd, planning)
    ids = identity(sdd)
    mine = controlled(seen, ids.uid)
    record = read_record(ids.record_name, mine, kept_digest(sdd), seen)
    return Subject(target, ids, mine, record)


def warmup_target(
    sdd: SpecDecodeDeployment, result: PlanningResult
) -> tuple[PlanBundle, str] | None:
    """The plan to warm with its cache key, or None when nothing may warm."""
    recorded = sdd.status.warmup if sdd.status else None
    to_run = result.to_run(kv_blocks=recorded.kv_blocks if recorded else None)
    if to_run is None:
        return None
    return to_run, cache_key(sdd, to_run.buckets)
