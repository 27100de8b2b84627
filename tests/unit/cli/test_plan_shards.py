"""``warmgate plan``'s sharded-warmup lines (issue 38)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from warmgate.cli import main

EXAMPLES = Path(__file__).parents[3] / "examples"


def test_table_prints_the_sharded_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(EXAMPLES / "llama31-8b-eagle3-gaudi2.yaml")]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if " N=" in line]
    assert [line.split("N=")[1].split(" ")[0] for line in lines] == ["2", "4", "8"]
    assert lines[0].startswith("sharded    N=2 (2 cards): ")
    assert "in one process" in lines[0]
    assert "balance 1.0" in lines[0]


def test_json_and_the_plans_bound(capsys: pytest.CaptureFixture[str]) -> None:
    # llama31-8b-seeds plans 7 prompt buckets: 8 engines cannot each get one.
    assert main(["plan", str(EXAMPLES / "llama31-8b-seeds.yaml"), "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["sharded"]
    assert [r["shards"] for r in rows] == [2, 4, 8]
    assert rows[2] == {"shards": 8, "error": "at most 7 shards for this plan"}
    for row in rows[:2]:
        assert row["wall_s"][1] < row["single_s"][1]
        assert row["goal_ratio"] <= 1.2
    assert main(["plan", str(EXAMPLES / "llama31-8b-seeds.yaml"), "--shards", "3"]) == 0
    assert "sharded    N=3 (3 cards)" in capsys.readouterr().out
