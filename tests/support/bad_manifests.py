"""Load the bad-manifest corpus: base.yaml with each case's JSON merge patch applied."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import yaml

from support.paths import REPO_ROOT

HERE = REPO_ROOT / "tests" / "integration" / "bad_manifests"


@dataclass(frozen=True)
class BadCase:
    """One manifest the apiserver (and pydantic) must refuse."""

    name: str
    why: str
    manifest: dict[str, Any]
    expect: tuple[str, ...]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge, anything else replaces, null deletes."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def base_manifest() -> dict[str, Any]:
    """The valid manifest every case patches."""
    data: dict[str, Any] = yaml.safe_load((HERE / "base.yaml").read_text(encoding="utf-8"))
    return data


def load_cases() -> list[BadCase]:
    """Every case of corpus.yaml, in file order."""
    base = base_manifest()
    raw = yaml.safe_load((HERE / "corpus.yaml").read_text(encoding="utf-8"))
    return [
        BadCase(c["name"], c["why"], merge_patch(base, c["patch"]), tuple(c["expect"])) for c in raw
    ]
