"""Makes the test doubles (tests/doubles) importable for the runner's end-to-end tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "doubles"))
