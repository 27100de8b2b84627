"""Paths and loaders shared by the API unit tests."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
CORPUS_DIR = REPO / "tests" / "integration" / "bad_manifests"

# The corpus loader lives next to its data, under tests/integration; make it importable here.
if str(CORPUS_DIR.parent) not in sys.path:
    sys.path.insert(0, str(CORPUS_DIR.parent))

from bad_manifests.corpus import BadCase, base_manifest, load_cases, merge_patch  # noqa: E402

__all__ = [
    "CORPUS_DIR",
    "EXAMPLES",
    "REPO",
    "BadCase",
    "base_manifest",
    "load_cases",
    "merge_patch",
]
