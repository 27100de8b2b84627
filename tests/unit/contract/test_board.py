"""The status board as one type per mode for both sides: what the runner serves is what the
operator reads, and what a Pod pretending to be a runner serves reads as absent or zero."""

from __future__ import annotations

import json

from warmgate.contract.board import (
    STATUS_VERSION,
    ServeBoard,
    SpecDecodeFigures,
    WarmupBoard,
    read_board,
)
from warmgate.warmup.statusboard import Board

FIGURES = SpecDecodeFigures(
    drafts=40,
    draft_tokens=80,
    accepted_tokens=60,
    acceptance_rate=0.75,
    mean_acceptance_length=2.5,
    per_position_acceptance_rate=(0.9, 0.6),
    scraped_unix=1_790_000_000,
)


def test_both_modes_round_trip_through_json() -> None:
    warmup = WarmupBoard("gaudi2-tp1-abc", "sha256:1", "probe", {"decode": (57, 143)}, 12.5)
    serve = ServeBoard(
        unwarmed=("('decode', 8, 1, 64)",),
        unwarmed_count=1,
        not_prepared=("decode (8, 1, 64) -> (8, 1, 128)",),
        not_prepared_count=1,
        engine_starts=2,
        dropped_bytes=7,
        spec_decode=FIGURES,
        hooks={"attached": 1},
        spec_decode_totals={"earlier": {"drafts": 1}},
        elapsed_s=3.0,
    )
    for board in (warmup, serve):
        doc = json.loads(json.dumps(board.to_json()))
        assert doc["v"] == STATUS_VERSION
        assert read_board(doc) == board


def test_the_runners_board_serves_the_warmups_stage_and_progress() -> None:
    board = Board(WarmupBoard(key="k", plan_hash="sha256:1"))
    board.stage("engine")
    board.progress("prompt", 4, 4)
    board.progress("decode", 1, 24)
    read = read_board(board.snapshot())
    assert isinstance(read, WarmupBoard)
    assert (read.key, read.stage) == ("k", "engine")
    assert read.progress == {"prompt": (4, 4), "decode": (1, 24)}
    assert read.elapsed_s >= 0.0
    serving = Board(ServeBoard(engine_starts=1))
    serving.stage("probe")  # a warmup's stage means nothing on a serving board
    assert serving.snapshot()["engine_starts"] == 1
    assert "stage" not in serving.snapshot()


def test_what_is_no_runners_board_reads_as_absent_or_zero() -> None:
    assert read_board({}) is None
    assert read_board({"mode": "train"}) is None
    odd_warmup = {
        "mode": "warmup",
        "key": 3,
        "stage": "x" * 500,
        "progress": {"decode": [1, "2"], "prompt": [-4, 9], "sweep": "half"},
        "elapsed_s": -1,
    }
    read = read_board(odd_warmup)
    assert read == WarmupBoard(None, None, "x" * 64, {"prompt": (0, 9)}, 0.0)
    odd_serve = {
        "mode": "serve",
        "unwarmed": ["y" * 500, 7],
        "unwarmed_count": True,
        "not_prepared_count": -2,
        "spec_decode": {"drafts": 2.9, "per_position_acceptance_rate": [1.5, "x", -1]},
        "hooks": [],
    }
    served = read_board(odd_serve)
    assert isinstance(served, ServeBoard)
    assert served.unwarmed == ("y" * 128, "7")
    assert (served.unwarmed_count, served.not_prepared_count, served.hooks) == (0, 0, {})
    assert served.spec_decode == SpecDecodeFigures(
        drafts=2, per_position_acceptance_rate=(1.0, 0.0, 0.0)
    )
