"""The termination summary: the runner's last word, in its container's termination message.

One frozen dataclass for both sides. The runner builds it (`runner.report.summary`) and writes
`to_json()`, compact JSON shrunk to the 4096 bytes Kubernetes keeps; the operator reads it back
with `from_json` from the Pods it trusts (`reconcile.warmup_state`). Reading is lenient: a
field of the wrong type reads as absent, and anything that is not the runner's JSON object with
an ``outcome`` is no summary at all (None), never a pass. The full report on the volume
(docs/runner.md, "Report") carries what the summary leaves out.

Format version 7 (the report's version, ``v``): 2: list copies and unreadable lists; 3: drafter;
4: known_gaps; 5: engine kind and ``code``; 6: drafter driven and missing; 7: drafter_warmup,
the direct drafter warmup's evidence, and drafter unverified, cause and detail (issue 33,
docs/runner.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from warmgate.contract import schema

SUMMARY_VERSION: Final = 7
# Kubernetes keeps at most 4096 bytes of a container's termination message.
SUMMARY_LIMIT: Final = 4096
ENGINE_KINDS: Final = ("gaudi", "cpu")
# Free text kept whole up to this many characters, list entries up to this many (40 lines of
# ~60 bytes already fill the budget).
_REASON_CAP: Final = 1000
# What the operator reads back: the 4096 bytes Kubernetes keeps (more only from a hand-written
# status), 8 levels (the runner writes 3), each text field cut to this many characters.
_READ_LIMIT: Final = 16 * 1024
_READ_DEPTH: Final = 8
_TEXT_CAP: Final = 512
_LIST_CAP: Final = 40
# The lists shrink first, in this order, then the reason, then these fields go.
_LISTS: Final = ("unwarmed", "mismatches", "unreadable", "known_gaps")
_DROPPED_LAST: Final = ("report", "key", "plan_hash")
# The drafter's ``detail`` (the hook's own reason) is kept up to this many characters.
DETAIL_CAP: Final = 200
# Why planned drafter shapes lack evidence (``drafter.cause``), first cause first: the engine
# loaded no hook; the hook found no model runner or a target moved; Habana's compile metric
# could not be read; the drafter's proposer (class or method) was not found; shapes never
# reached by the warmup; drafter graphs compiled in the probe.
DRAFTER_CAUSES: Final = (
    "plugin-not-loaded",
    "hook-not-attached",
    "metric-unreadable",
    "proposer-not-found",
    "shapes-missing",
    "probe-compiles",
    "direct-warmup-failed",
    "direct-warmup-incomplete",
)


def _opt_count(value: object) -> int | None:
    return schema.count(value) if value is not None else None


@dataclass(frozen=True)
class DrafterCounts:
    """The compile hook's check of the drafter's graphs, in counts (``drafter``): the hook's
    state (off, attached, ...), whether the drafter is verified (None: not decided), the planned
    graphs, those with evidence of being warmed, those never reached (accepted by complete:
    false or BestEffort), entries for compiles seen in the probe and known gaps; ``unverified``:
    planned graphs without evidence (all of them when the hook could not see), ``cause`` why
    (one of DRAFTER_CAUSES, "" when verified) and ``detail`` the hook's own reason."""

    hook: str
    verified: bool | None
    expected: int = 0
    driven: int = 0
    missing: int = 0
    probe: int = 0
    gaps: int = 0
    unverified: int = 0
    cause: str = ""
    detail: str = ""
    # The planned drafter shapes of every source (the sweep's and the direct warmup's set, issue
    # 33), when a direct warmup was planned; 0: only the sweep's (``expected``).
    planned: int = 0

    @property
    def total(self) -> int:
        """The planned drafter shapes the verdict requires evidence for."""
        return max(self.planned, self.expected)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "hook": self.hook,
            "verified": self.verified,
            "expected": self.expected,
            "driven": self.driven,
            "missing": self.missing,
            "probe": self.probe,
            "gaps": self.gaps,
        }
        if self.planned:
            doc["planned"] = self.planned
        if self.cause:  # a verified drafter's counts stay as they were
            doc |= {
                "unverified": self.unverified,
                "cause": self.cause,
                "detail": self.detail[:DETAIL_CAP],
            }
        return doc

    @classmethod
    def from_json(cls, data: object) -> DrafterCounts | None:
        """None when the run had no drafter check (or the field is not the runner's)."""
        if not isinstance(data, dict) or not isinstance(data.get("hook"), str):
            return None
        verified, cause = data.get("verified"), data.get("cause")
        return cls(
            hook=data["hook"][:_TEXT_CAP],
            verified=verified if isinstance(verified, bool) else None,
            expected=schema.count(data.get("expected")),
            driven=schema.count(data.get("driven")),
            missing=schema.count(data.get("missing")),
            probe=schema.count(data.get("probe")),
            gaps=schema.count(data.get("gaps")),
            unverified=schema.count(data.get("unverified")),
            cause=cause if cause in DRAFTER_CAUSES else ("unknown" if cause else ""),
            detail=(schema.text(data.get("detail")) or "")[:DETAIL_CAP],
            planned=schema.count(data.get("planned")),
        )


@dataclass(frozen=True)
class DirectWarmupCounts:
    """The engine plugin's direct drafter warmup (``drafter_warmup``, issue 33): how it ended
    (``state``: done, off, error, unreadable, no-drafter, mixed across processes, or absent when
    no process logged its closing line), on which engine, and the planned shapes by what
    happened to them: ``warmed`` (every engine process warmed it, the evidence "warmed
    directly"), ``failed`` (a process failed it), ``missing`` (no line: never reached). The
    digests are ``bucket_digest`` over the shapes as rows (phase 0 decode, 1 prompt, batch,
    query, blocks) so a reader can tell the warmed set equals the planned one without the
    list; ``not_warmed`` names the first failed and missing shapes with the reason."""

    state: str
    engine: str | None = None
    planned: int = 0
    warmed: int = 0
    failed: int = 0
    missing: int = 0
    seconds: float = 0.0
    warmed_digest: str | None = None
    planned_digest: str | None = None
    not_warmed: tuple[str, ...] = ()
    reason: str = ""

    @property
    def complete(self) -> bool:
        """Every planned shape warmed directly, and the sets' digests agree."""
        return (
            self.state == "done"
            and self.planned == self.warmed
            and self.warmed_digest == self.planned_digest
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "engine": self.engine,
            "planned": self.planned,
            "warmed": self.warmed,
            "failed": self.failed,
            "missing": self.missing,
            "seconds": self.seconds,
            "warmed_digest": self.warmed_digest,
            "planned_digest": self.planned_digest,
            "not_warmed": list(self.not_warmed),
            "reason": self.reason[:_REASON_CAP],
        }

    @classmethod
    def from_json(cls, data: object) -> DirectWarmupCounts | None:
        """None when the run had no direct warmup (or the field is not the runner's)."""
        if not isinstance(data, dict) or not isinstance(data.get("state"), str):
            return None
        seconds = schema.number(data.get("seconds"))
        return cls(
            state=data["state"],
            engine=schema.text(data.get("engine")),
            planned=schema.count(data.get("planned")),
            warmed=schema.count(data.get("warmed")),
            failed=schema.count(data.get("failed")),
            missing=schema.count(data.get("missing")),
            seconds=seconds if seconds is not None else 0.0,
            warmed_digest=schema.text(data.get("warmed_digest")),
            planned_digest=schema.text(data.get("planned_digest")),
            not_warmed=schema.texts(data.get("not_warmed")),
            reason=str(data.get("reason") or ""),
        )


@dataclass(frozen=True)
class EngineKind:
    """Which engine ran (``engine``): a Gaudi or a CPU build of vLLM, its version and the
    platform it reported (docs/runner.md, "A CPU engine")."""

    kind: str | None
    vllm: str | None = None
    platform: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "vllm": self.vllm, "platform": self.platform}

    @classmethod
    def from_json(cls, data: object) -> EngineKind | None:
        if not isinstance(data, dict):
            return None
        kind = data.get("kind")
        return cls(
            kind=kind if kind in ENGINE_KINDS else None,
            vllm=schema.text(data.get("vllm"), _TEXT_CAP),
            platform=schema.text(data.get("platform"), _TEXT_CAP),
        )


@dataclass(frozen=True)
class ShardReport:
    """A sharded warmup's run (issue 38): its role (``slice`` or ``merge``), the slice index and
    the count; a merge also says how many slices it merged and how its own Pod's slice ended
    (``slice``: an outcome label)."""

    role: str
    index: int
    count: int
    merged: int | None = None
    slice: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"role": self.role, "index": self.index, "count": self.count}
        if self.merged is not None:
            doc["merged"] = self.merged
        if self.slice is not None:
            doc["slice"] = self.slice
        return doc

    @classmethod
    def from_json(cls, data: object) -> ShardReport | None:
        """Lenient: anything but an object with a known role and integer index and count is
        None (then the run does not speak for a slice)."""
        if not isinstance(data, dict) or data.get("role") not in ("slice", "merge"):
            return None
        index, count, merged = data.get("index"), data.get("count"), data.get("merged")
        if type(index) is not int or type(count) is not int:
            return None
        return cls(
            role=str(data["role"]),
            index=schema.count(index),
            count=schema.count(count),
            merged=schema.count(merged) if type(merged) is int else None,
            slice=schema.text(data.get("slice"), _TEXT_CAP),
        )


@dataclass(frozen=True)
class TerminationSummary:
    """What one run ended with: its outcome (label and code), why, the plan and cache key it
    speaks for, the unwarmed shapes and known gaps (with their full counts), the bucket lists
    that did not match or could not be read, the KV blocks the engine measured, the cache's
    status, the report's path on the volume, the drafter's counts and the engine's kind.
    ``truncated``: `to_json` had to shorten it to fit (the report has everything)."""

    outcome: str
    reason: str = ""
    code: int | None = None
    plan_hash: str | None = None
    key: str | None = None
    unwarmed: tuple[str, ...] = ()
    known_gaps: tuple[str, ...] = ()
    mismatches: tuple[str, ...] = ()
    unreadable: tuple[str, ...] = ()
    kv_blocks: int | None = None
    cache: str | None = None
    report: str | None = None
    drafter: DrafterCounts | None = None
    engine: EngineKind | None = None
    drafter_warmup: DirectWarmupCounts | None = None
    unwarmed_count: int | None = None
    known_gaps_count: int | None = None
    truncated: bool = False
    version: int = SUMMARY_VERSION
    # A sharded warmup's slice or merge (issue 38); absent from unsharded runs.
    shard: ShardReport | None = None

    def to_json(self, limit: int = SUMMARY_LIMIT) -> str:
        """Compact JSON of at most ``limit`` bytes: the free text capped, list entries dropped
        from the end, then the text cut further; the counts and the outcome always survive."""
        doc: dict[str, Any] = {
            "v": self.version,
            "outcome": self.outcome,
            "code": self.code,
            "reason": self.reason,
            "plan_hash": self.plan_hash,
            "key": self.key,
            "unwarmed_count": _total(self.unwarmed_count, self.unwarmed),
            "unwarmed": list(self.unwarmed),
            "known_gaps_count": _total(self.known_gaps_count, self.known_gaps),
            "known_gaps": list(self.known_gaps),
            "mismatches": list(self.mismatches),
            "unreadable": list(self.unreadable),
            "kv_blocks": self.kv_blocks,
            "cache": self.cache,
            "report": self.report,
        }
        if self.drafter is not None:
            doc["drafter"] = self.drafter.to_json()
        if self.engine is not None:
            doc["engine"] = self.engine.to_json()
        if self.drafter_warmup is not None:
            doc["drafter_warmup"] = self.drafter_warmup.to_json()
        if self.shard is not None:
            doc["shard"] = self.shard.to_json()
        if self.truncated:
            doc["truncated"] = True
        return _shrink(doc, limit)

    @classmethod
    def from_json(cls, text: str) -> TerminationSummary | None:
        """The summary, or None when the text is not the runner's JSON: bounded in size, depth
        and numbers (`schema.decode`); nothing in it raises (issue 34)."""
        try:
            data = schema.decode(text, max_bytes=_READ_LIMIT, max_depth=_READ_DEPTH)
        except schema.DocumentError:
            return None
        if not isinstance(data.get("outcome"), str):
            return None
        kv, version, code = data.get("kv_blocks"), data.get("v"), data.get("code")
        return cls(
            outcome=data["outcome"][:_TEXT_CAP],
            reason=str(data.get("reason") or "")[:_REASON_CAP],
            code=schema.count(code) if type(code) is int else None,
            plan_hash=schema.text(data.get("plan_hash"), _TEXT_CAP),
            key=schema.text(data.get("key"), _TEXT_CAP),
            unwarmed=schema.texts(data.get("unwarmed"), _TEXT_CAP),
            known_gaps=schema.texts(data.get("known_gaps"), _TEXT_CAP),
            mismatches=schema.texts(data.get("mismatches"), _TEXT_CAP),
            unreadable=schema.texts(data.get("unreadable"), _TEXT_CAP),
            kv_blocks=schema.count(kv) if type(kv) is int else None,
            cache=schema.text(data.get("cache"), _TEXT_CAP),
            report=schema.text(data.get("report"), _TEXT_CAP),
            drafter=DrafterCounts.from_json(data.get("drafter")),
            engine=EngineKind.from_json(data.get("engine")),
            drafter_warmup=DirectWarmupCounts.from_json(data.get("drafter_warmup")),
            unwarmed_count=_opt_count(data.get("unwarmed_count")),
            known_gaps_count=_opt_count(data.get("known_gaps_count")),
            truncated=data.get("truncated") is True,
            version=schema.count(version) if type(version) is int else 0,
            shard=ShardReport.from_json(data.get("shard")),
        )


def _total(count: int | None, entries: tuple[str, ...]) -> int:
    return len(entries) if count is None else count


def _encode(doc: dict[str, Any]) -> str:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=True)


def _shrink(doc: dict[str, Any], limit: int) -> str:
    if len(doc["reason"]) > _REASON_CAP:
        doc["reason"], doc["truncated"] = doc["reason"][:_REASON_CAP], True
    for name in _LISTS:
        if len(doc[name]) > _LIST_CAP:
            doc[name], doc["truncated"] = doc[name][:_LIST_CAP], True
        while len(_encode(doc)) > limit and doc[name]:
            doc[name].pop()
            doc["truncated"] = True
    while len(_encode(doc)) > limit and doc["reason"]:
        doc["reason"] = doc["reason"][: len(doc["reason"]) // 2]
        doc["truncated"] = True
    for name in _DROPPED_LAST:
        if len(_encode(doc)) > limit:
            doc[name] = None
    return _encode(doc)
