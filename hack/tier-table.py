"""The closing table of `make test`: the tier reports of its two pytest runs joined.

    python hack/tier-table.py RUN.json [RUN.json ...]

Each file is what tests/support/tier_report.py wrote for one run (WARMGATE_TIER_REPORT); a
missing or unreadable file is named and left out, so the table never hides that a run wrote none.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.tier_report import join, table_lines


def main(paths: list[str]) -> int:
    runs = []
    for path in paths:
        try:
            runs.append(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, ValueError) as err:
            print(f"tiers: no report from {path} ({err})")
    for line in table_lines(join(runs)):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
