"""The status board: the runner's live document on its status port (``GET /warmgate/status``).

One frozen type per mode for both sides. The runner keeps the current one on its `Board`
(`warmup.statusboard`) and serves `to_json()`; the operator reads it through the Pod IP and
turns it back into the same type with `read_board` (`runtime.gather`), which its decisions
take: progress (`reconcile.progress`), drift (`reconcile.drift`) and spec-decode acceptance
(`reconcile.acceptance`). The Pods serving it have no API rights and anyone who can run a Pod
may answer on that port, so reading is lenient and bounded: a field of the wrong type reads as
absent or zero, text is cut, and a document of no known mode is none (docs/operator.md, "How
progress and drift reach the operator").

Format version 1 (``v``); ``mode`` says which of the two it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from warmgate.contract import schema

STATUS_PATH: Final = "/warmgate/status"
METRICS_PATH: Final = "/metrics"
STATUS_VERSION: Final = 1
# The engine phases whose bars count warmed buckets (the warmup's progress).
ENGINE_PHASES: Final = ("prompt", "decode")
# What a reader keeps of free text from the board.
STAGE_CHARS: Final = 64
SHAPE_CHARS: Final = 128
MAX_POSITIONS: Final = 64


def _rate(value: object) -> float:
    number = schema.number(value)
    return 0.0 if number is None else min(1.0, max(0.0, number))


@dataclass(frozen=True)
class SpecDecodeFigures:
    """The engine's own spec-decode counters, summed over the Pod's engine starts
    (`serve.specdecode`), and the two figures they give; rates are None before the first
    draft. ``error``: the last read of the engine's /metrics failed (the figures are older)."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    per_position_acceptance_rate: tuple[float, ...] = ()
    scraped_unix: int | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return schema.fields_json(self)

    @classmethod
    def from_json(cls, data: object) -> SpecDecodeFigures | None:
        """None when the engine exported no counters yet (or the field is not the runner's)."""
        if not isinstance(data, dict):
            return None
        counts = [schema.number(data.get(k)) for k in ("drafts", "draft_tokens", "accepted_tokens")]
        drafts, tokens, accepted = (schema.count(int(c)) if c is not None else 0 for c in counts)
        rates = data.get("per_position_acceptance_rate")
        positions = rates[:MAX_POSITIONS] if isinstance(rates, list) else []
        scraped, error = data.get("scraped_unix"), data.get("error")
        return cls(
            drafts=drafts,
            draft_tokens=tokens,
            accepted_tokens=accepted,
            acceptance_rate=schema.number(data.get("acceptance_rate")),
            mean_acceptance_length=schema.number(data.get("mean_acceptance_length")),
            per_position_acceptance_rate=tuple(_rate(r) for r in positions),
            scraped_unix=schema.count(scraped) if type(scraped) is int else None,
            error=str(error)[:300] if error is not None else None,
        )


@dataclass(frozen=True)
class WarmupBoard:
    """A warmup runner's board: the plan it warms (cache key, plan hash), its stage, and per
    counter (the engine's phases, the sweep) the furthest (done, total) so far."""

    key: str | None = None
    plan_hash: str | None = None
    stage: str | None = None
    progress: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    elapsed_s: float = 0.0

    def with_progress(self, what: str, done: int, total: int) -> WarmupBoard:
        return replace(self, progress={**self.progress, what: (done, total)})

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"v": STATUS_VERSION, "mode": "warmup"}
        doc.update(key=self.key, plan_hash=self.plan_hash)
        if self.stage is not None:
            doc["stage"] = self.stage
        if self.progress:
            doc["progress"] = {what: list(pair) for what, pair in self.progress.items()}
        return {**doc, "elapsed_s": self.elapsed_s}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> WarmupBoard:
        found = doc.get("progress")
        progress = {}
        for what, value in found.items() if isinstance(found, dict) else ():
            if isinstance(value, list) and len(value) == 2 and all(type(v) is int for v in value):
                progress[str(what)[:STAGE_CHARS]] = (schema.count(value[0]), schema.count(value[1]))
        stage = doc.get("stage")
        elapsed = schema.number(doc.get("elapsed_s"))
        return cls(
            key=schema.text(doc.get("key"), SHAPE_CHARS),
            plan_hash=schema.text(doc.get("plan_hash"), SHAPE_CHARS),
            stage=str(stage)[:STAGE_CHARS] if stage else None,
            progress=progress,
            elapsed_s=elapsed if elapsed is not None and elapsed >= 0 else 0.0,
        )


@dataclass(frozen=True)
class ServeBoard:
    """A serving Pod's board (serve mode): the distinct shapes its engine ran unwarmed and the
    bucket lookups it did not prepare (the first ones listed, all counted), engine starts,
    log bytes the parser skipped, the compile hook's counts, and the spec-decode figures.
    ``hooks`` and ``spec_decode_totals`` are the runner's own bookkeeping, shown as they are;
    the operator reads neither."""

    unwarmed: tuple[str, ...] = ()
    unwarmed_count: int = 0
    not_prepared: tuple[str, ...] = ()
    not_prepared_count: int = 0
    engine_starts: int = 0
    dropped_bytes: int = 0
    spec_decode: SpecDecodeFigures | None = None
    hooks: Mapping[str, Any] = field(default_factory=dict)
    spec_decode_totals: Mapping[str, Any] = field(default_factory=dict)
    elapsed_s: float = 0.0
    # The engine plugin's direct drafter warmup in this Pod's last engine start, as its closing
    # line said (state, planned, warmed, failed, seconds; issue 33); empty: none ran.
    drafter_warmup: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "v": STATUS_VERSION,
            "mode": "serve",
            "drafter_warmup": dict(self.drafter_warmup),
            "unwarmed": list(self.unwarmed),
            "unwarmed_count": self.unwarmed_count,
            "not_prepared": list(self.not_prepared),
            "not_prepared_count": self.not_prepared_count,
            "engine_starts": self.engine_starts,
            "dropped_bytes": self.dropped_bytes,
            "hooks": dict(self.hooks),
            "spec_decode": self.spec_decode.to_json() if self.spec_decode else None,
            "spec_decode_totals": dict(self.spec_decode_totals),
            "elapsed_s": self.elapsed_s,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ServeBoard:
        hooks, totals = doc.get("hooks"), doc.get("spec_decode_totals")
        elapsed = schema.number(doc.get("elapsed_s"))
        direct = doc.get("drafter_warmup")
        return cls(
            drafter_warmup=direct if isinstance(direct, dict) else {},
            unwarmed=schema.texts(doc.get("unwarmed"), SHAPE_CHARS),
            unwarmed_count=schema.count(doc.get("unwarmed_count")),
            not_prepared=schema.texts(doc.get("not_prepared"), SHAPE_CHARS),
            not_prepared_count=schema.count(doc.get("not_prepared_count")),
            engine_starts=schema.count(doc.get("engine_starts")),
            dropped_bytes=schema.count(doc.get("dropped_bytes")),
            spec_decode=SpecDecodeFigures.from_json(doc.get("spec_decode")),
            hooks=hooks if isinstance(hooks, dict) else {},
            spec_decode_totals=totals if isinstance(totals, dict) else {},
            elapsed_s=elapsed if elapsed is not None and elapsed >= 0 else 0.0,
        )


RunnerBoard = WarmupBoard | ServeBoard


def read_board(doc: Mapping[str, Any]) -> RunnerBoard | None:
    """The board a runner served, by its mode; None for any other document."""
    mode = doc.get("mode")
    if mode == "warmup":
        return WarmupBoard.from_json(doc)
    if mode == "serve":
        return ServeBoard.from_json(doc)
    return None
