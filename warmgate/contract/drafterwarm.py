"""The plan's ``drafter_warmup``: every drafter shape the engine's plugin warms directly.

Format ``warmgate-drafter-warmup/1`` (issue 33 item 1). The operator writes it from
``prove_drafter``'s whole shape set (``reconcile/planning/drafter_plan.DrafterPlan.warmup_spec``):
partial drafts and structured-output prefills included, the graphs the engine's own warmup
already builds too (run again they are recipe-cache hits). Each shape is the engine's form of a
drafter graph, ``[phase, batch, query, blocks]`` (``blocks``: the block-list length, as
vllm-gaudi's ``_check_config`` and the compile hook name it).

The runner writes :meth:`DrafterWarmupSpec.engine_document` to ``<work_dir>/drafter-warmup.json``
and names that file in the engine's environment (``WARMGATE_DRAFTER_WARMUP``); the engine plugin
(``hook/drafter_warm.py``) reads it in the engine process, after the engine's own graph warmup
and before the engine reports healthy. Serve mode does the same in every serving process.
Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from warmgate.contract.schema import Fields, PlanError
from warmgate.contract.sweepplan import Graph, graphs

DRAFTER_WARMUP_FORMAT: Final = "warmgate-drafter-warmup/1"
# The environment variable that names the engine-side document, and its file name.
DRAFTER_WARMUP_ENV: Final = "WARMGATE_DRAFTER_WARMUP"
DRAFTER_WARMUP_FILE: Final = "drafter-warmup.json"
# A test switch for the engine side: "0" makes the plugin skip the direct warmup (it logs a
# closing line saying so). The runner never sets it.
DRAFTER_WARMUP_SWITCH: Final = "WARMGATE_DRAFTER_WARMUP_ENABLED"
METHODS: Final = ("eagle", "eagle3", "mtp")
# The vllm-gaudi profiles the plugin knows (buckets/engine/config.Profile), by pinned commit.
PROFILES: Final = ("v0.26.0", "main-2026-08")


@dataclass(frozen=True)
class DrafterWarmupSpec:
    """The drafter shapes to warm directly: the method, k, the engine's block size and
    max_model_len (the plan's: the plugin builds positions and block tables from the engine's
    own and checks them against these), the shapes, sorted, without duplicates, and the
    vllm-gaudi profile the plan was made for (the plugin's surface record picks by it)."""

    method: str
    k: int
    block_size: int
    max_model_len: int
    shapes: tuple[Graph, ...]
    profile: str = "v0.26.0"

    def to_json(self) -> dict[str, Any]:
        """The plan's ``drafter_warmup`` object (also the engine-side document)."""
        return {
            "format": DRAFTER_WARMUP_FORMAT,
            "method": self.method,
            "k": self.k,
            "block_size": self.block_size,
            "max_model_len": self.max_model_len,
            "profile": self.profile,
            "shapes": [list(g) for g in self.shapes],
        }

    def write(self, work_dir: Path) -> Path:
        """Write the engine-side document into ``work_dir``; returns its path."""
        work_dir.mkdir(parents=True, exist_ok=True)
        path = work_dir / DRAFTER_WARMUP_FILE
        text = json.dumps(self.to_json(), separators=(",", ":"))
        path.write_text(text + "\n", encoding="utf-8")
        return path


def make_spec(
    method: str,
    k: int,
    block_size: int,
    max_model_len: int,
    shapes: Iterable[Graph],
    *,
    profile: str = "v0.26.0",
) -> DrafterWarmupSpec:
    """A spec with its shapes sorted and deduplicated (one text per plan, one Job name)."""
    ordered = tuple(sorted(set(shapes)))
    return DrafterWarmupSpec(method, k, block_size, max_model_len, ordered, profile)


def parse_drafter_warmup(f: Fields) -> DrafterWarmupSpec | None:
    """The ``drafter_warmup`` object, or None when the plan has none."""
    if not f.present:
        return None
    f.format(DRAFTER_WARMUP_FORMAT)
    method = f.text("method")
    if method not in METHODS:
        f.error(f"method: expected one of {list(METHODS)}, got {method!r}")
    shapes = graphs(f, "shapes")
    spec = DrafterWarmupSpec(
        method=method,
        k=f.integer("k", lo=1),
        block_size=f.integer("block_size", lo=1),
        max_model_len=f.integer("max_model_len", lo=1),
        shapes=shapes,
        profile=f.choice("profile", PROFILES, "v0.26.0"),
    )
    if len(set(spec.shapes)) != len(spec.shapes):
        f.error("shapes: each shape once")
    f.finish()
    return spec


def read_drafter_warmup(doc: object) -> DrafterWarmupSpec:
    """An engine-side document (or the plan's object) as the plugin reads it; PlanError names
    every problem."""
    errors: list[str] = []
    spec = parse_drafter_warmup(Fields(doc, "drafter_warmup", errors))
    if errors or spec is None:
        raise PlanError(errors or ["drafter_warmup: required"])
    return spec
