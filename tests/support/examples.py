"""The repository's examples, loaded as the tests need them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from support.paths import EXAMPLES_DIR
from warmgate.api import SpecDecodeDeployment, parse_manifest


def example_path(stem: str) -> Path:
    """The example file `examples/<stem>.yaml`."""
    return EXAMPLES_DIR / f"{stem}.yaml"


def example_doc(stem: str, **spec: Any) -> dict[str, Any]:
    """The example as a dict, with top-level `spec` sections replaced by ``spec``."""
    doc: dict[str, Any] = yaml.safe_load(example_path(stem).read_text(encoding="utf-8"))
    doc["spec"].update(spec)
    return doc


def example_sdd(
    stem: str,
    *,
    namespace: str | None = None,
    name: str | None = None,
    uid: str | None = None,
    generation: int = 1,
    **spec: Any,
) -> SpecDecodeDeployment:
    """The example parsed, with the identity the server would give it."""
    doc = example_doc(stem, **spec)
    meta = doc["metadata"]
    meta["generation"] = generation
    meta.update({k: v for k, v in (("namespace", namespace), ("name", name), ("uid", uid)) if v})
    return parse_manifest(doc)
