"""What serve mode counts in one Pod, across its engine starts, and the board it publishes.

The observer (`watch.py`) and the spec-decode reader (`specdecode.py`) add to one `ServeTally`;
the status port serves its `board()`, the contract's frozen `ServeBoard` of the same figures, and
the state file on the Pod's emptyDir holds its `to_json()`, which `load` reads back at the next
engine start (docs/runner.md, "Serve mode"). Standard library only.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from warmgate.contract.board import SHAPE_CHARS, ServeBoard, SpecDecodeFigures


@dataclass
class ServeTally:
    """Distinct shapes the engine ran unwarmed and bucket lookups it did not prepare (the first
    ``MAX_LISTED`` listed, all counted), engine starts, copy bytes skipped, the hooks' counters,
    the engine's spec-decode figures (``spec_decode``, as `specdecode.figures` writes them) and
    raw counters, and the engine plugin's drafter compiles after warmup (a metric only) and its
    direct warmup's closing line (issue 33)."""

    unwarmed: list[str] = field(default_factory=list)
    unwarmed_count: int = 0
    not_prepared: list[str] = field(default_factory=list)
    not_prepared_count: int = 0
    engine_starts: int = 0
    dropped_bytes: int = 0
    hooks: dict[str, Any] = field(default_factory=dict)
    spec_decode: dict[str, Any] | None = None
    spec_decode_totals: dict[str, Any] = field(default_factory=dict)
    drafter_compiles: int = 0
    drafter_warmup: dict[str, Any] = field(default_factory=dict)

    def board(self) -> ServeBoard:
        """The board the status port serves: a frozen copy, since the observer goes on counting
        while the port serialises it; texts cut as the operator's reader keeps them."""
        return ServeBoard(
            unwarmed=tuple(text[:SHAPE_CHARS] for text in self.unwarmed),
            unwarmed_count=self.unwarmed_count,
            not_prepared=tuple(text[:SHAPE_CHARS] for text in self.not_prepared),
            not_prepared_count=self.not_prepared_count,
            engine_starts=self.engine_starts,
            dropped_bytes=self.dropped_bytes,
            spec_decode=SpecDecodeFigures.from_json(self.spec_decode),
            hooks=copy.deepcopy(self.hooks),
            spec_decode_totals=copy.deepcopy(self.spec_decode_totals),
            drafter_warmup=copy.deepcopy(self.drafter_warmup),
        )

    def to_json(self) -> dict[str, Any]:
        """The state file's document."""
        return asdict(self)

    @classmethod
    def load(cls, path: Path) -> ServeTally:
        """The counts of earlier engine runs in this Pod: each field the file holds with the
        type of a fresh tally's (so ``spec_decode``, None there, always starts again); a fresh
        tally when the file is unreadable."""
        tally = cls()
        try:
            found = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return tally
        if isinstance(found, dict):
            for each in fields(tally):
                value = found.get(each.name)
                if type(value) is type(getattr(tally, each.name)):
                    setattr(tally, each.name, value)
        return tally

    def save(self, path: Path) -> None:
        """Write the state file through a temporary name, so a restart never reads half a file;
        a failure is passed over (counting must never stop the engine)."""
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            tmp.write_text(json.dumps(self.to_json(), sort_keys=True), encoding="utf-8")
            os.replace(tmp, path)
