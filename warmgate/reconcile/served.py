"""The record of the served plan, read back (`resources.served_record` writes it).

Only a record this object controls is read, and only one whose documents parse: a hand-made or
foreign ConfigMap of that name is no record (NotOwned when the operator wants to write it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import ValidationError

from warmgate.api import Manifest, SpecDecodeDeployment
from warmgate.api.status import WarmupSummary
from warmgate.reconcile.observed import Observed, controlled_by, name_of
from warmgate.resources.served_record import (
    CONFIGMAP_KEY,
    DEPLOYMENT_KEY,
    WARMUP_KEY,
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


def served_record(sdd: SpecDecodeDeployment, seen: Observed) -> ServedRecord | None:
    """The record this object wrote, when it was listed and reads back whole."""
    found = live_record(sdd, seen)
    if found is None or not controlled_by(found, sdd.metadata.uid or ""):
        return None
    data = found.get("data") or {}
    try:
        deployment = json.loads(data[DEPLOYMENT_KEY])
        configmap = json.loads(data[CONFIGMAP_KEY])
        warmup = WarmupSummary.model_validate_json(data[WARMUP_KEY])
    except (KeyError, TypeError, ValueError, ValidationError):
        return None
    if not (isinstance(deployment, dict) and isinstance(configmap, dict)):
        return None
    return ServedRecord(found, deployment, configmap, warmup)
