"""The plan's ``shard`` section (issue 38): one engine of a sharded warmup, or the merge after it.

A sharded warmup is one Indexed Job of N Pods. Pod i runs ``shard-<i>.json``: a plan whose seed
file, expected lists and drafter shapes are slice i of the operator's plan, with ``shard``
``{"role": "slice", "index": i, "count": N}``; it warms and verifies its slice (no sweep, no
probe: both need the whole plan) and publishes its recipes under ``shard_key(key, i, N)``.
Pod 0 then runs plan.json, the whole plan, with ``{"role": "merge", "index": 0, "count": N,
"wait_s": S}``: it waits (at most S seconds) until every slice's entry is published, merges them
into its local recipe directory, starts one engine on the merged cache and runs the whole plan's
checks, sweep and probe; only then is the merged cache published under the plan's key.

Optional in format 1, written only when N > 1: other plans keep their text and their Job names.
Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from warmgate.contract.schema import Fields

SHARD: Final = "shard"
ROLES: Final = ("slice", "merge")
# The index the Job controller gives each Pod of an Indexed Job (batch/v1, completionMode
# Indexed): the JOB_COMPLETION_INDEX variable it adds to every container.
INDEX_ENV: Final = "JOB_COMPLETION_INDEX"
MAX_SHARDS: Final = 64
# The whole plan's file next to the slices' (the merge runs it), as the operator mounts it.
PLAN_FILE: Final = "plan.json"


def shard_key(key: str, index: int, count: int) -> str:
    """The cache key slice ``index`` of ``count`` publishes under, e.g. ``3f2a.shard-1-of-4``."""
    return f"{key}.shard-{index}-of-{count}"


def shard_file(index: int) -> str:
    """The plan file of slice ``index`` in the plan ConfigMap."""
    return f"shard-{index}.json"


@dataclass(frozen=True)
class ShardSpec:
    """Which slice this run warms, or (role merge) that it merges all ``count`` slices."""

    role: str
    index: int
    count: int
    # merge: seconds to wait for the slices' entries (the other Pods run side by side).
    wait_s: float = 0.0

    @property
    def merge(self) -> bool:
        """The run after the slices: merge their entries, then the whole plan."""
        return self.role == "merge"

    def keys(self, key: str) -> tuple[str, ...]:
        """Every slice's cache key (what a merge waits for)."""
        return tuple(shard_key(key, i, self.count) for i in range(self.count))

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"role": self.role, "index": self.index, "count": self.count}
        if self.merge:
            doc["wait_s"] = self.wait_s
        return doc


def parse_shard(f: Fields) -> ShardSpec | None:
    """The ``shard`` object, or None when the plan has none."""
    if not f.present:
        return None
    role = f.choice("role", ROLES, "slice")
    count = f.integer("count", lo=2, hi=MAX_SHARDS)
    index = f.integer("index", lo=0, hi=MAX_SHARDS - 1)
    wait = f.number("wait_s", 0.0, lo=0.0)
    if index >= count:
        f.error(f"index: {index} is not below count {count}")
    if role == "merge" and index != 0:
        f.error("index: the merge runs in the first Pod (index 0)")
    f.finish()
    return ShardSpec(role=role, index=index, count=count, wait_s=wait)
