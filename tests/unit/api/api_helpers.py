"""Paths and loaders shared by the API unit tests."""

from __future__ import annotations

from pathlib import Path

from support.bad_manifests import BadCase, base_manifest, load_cases, merge_patch

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
CORPUS_DIR = REPO / "tests" / "integration" / "bad_manifests"

__all__ = [
    "CORPUS_DIR",
    "EXAMPLES",
    "REPO",
    "BadCase",
    "base_manifest",
    "load_cases",
    "merge_patch",
]
