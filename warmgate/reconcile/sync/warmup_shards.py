"""A sharded warmup's verdict (issue 38): every slice verified, the merge verified, by index.

The warmup Job of ``spec.warmup.shards`` N > 1 is an Indexed Job (resources/warmup_shards.py):
the Job controller gives each Pod its completion index (the ``batch.kubernetes.io/job-
completion-index`` annotation, read only on Pods the Job controls: `warmup_state.owned_pods`).
Warmed=True needs, for every index, the termination summary of that index's newest Pod:

- index i > 0: ``verified`` for the slice's own key ``shard_key(key, i, N)``, shard ``slice`` i;
- index 0: ``verified`` for the plan's key with shard role ``merge``, N slices merged and its
  own slice ``verified`` (its Pod ran slice 0, then the merge and the whole plan's checks,
  sweep and probe on the merged recipes).

The slices the operator built partition the plan (`buckets.shard`), and each runner verified its
engine's lists against its slice's digests, so every verified slice plus the verified merge
(the whole plan's lists again, on the merged cache) is the union. A slice missing, failed, or
speaking for another slice (a duplicate) is not verified, and the reason names the shard.
Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from warmgate.api import Manifest
from warmgate.contract.shardspec import shard_key
from warmgate.contract.summary import TerminationSummary

__all__ = ["INDEX_ANNOTATION", "ShardsSeen", "job_shards", "read_shards"]

INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"


def job_shards(job: Manifest) -> int:
    """N of a sharded warmup's Job (an Indexed Job of N > 1 completions), else 1."""
    spec = job.get("spec") or {}
    completions = spec.get("completions")
    if spec.get("completionMode") != "Indexed" or type(completions) is not int:
        return 1
    return max(1, completions)


@dataclass(frozen=True)
class ShardsSeen:
    """Per index, what the newest Pod's summary says; ``gap`` the first shard not verified."""

    count: int
    running: int
    verified: int
    merge: TerminationSummary | None
    gap: str | None
    failed: TerminationSummary | None = None
    # The Job's attempts: the most Pods any one index had (a retry replaces one shard's Pod,
    # not all N), 0 before the first Pod.
    attempts: int = 0


def read_shards(job: Manifest, pods: list[Manifest], key: str) -> ShardsSeen:
    """The shards of ``job`` from the Pods it controls (``pods``: `owned_pods`)."""
    count = job_shards(job)
    newest: dict[int, Manifest] = {}
    tries: dict[int, int] = {}
    for pod in pods:
        index = _index(pod)
        if index is None or index >= count:
            continue
        tries[index] = tries.get(index, 0) + 1
        stamp = (pod.get("metadata") or {}).get("creationTimestamp") or ""
        held = newest.get(index)
        if held is None or stamp >= ((held.get("metadata") or {}).get("creationTimestamp") or ""):
            newest[index] = pod
    running = sum(1 for p in newest.values() if (p.get("status") or {}).get("phase") == "Running")
    # (rank, order, text, summary): a shard that failed on its own comes before one that was
    # stopped or never reported (the Job controller deletes a failed Job's other Pods).
    gaps: list[tuple[int, int, str, TerminationSummary | None]] = []
    verified = 0
    merge: TerminationSummary | None = None
    # The slices first: a merge that waited in vain for slice 2 is named after slice 2.
    head = newest.get(0)
    first = _summary(head) if head is not None else None
    # Every part must end as the merge did: all verified, or (an accepted CPU engine, which
    # the verdict then reports as such, never as verified) all cpu_engine.
    ended = "cpu_engine" if first is not None and first.outcome == "cpu_engine" else "verified"
    for order, index in enumerate([*range(1, count), 0]):
        found = newest.get(index)
        run = _summary(found) if found is not None else None
        why = _why_not(run, index, count, key, found is not None, ended=ended)
        if index == 0 and run is not None and run.key == key:
            merge = run
        if why is None:
            verified += 1
            continue
        gaps.append((_rank(run), order, f"shard {index} of {count}: {why}", run))
    gaps.sort(key=lambda gap: gap[:2])
    failed = next((run for *_, run in gaps if run is not None and run.outcome != "verified"), None)
    gap = gaps[0][2] if gaps else None
    attempts = max(tries.values(), default=0)
    return ShardsSeen(count, running, verified, merge, gap, failed, attempts)


# Outcomes of a runner that was stopped (SIGTERM: the Job's deadline, or its Pod deleted when
# another shard failed the Job) or has nothing of its own to say about its slice.
_STOPPED = frozenset({"timed_out"})


def _rank(run: TerminationSummary | None) -> int:
    """0: the shard reported a failure of its own (or a wrong key); 1: it was stopped;
    2: no Pod or no summary."""
    if run is None:
        return 2
    return 1 if run.outcome in _STOPPED else 0


def _index(pod: Manifest) -> int | None:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(INDEX_ANNOTATION)
    return int(raw) if isinstance(raw, str) and raw.isdigit() else None


def _summary(pod: Manifest) -> TerminationSummary | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated") or {}
        if status.get("name") == "warmup" and terminated.get("message"):
            return TerminationSummary.from_json(str(terminated["message"]))
    return None


def _why_not(
    run: TerminationSummary | None,
    index: int,
    count: int,
    key: str,
    seen: bool,
    *,
    ended: str = "verified",
) -> str | None:
    """Why this index's summary does not verify its part, or None."""
    if not seen:
        return "no Pod"
    if run is None:
        return "no runner summary"
    shard = run.shard
    if run.key is None and run.outcome != ended:  # it failed before it read its plan
        return f"{run.outcome}: {run.reason}"[:300]
    if index > 0:
        want = shard_key(key, index, count)
        if run.key != want or shard is None or shard.role != "slice" or shard.index != index:
            return f"speaks for key {run.key}, not its slice's {want}"
        return None if run.outcome == ended else f"{run.outcome}: {run.reason}"[:300]
    if run.key == shard_key(key, 0, count):  # slice 0 ended; the merge never ran or wrote
        return f"slice {run.outcome}: {run.reason}"[:300]
    if run.key != key or shard is None or shard.role != "merge" or shard.index != 0:
        return f"speaks for key {run.key}, not the merge of {key}"
    if run.outcome != ended:
        return f"merge {run.outcome}: {run.reason}"[:300]
    if shard.slice != ended:
        return f"its own slice was not verified ({shard.slice})"
    if shard.merged != count:
        return f"merged {shard.merged} of {count} slices"
    return None
