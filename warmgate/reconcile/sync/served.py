"""The record of the served plan, read back (`resources.served_record` writes it).

Only a record this object controls is read, and only one whose data hashes to the digest the
operator kept in the status (`status.serving.recordDigest`, `bound`) and whose documents parse:
a hand-made or foreign ConfigMap of that name is no record (NotOwned when the operator wants to
write it), and neither is this object's record once someone edited it (`edit` may write any
ConfigMap; nobody but the operator writes the status). The record never decides anything on its
own word (docs/operator.md, "Trust and failure model").
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import ValidationError

from warmgate.api import Manifest, SpecDecodeDeployment
from warmgate.api.status import WarmupSummary
from warmgate.reconcile.sync.observed import Observed, controlled_by, name_of
from warmgate.resources.served_record import (
    CONFIGMAP_KEY,
    DEPLOYMENT_KEY,
    WARMUP_KEY,
    record_digest,
    served_record_name,
)


@dataclass(frozen=True)
class ServedRecord:
    """The served plan: its Deployment as applied, its seed-file ConfigMap, its warmup."""

    manifest: Manifest  # the record ConfigMap itself
    deployment: Manifest
    configmap: Manifest
    warmup: WarmupSummary


def live_record(sdd: SpecDecodeDeployment, seen: Observed) -> Manifest | None:
    """The record ConfigMap as listed, whoever controls it (None: absent, or not listed)."""
    name = served_record_name(sdd)
    return next((c for c in seen.configmaps or () if name_of(c) == name), None)


def kept_digest(sdd: SpecDecodeDeployment) -> str | None:
    """The digest of the record the operator last wrote (status.serving.recordDigest)."""
    serving = sdd.status.serving if sdd.status else None
    return serving.record_digest if serving else None


def tampered(sdd: SpecDecodeDeployment, seen: Observed) -> Manifest | None:
    """This object's record when its data no longer hashes to the digest in the status: it
    was edited after the operator wrote it (None: absent, foreign, bound, or no digest kept,
    as for a record an earlier build wrote)."""
    found = live_record(sdd, seen)
    digest = kept_digest(sdd)
    if found is None or digest is None or not controlled_by(found, sdd.metadata.uid or ""):
        return None
    data = found.get("data")
    return None if isinstance(data, dict) and record_digest(data) == digest else found


def served_record(sdd: SpecDecodeDeployment, seen: Observed) -> ServedRecord | None:
    """The record this object wrote, when it was listed, is bound to the status' digest and
    reads back whole."""
    found = live_record(sdd, seen)
    digest = kept_digest(sdd)
    if found is None or digest is None or not controlled_by(found, sdd.metadata.uid or ""):
        return None
    data = found.get("data")
    if not isinstance(data, dict) or record_digest(data) != digest:
        return None
    try:
        deployment = json.loads(data[DEPLOYMENT_KEY])
        configmap = json.loads(data[CONFIGMAP_KEY])
        warmup = WarmupSummary.model_validate_json(data[WARMUP_KEY])
    except (KeyError, TypeError, ValueError, ValidationError):
        return None
    if not (isinstance(deployment, dict) and isinstance(configmap, dict)):
        return None
    return ServedRecord(found, deployment, configmap, warmup)
