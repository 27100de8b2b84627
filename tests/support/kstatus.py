"""kstatus' verdict on an object, as Flux, Argo CD and kpt compute it (for assertions).

The generic rules of sigs.k8s.io/cli-utils pkg/kstatus/status (generic.go,
checkGenericProperties; status.go, Compute), which apply to any custom resource without
type-specific rules: a deletion timestamp is Terminating; status.observedGeneration behind
metadata.generation is InProgress; a Reconciling condition that is True is InProgress; a
Stalled condition that is True is Failed; anything else is Current.
"""

from __future__ import annotations

from typing import Any


def kstatus(obj: dict[str, Any]) -> str:
    """InProgress, Failed, Current or Terminating."""
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    if meta.get("deletionTimestamp"):
        return "Terminating"
    generation = meta.get("generation", -1)
    if status.get("observedGeneration", generation) != generation:
        return "InProgress"
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Reconciling":
            return "InProgress"
        if condition.get("type") == "Stalled":
            return "Failed"
    return "Current"
