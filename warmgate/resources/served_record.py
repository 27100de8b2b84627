"""The record of the plan serving now: enough to put it back while another plan warms.

The serving Deployment is the operator's only copy of what a verified plan runs: its spec may
have changed since (a new plan warming), so a Deployment deleted by hand could not be rebuilt
from the spec. When the operator points the Deployment at a verified plan, it also writes this
ConfigMap (`<parent>-served`): the Deployment as applied, the plan's seed-file ConfigMap, and
the verified warmup's summary. It restores both while the spec's plan is not verified yet, and
the summary stays the verdict of the served plan when the spec goes back to it after its warmup
Pods are gone (docs/operator.md, "Trust and failure model").

A namespace user with `edit` may write any ConfigMap, this one too: the record is evidence only
while its data hashes to `status.serving.recordDigest`, which the operator writes with the
record and nobody but the operator may write (the status subresource). `record_digest` is that
hash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Final

from warmgate.api import Manifest, SpecDecodeDeployment
from warmgate.api.status import WarmupSummary
from warmgate.resources.names import child_name, metadata, parent_name

COMPONENT_SERVED: Final = "served"
DEPLOYMENT_KEY: Final = "deployment.json"
CONFIGMAP_KEY: Final = "configmap.json"
WARMUP_KEY: Final = "warmup.json"


def served_record_name(sdd: SpecDecodeDeployment) -> str:
    return child_name(parent_name(sdd), COMPONENT_SERVED)


def record_digest(data: Mapping[str, object]) -> str:
    """sha256 of a record's data (its keys sorted), as kept in status.serving.recordDigest."""
    encoded = json.dumps(dict(data), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(encoded.encode()).hexdigest()


def build_served_record(
    sdd: SpecDecodeDeployment, deployment: Manifest, configmap: Manifest, warmup: WarmupSummary
) -> Manifest:
    """The record ConfigMap of a verified plan the Deployment is pointed at."""
    data = {
        DEPLOYMENT_KEY: json.dumps(deployment, sort_keys=True, separators=(",", ":")),
        CONFIGMAP_KEY: json.dumps(configmap, sort_keys=True, separators=(",", ":")),
        WARMUP_KEY: warmup.model_dump_json(by_alias=True, exclude_none=True),
    }
    meta = metadata(sdd, served_record_name(sdd), COMPONENT_SERVED)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}
