"""Golden data of the shared vllm-gaudi bucketing reference, loaded from ``golden/``."""

from __future__ import annotations

import ast
import json
from functools import cache
from pathlib import Path
from typing import Any

from warmgate.buckets import EngineShapeConfig

GOLDEN = Path(__file__).parent / "golden"
Bucket = tuple[int, int, int]


@cache
def tables() -> dict[str, Any]:
    """tables.json: counts, fingerprints, lookups, range examples (copied from the doc)."""
    data: dict[str, Any] = json.loads((GOLDEN / "tables.json").read_text())
    return data


def bucket_list(name: str) -> list[Bucket]:
    """A golden list ``golden/<name>.txt``: '#' comment lines, then comma-separated tuples."""
    body = " ".join(
        line
        for line in (GOLDEN / f"{name}.txt").read_text().splitlines()
        if not line.startswith("#")
    )
    parsed = ast.literal_eval(f"[{body}]")
    return [tuple(b) for b in parsed]


def config(name: str, **kwargs: Any) -> EngineShapeConfig:
    """The doc's config ``name`` (A, B, C, D, PR624) with block size 128 and extra fields."""
    fields = dict(tables()["configs"][name])
    fields.setdefault("profile", "main-2026-08")
    fields.update(kwargs)
    return EngineShapeConfig(**fields)
