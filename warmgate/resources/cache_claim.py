"""The recipe-cache claim the operator makes from spec.warmup.cache.claimTemplate, named after it.

A claim's spec is immutable once bound (storage class, access modes; a size only grows where
the class allows expansion), so a changed template cannot be applied to the claim in place:
the claim is named after a hash of the spec it is made from, `<parent>-recipe-cache-<hash>`,
and a changed template gets a new claim while the old one keeps serving the last verified plan.
The operator deletes the old one once nothing of the object mounts it (`decide_collect`).

Earlier builds named the claim `<parent>-recipe-cache` whatever the template. Such a claim, made
by the object from the template it still has, stays the object's claim (`PlanBundle
.cache_claim_name`): an operator upgrade throws no recipe cache away and warms nothing again.
"""

from __future__ import annotations

import json

from warmgate.api import Manifest, SpecDecodeDeployment
from warmgate.api.kube import ClaimTemplate
from warmgate.resources.names import COMPONENT_CACHE, child_name, metadata, parent_name, short_hash


def claim_spec(template: ClaimTemplate) -> Manifest:
    """The PersistentVolumeClaim spec a template asks for."""
    spec: Manifest = {
        "accessModes": list(template.access_modes),
        "resources": {"requests": {"storage": template.size}},
        "volumeMode": "Filesystem",
    }
    if template.storage_class_name is not None:
        spec["storageClassName"] = template.storage_class_name
    return spec


def template_claim_name(sdd: SpecDecodeDeployment, template: ClaimTemplate) -> str:
    """`<parent>-recipe-cache-<10 hex of the claim spec>`: one name per template content."""
    digest = short_hash(json.dumps(claim_spec(template), sort_keys=True))
    return child_name(parent_name(sdd), COMPONENT_CACHE, digest)


def legacy_claim_name(sdd: SpecDecodeDeployment) -> str:
    """`<parent>-recipe-cache`: the one name earlier builds gave the template's claim."""
    return child_name(parent_name(sdd), COMPONENT_CACHE)


def made_from(claim: Manifest, template: ClaimTemplate) -> bool:
    """The claim asks for what the template says: access modes, size, and the class when the
    template names one (unset, the cluster's default class fills it in). A claim grown by hand
    no longer matches: the template then gets its own claim."""
    spec = claim.get("spec") or {}
    size = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    same = spec.get("accessModes") == list(template.access_modes) and size == template.size
    named = template.storage_class_name
    return same and (named is None or spec.get("storageClassName") == named)


def build_cache_claim(sdd: SpecDecodeDeployment) -> Manifest | None:
    """The recipe-cache claim from spec.warmup.cache.claimTemplate, or None without a template.

    Not tied to a plan: every cache key is its own folder inside (docs/runner.md, "Cache"), so
    one claim serves all plans of the parent while the template stays the same.
    """
    template = sdd.spec.warmup.cache.claim_template
    if template is None:
        return None
    spec = claim_spec(template)
    name = template_claim_name(sdd, template)
    meta = metadata(sdd, name, COMPONENT_CACHE)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}
