"""What the engine plugin's direct drafter warmup did, read from its hook lines (issue 33).

The plugin (``hook/drafter_warm.py``) logs one ``drafter-warm`` line per planned shape and a
closing ``drafter-warmup`` line in every engine process that holds the drafter. A planned
shape counts as **warmed directly** only when every such process logged it ``ok=true``; a
shape some process logged ``ok=false`` is **failed** (with that process's reason); a shape no
process logged is **missing** (the plugin never reached it: not loaded, the proposer not
found, the engine stopped). This module only counts: the verdict (item 3, fail closed) is
decided from these counts elsewhere. Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from warmgate.contract.drafterwarm import DrafterWarmupSpec
from warmgate.contract.order import bucket_digest
from warmgate.contract.summary import DirectWarmupCounts
from warmgate.contract.sweepplan import Graph
from warmgate.warmup.hook.lines import HookEvent

# Failed and missing shapes the summary names, each in at most CHARS characters (the summary
# fits in 4096 bytes; the report has them all).
NAMED = 6
CHARS = 120


@dataclass
class DirectCheck:
    """The direct warmup's evidence: its closing states, the planned, warmed, failed and
    missing shapes, and the seconds the slowest process spent."""

    states: list[str] = field(default_factory=list)
    engine: str | None = None
    planned: tuple[Graph, ...] = ()
    warmed: list[Graph] = field(default_factory=list)
    failed: dict[Graph, str] = field(default_factory=dict)
    missing: list[Graph] = field(default_factory=list)
    seconds: float = 0.0
    reasons: list[str] = field(default_factory=list)

    @property
    def state(self) -> str:
        """``absent`` (no closing line), the one state every process ended in, or ``mixed``."""
        if not self.states:
            return "absent"
        return self.states[0] if len(set(self.states)) == 1 else "mixed"

    def counts(self) -> DirectWarmupCounts:
        """The termination summary's ``drafter_warmup``."""
        named = [f"{_text(g)}: {why}" for g, why in list(self.failed.items())[:NAMED]]
        named += [f"{_text(g)}: no line" for g in self.missing[: max(0, NAMED - len(named))]]
        return DirectWarmupCounts(
            state=self.state,
            engine=self.engine,
            planned=len(self.planned),
            warmed=len(self.warmed),
            failed=len(self.failed),
            missing=len(self.missing),
            seconds=self.seconds,
            warmed_digest=_digest(self.warmed),
            planned_digest=_digest(self.planned),
            not_warmed=tuple(n[:CHARS] for n in named),
            reason=(self.reasons[0] if self.reasons else "")[: CHARS * 2],
        )

    def to_json(self) -> dict[str, Any]:
        """The report's section: every shape, by what happened to it."""
        return {
            "state": self.state,
            "engine": self.engine,
            "planned": len(self.planned),
            "warmed": [list(g) for g in self.warmed],
            "failed": [{"shape": list(g), "reason": why} for g, why in self.failed.items()],
            "missing": [list(g) for g in self.missing],
            "seconds": self.seconds,
            "reasons": self.reasons,
        }


def _text(g: Graph) -> str:
    return f"({g[0]}, {g[1]}, {g[2]}, {g[3]})"


def _digest(shapes: Iterable[Graph]) -> str:
    """The runner's digest algorithm over the shapes, phase as 0 (decode) / 1 (prompt)."""
    rows = sorted((1 if g[0] == "prompt" else 0, g[1], g[2], g[3]) for g in shapes)
    return bucket_digest(rows)


def _graph(value: Any) -> Graph | None:
    if (
        isinstance(value, list)
        and len(value) == 4
        and value[0] in ("decode", "prompt")
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value[1:])
    ):
        return (str(value[0]), int(value[1]), int(value[2]), int(value[3]))
    return None


def check_direct(events: Iterable[HookEvent], spec: DrafterWarmupSpec) -> DirectCheck:
    """Count the plugin's lines against the planned shapes."""
    check = DirectCheck(planned=spec.shapes)
    ok: dict[int, set[Graph]] = {}
    failed: dict[Graph, str] = {}
    for event in events:
        if event.kind == "drafter-warm" and (g := _graph(event.fields.get("graph"))) is not None:
            if event.fields.get("ok") is True:
                ok.setdefault(event.pid, set()).add(g)
            else:
                failed.setdefault(g, str(event.fields.get("reason") or "failed"))
        elif event.kind == "drafter-warmup":
            check.states.append(str(event.fields.get("state", "")))
            engine = event.fields.get("engine")
            check.engine = engine if isinstance(engine, str) else check.engine
            seconds = event.fields.get("seconds")
            if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
                check.seconds = max(check.seconds, float(seconds))
            if event.fields.get("reason"):
                check.reasons.append(str(event.fields["reason"]))
    processes = list(ok.values())
    for shape in spec.shapes:
        if shape in failed:
            check.failed[shape] = failed[shape]
        elif processes and all(shape in done for done in processes):
            check.warmed.append(shape)
        else:
            check.missing.append(shape)
    return check
