"""Serve mode's pieces in-process: the watch over the engine's output (counts, line hooks), the
state file, and the progress the warmup puts on the status board."""

from __future__ import annotations

import io
from pathlib import Path

from warmgate.contract.board import WarmupBoard
from warmgate.warmup.runner.report import Progress
from warmgate.warmup.serve.watch import Watch, fresh_state, load_state, samples, save_state
from warmgate.warmup.statusboard import Board

UNWARMED = "WARNING 11-30 10:00:00 [hpu_model_runner.py:3588] Configuration: ('decode', 8, 1, 64) was not warmed-up!\n"  # noqa: E501


def test_a_shape_split_across_chunks_is_counted_once() -> None:
    changes: list[int] = []
    state = fresh_state()
    watch = Watch(state, lambda: changes.append(state["unwarmed_count"]))
    watch.feed(UNWARMED[:40], "out")
    watch.feed(UNWARMED[40:], "out")
    watch.feed(UNWARMED, "out")
    assert state["unwarmed"] == ["('decode', 8, 1, 64)"]
    assert changes == [1]


def test_line_hooks_see_every_line_and_count_under_hooks() -> None:
    state = fresh_state()
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
    assert state["hooks"] == {"compiles": 1}


def test_the_state_file_round_trips_and_a_broken_one_starts_fresh(tmp_path: Path) -> None:
    path = tmp_path / "serve" / "observed.json"
    state = fresh_state()
    state.update(unwarmed=["('decode', 8, 1, 64)"], unwarmed_count=1, engine_starts=2)
    save_state(path, state)
    assert load_state(path) == state
    path.write_text("{not json")
    assert load_state(path) == fresh_state()
    path.write_text('{"unwarmed_count": "seven"}')  # a wrong type is not taken
    assert load_state(path)["unwarmed_count"] == 0


def test_serving_metrics_follow_the_state() -> None:
    state = fresh_state()
    state.update(unwarmed_count=3, engine_starts=2)
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
