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
from warmgate.reconcile.sync.observed import Controlled, Observed, name_of
from warmgate.resources.served_record import (
    CONFIGMAP_KEY,
    DEPLOYMENT_KEY,
    WARMUP_KEY,
    record_digest,
)


@dataclass(frozen=True)
class ServedRecord:
    """The served plan: its Deployment as applied, its seed-file ConfigMap, its warmup."""

    manifest: Manifest  # the record ConfigMap itself
    deployment: Manifest
    configmap: Manifest
    warmup: WarmupSummary


def kept_digest(sdd: SpecDecodeDeployment) -> str | None:
    """The digest of the record the operator last wrote (status.serving.recordDigest)."""
    serving = sdd.status.serving if sdd.status else None
    return serving.record_digest if serving else None


@dataclass(frozen=True)
class RecordSeen:
    """The record ConfigMap as one sync found it, read once (`read_record`).

    ``live``: as listed, whoever controls it (None: absent, or not listed). ``digest``: the
    digest the status keeps (None: none kept, as for a record an earlier build wrote).
    ``tampered``: this object's record when its data no longer hashes to ``digest`` (edited
    after the operator wrote it). ``record``: the record itself, when it is this object's,
    bound to ``digest`` and reads back whole."""

    live: Manifest | None = None
    digest: str | None = None
    tampered: Manifest | None = None
    record: ServedRecord | None = None


def read_record(name: str, mine: Controlled, digest: str | None, seen: Observed) -> RecordSeen:
    """The record named ``name`` in the snapshot, judged against what the object controls
    (``mine``) and the ``digest`` its status keeps (`RecordSeen`)."""
    live = next((c for c in seen.configmaps or () if name_of(c) == name), None)
    if live is None or digest is None or ("ConfigMap", name) in mine.foreign:
        return RecordSeen(live, digest)
    data = live.get("data")
    if not isinstance(data, dict) or record_digest(data) != digest:
        return RecordSeen(live, digest, tampered=live)
    return RecordSeen(live, digest, record=_parsed(live, data))


def _parsed(found: Manifest, data: dict[str, str]) -> ServedRecord | None:
    """The record's documents, when they parse."""
    try:
        deployment = json.loads(data[DEPLOYMENT_KEY])
        configmap = json.loads(data[CONFIGMAP_KEY])
        warmup = WarmupSummary.model_validate_json(data[WARMUP_KEY])
    except (KeyError, TypeError, ValueError, ValidationError):
        return None
    if not (isinstance(deployment, dict) and isinstance(configmap, dict)):
        return None
    return ServedRecord(found, deployment, configmap, warmup)
