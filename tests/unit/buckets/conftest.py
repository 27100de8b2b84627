"""Makes ``bucket_golden``, the golden-data helper next to this file, importable in any mode."""

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
