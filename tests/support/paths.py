"""Where things are in the repository, for tests that read its files."""

from __future__ import annotations

from pathlib import Path

from warmgate.api.constants import CRD_FILE

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = REPO_ROOT / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.yaml"))
CRD_PATH = REPO_ROOT / CRD_FILE
DOCS = REPO_ROOT / "docs"
