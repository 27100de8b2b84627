"""Deterministic child names, the `warmgate.dev/` labels and the owner reference of every child."""

from __future__ import annotations

import hashlib
import re
from typing import Final

from warmgate.api import Manifest, SpecDecodeDeployment
from warmgate.api.constants import (
    API_VERSION,
    KIND,
    LABEL_COMPONENT,
    LABEL_NAME,
    LABEL_PLAN_HASH,
)

# The one length limit: a DNS-1035 label (Service names) and a label value (the Job controller
# copies the Job name into the `job-name` Pod label) are both at most 63 characters.
MAX_NAME: Final = 63
# Hex digits of a hash kept in names and label values: 10 hex = 40 bits, so two plans of one
# parent collide with probability ~1e-12; the truncation tag uses the same width.
SHORT_HASH: Final = 10
DNS_1035_LABEL: Final = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE: Final = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

COMPONENT_PLAN: Final = "plan"
COMPONENT_CACHE: Final = "recipe-cache"
MANAGED_BY: Final = "warmgate"
APP_NAME: Final = "vllm-gaudi"


def short_hash(text: str, width: int = SHORT_HASH) -> str:
    """The first ``width`` hex digits of sha256(text); hex input is hashed too (uniform width)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:width]


def _dns_label_head(parent: str) -> str:
    """The parent name as a DNS-1035 label prefix: '.' -> '-', a leading digit gets 'w'."""
    head = parent.lower().replace(".", "-")
    head = re.sub(r"[^-a-z0-9]", "-", head)
    return head if head[:1].isalpha() else f"w{head}"


def child_name(parent: str, component: str, plan_hash: str | None = None) -> str:
    """`<parent>-<component>[-<short plan hash>]`, a DNS-1035 label of at most MAX_NAME.

    When the parent must be shortened (or rewritten: SDD names may hold '.', Services may not),
    a tag hashed from the *whole* untruncated name is inserted, so two parents sharing a long
    prefix never map to one child: e.g. a 70-character parent `aaaa...a` with component
    `warmup` and hash `3f2a9c0d41` -> `aaaa...a-<tag10>-warmup-3f2a9c0d41`, 63 characters.
    """
    short = (plan_hash or "").removeprefix("sha256:")[:SHORT_HASH]
    suffix = f"-{component}" + (f"-{short}" if short else "")
    head = _dns_label_head(parent)
    full = head + suffix
    if head == parent and len(full) <= MAX_NAME:
        return full
    tag = short_hash(f"{parent}/{suffix}")
    keep = MAX_NAME - len(suffix) - len(tag) - 1
    if keep < 1:
        raise ValueError(f"component {component!r} leaves no room for the parent in {MAX_NAME}")
    return f"{head[:keep].rstrip('-')}-{tag}{suffix}"


def label_value(value: str) -> str:
    """A label value (<= 63, alphanumeric ends); longer values keep a prefix and a hash tag."""
    if len(value) <= MAX_NAME and LABEL_VALUE.match(value):
        return value
    cleaned = re.sub(r"[^-A-Za-z0-9_.]", "-", value)
    head = cleaned[: MAX_NAME - SHORT_HASH - 1].strip("-_.")
    return f"{head}-{short_hash(value)}" if head else short_hash(value)


def plan_label(plan_digest: str) -> str:
    """The `warmgate.dev/plan-hash` label value: the plan digest's first 16 hex digits."""
    return plan_digest.removeprefix("sha256:")[:16]


def selector_labels(sdd: SpecDecodeDeployment, component: str) -> dict[str, str]:
    """The labels a selector matches: parent and component only, never the plan hash.

    Serving Pods of the last verified plan must keep matching the Service and the Deployment
    while a new plan warms (docs/resources.md, "Selectors").
    """
    return {LABEL_NAME: label_value(parent_name(sdd)), LABEL_COMPONENT: component}


def labels(
    sdd: SpecDecodeDeployment, component: str, plan_digest: str | None = None
) -> dict[str, str]:
    """Recommended `app.kubernetes.io/*` labels plus the `warmgate.dev/` ones of a child."""
    result = {
        "app.kubernetes.io/name": APP_NAME,
        "app.kubernetes.io/instance": label_value(parent_name(sdd)),
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        **selector_labels(sdd, component),
    }
    if plan_digest is not None:
        result[LABEL_PLAN_HASH] = plan_label(plan_digest)
    return result


def owner_reference(sdd: SpecDecodeDeployment) -> Manifest:
    """The controller owner reference (what kopf.adopt writes); needs metadata.uid."""
    if not sdd.metadata.uid:
        raise ValueError("the SpecDecodeDeployment has no metadata.uid: read it from the server")
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": parent_name(sdd),
        "uid": sdd.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def metadata(
    sdd: SpecDecodeDeployment,
    name: str,
    component: str,
    *,
    plan_digest: str | None = None,
    annotations: dict[str, str] | None = None,
) -> Manifest:
    """ObjectMeta of a child: name, namespace of the parent, labels, owner reference."""
    meta: Manifest = {"name": name}
    if sdd.metadata.namespace:
        meta["namespace"] = sdd.metadata.namespace
    meta["labels"] = labels(sdd, component, plan_digest)
    if annotations:
        meta["annotations"] = dict(annotations)
    meta["ownerReferences"] = [owner_reference(sdd)]
    return meta


def parent_name(sdd: SpecDecodeDeployment) -> str:
    """The SpecDecodeDeployment's name; children derive theirs from it."""
    if not sdd.metadata.name:
        raise ValueError("the SpecDecodeDeployment has no metadata.name")
    return sdd.metadata.name
