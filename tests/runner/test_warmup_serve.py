"""Serve mode's pieces in-process: the watch over the engine's output (counts, line hooks), the
state file, and the progress the warmup puts on the status board."""

from __future__ import annotations

import io
from pathlib import Path

from warmgate.contract.board import SHAPE_CHARS, ServeBoard, WarmupBoard
from warmgate.warmup.runner.report import Progress
from warmgate.warmup.serve.tally import ServeTally
from warmgate.warmup.serve.watch import Watch, samples
from warmgate.warmup.statusboard import Board

UNWARMED = "WARNING 11-30 10:00:00 [hpu_model_runner.py:3588] Configuration: ('decode', 8, 1, 64) was not warmed-up!\n"  # noqa: E501


def test_a_shape_split_across_chunks_is_counted_once() -> None:
    changes: list[int] = []
    state = ServeTally()
    watch = Watch(state, lambda: changes.append(state.unwarmed_count))
    watch.feed(UNWARMED[:40], "out")
    watch.feed(UNWARMED[40:], "out")
    watch.feed(UNWARMED, "out")
    assert state.unwarmed == ["('decode', 8, 1, 64)"]
    assert changes == [1]


def test_line_hooks_see_every_line_and_count_under_hooks() -> None:
    state = ServeTally()
    watch = Watch(state, lambda: None)
    seen: list[str] = []

    def compile_hook(line: str) -> None:  # the seam for `warmgate-hook ... compile ...` lines
        seen.append(line)
        if line.startswith("warmgate-hook"):
            watch.bump("compiles")

    watch.line_hooks.append(compile_hook)
    watch.feed("warmgate-hook target compile 1\nplain li", "err")
    watch.feed("ne\r", "err")
    assert seen == ["warmgate-hook target compile 1", "plain line"]
    assert state.hooks == {"compiles": 1}


def test_the_state_file_round_trips_and_a_broken_one_starts_fresh(tmp_path: Path) -> None:
    path = tmp_path / "serve" / "observed.json"
    state = ServeTally(unwarmed=["('decode', 8, 1, 64)"], unwarmed_count=1, engine_starts=2)
    state.save(path)
    assert ServeTally.load(path) == state
    path.write_text("{not json")
    assert ServeTally.load(path) == ServeTally()
    path.write_text('{"unwarmed_count": "seven"}')  # a wrong type is not taken
    assert ServeTally.load(path).unwarmed_count == 0


def test_the_board_is_a_frozen_copy_of_the_tally_as_the_operator_reads_it() -> None:
    """The status port serialises the board while the observer goes on counting: nothing the
    tally changes afterwards reaches a published board, and the board is what the operator's
    reader makes of the same figures (texts cut to the reader's length)."""
    long = "('decode', " + "9" * 200 + ")"
    state = ServeTally(
        unwarmed=["('decode', 8, 1, 64)", long],
        unwarmed_count=2,
        hooks={"compiles": 1},
        spec_decode={"drafts": 4, "draft_tokens": 12, "accepted_tokens": 6, "error": None},
        spec_decode_totals={"current": {"drafts": 4}},
        drafter_warmup={"state": "done", "warmed": 3},
    )
    board = state.board()
    published = board.to_json()
    assert published == ServeBoard.from_json({**state.to_json(), "mode": "serve"}).to_json()
    assert published["unwarmed"][1] == long[:SHAPE_CHARS]
    state.unwarmed.append("('decode', 16, 1, 64)")
    state.hooks["compiles"] += 1
    state.spec_decode_totals["current"]["drafts"] += 1
    state.drafter_warmup["warmed"] += 1
    assert board.to_json() == published


def test_serving_metrics_follow_the_state() -> None:
    state = ServeTally(unwarmed_count=3, engine_starts=2)
    found = {name: value for name, _, value in samples(state)}
    assert found["warmgate_runner_unwarmed_shapes"] == 3.0
    assert found["warmgate_runner_engine_starts"] == 2.0


def test_progress_lines_and_the_board_agree() -> None:
    out, board = io.StringIO(), Board(WarmupBoard(key="k"))
    progress = Progress(out, board=board)
    progress.stage("engine")
    progress.count("decode", 57, 143)
    doc = board.snapshot()
    assert (doc["stage"], doc["progress"]) == ("engine", {"decode": [57, 143]})
    assert out.getvalue().splitlines() == [
        "warmgate-progress stage engine",
        "warmgate-progress decode 57/143",
    ]
