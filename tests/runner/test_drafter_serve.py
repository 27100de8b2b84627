"""Serve mode and the direct drafter warmup (issue 33 item 2): the engine plugin in every
serving process, drafter compiles after warmup counted as drift with their shapes."""

from __future__ import annotations

from pathlib import Path

from warmgate.contract.drafterwarm import DRAFTER_WARMUP_ENV
from warmgate.warmup.hook.install import PLUGIN_NAME
from warmgate.warmup.hook.lines import format_hook_line
from warmgate.warmup.serve import mode
from warmgate.warmup.serve.tally import ServeTally
from warmgate.warmup.serve.watch import Watch, samples


def _watch() -> tuple[Watch, ServeTally]:
    state = ServeTally()
    watch = Watch(state, lambda: None)
    watch.line_hooks.append(watch.drafter)
    return watch, state


def test_a_drafter_compile_after_warmup_is_drift_with_its_shape() -> None:
    watch, state = _watch()
    compiled = format_hook_line(
        "compile", 9, 1.0, where="drafter", graph=["decode", 16, 1, 48], count=2
    )
    step = format_hook_line("compile", 9, 1.1, where="step", count=2, drafter=2)
    watch.feed("(Worker pid=9) " + compiled + step + compiled, "err")
    assert state.unwarmed == ["drafter (decode, 16, 1, 48)"]
    assert (state.unwarmed_count, state.drafter_compiles) == (1, 2)
    metrics = {name: value for name, _, value in samples(state)}
    assert metrics["warmgate_runner_drafter_compiles"] == 2.0
    assert metrics["warmgate_runner_unwarmed_shapes"] == 1.0


def test_the_direct_warmups_closing_line_reaches_the_board_and_the_metrics() -> None:
    watch, state = _watch()
    line = format_hook_line(
        "drafter-warmup",
        9,
        2.0,
        state="done",
        engine="gaudi",
        planned=330,
        warmed=330,
        failed=0,
        seconds=41.5,
    )
    watch.feed(line, "err")
    board = state.board()
    assert board.drafter_warmup["warmed"] == 330
    assert board.to_json()["drafter_warmup"]["state"] == "done"
    metrics = {name: value for name, _, value in samples(state)}
    assert metrics["warmgate_runner_drafter_warmup_warmed"] == 330.0
    assert metrics["warmgate_runner_drafter_warmup_seconds"] == 41.5
    assert state.unwarmed_count == 0  # the warmup's own compiles are no drift


def test_serve_mode_loads_the_plugin_with_the_document_only_when_asked(tmp_path: Path) -> None:
    doc = tmp_path / "drafter-warmup.json"
    args = mode._parser().parse_args(
        ["--state-file", str(tmp_path / "s" / "o.json"), "--drafter-warmup", str(doc), "--", "vllm"]
    )
    env = mode.engine_env(args)
    assert env is not None
    assert env[DRAFTER_WARMUP_ENV] == str(doc)
    assert env["PYTHONPATH"].split(":")[0] == str(tmp_path / "s" / "engine-hook")
    entry = tmp_path / "s" / "engine-hook" / "warmgate_hook-1.dist-info" / "entry_points.txt"
    assert PLUGIN_NAME in entry.read_text()
    plain = mode._parser().parse_args(["--state-file", str(tmp_path / "o.json"), "--", "vllm"])
    assert mode.engine_env(plain) is None
