"""The runner's serve mode against the stand-in engine, from a stdlib-only copy of the runner:
output passed through byte for byte, exit codes and signals passed on, unwarmed lines counted
(on demand while serving), counts kept across engine restarts; and the warmup's status port."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from runner_harness import (
    STANDIN,
    expected_lists,
    free_port,
    make_plan,
    start_runner,
    stdlib_tree,
    wait_for,
)
from support.runner_pods import healthy, post_unwarmed

pytestmark = pytest.mark.slow
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
ENGINE_FLAGS = ["--max-num-seqs", "64", "--max-model-len", "4096", "--max-num-batched-tokens"]


def _engine(tmp: Path, port: int) -> tuple[list[str], dict[str, str]]:
    """The stand-in's `vllm serve` argv and the environment serving gives it."""
    seeds = tmp / "buckets.txt"
    seeds.write_text(expected_lists(1)[0])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "STANDIN_"))}
    env.update(
        VLLM_BUCKETING_FROM_FILE=str(seeds),
        PT_HPU_RECIPE_CACHE_CONFIG=f"{tmp / 'recipes'},True,64",
        NO_COLOR="1",
    )
    argv = [sys.executable, str(STANDIN), "serve", "m", "--port", str(port), *ENGINE_FLAGS, "2048"]
    return argv, env


def _serve_argv(tmp: Path, status_port: int, engine: list[str]) -> list[str]:
    state = tmp / "state" / "observed.json"
    head = [sys.executable, "-S", "-E", "-m", "warmgate.warmup", "--serve"]
    return [*head, "--status-port", str(status_port), "--state-file", str(state), "--", *engine]


def _get(url: str) -> Any:
    with _OPENER.open(url, timeout=5) as response:
        body = response.read()
    return json.loads(body) if url.endswith("status") else body.decode()


def _status(port: int) -> dict[str, Any]:
    doc: dict[str, Any] = _get(f"http://127.0.0.1:{port}/warmgate/status")
    return doc


@pytest.fixture
def serving(tmp_path: Path) -> Any:
    """Serve mode running the stand-in; yields (process, engine port, status port)."""
    tree = stdlib_tree(tmp_path / "tree")
    port, status = free_port(), free_port()
    engine, env = _engine(tmp_path, port)
    proc = subprocess.Popen(
        _serve_argv(tmp_path, status, engine),
        cwd=tree,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for(lambda: healthy(port), proc)  # type: ignore[arg-type]
    yield proc, port, status
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_unwarmed_lines_on_demand_are_counted_once_each(serving: Any) -> None:
    proc, port, status = serving
    before = _status(status)
    assert (before["mode"], before["unwarmed_count"], before["engine_starts"]) == ("serve", 0, 1)
    post_unwarmed(
        port, [["decode", 3, 1, 40], ["prompt", 2, 256, 4]], [["decode", [3, 1, 33], [3, 1, 40]]]
    )
    post_unwarmed(port, [["decode", 3, 1, 40]])  # the engine logs a shape once; a repeat is no news
    wait_for(lambda: _status(status)["not_prepared_count"] == 1, proc)
    doc = _status(status)
    assert doc["unwarmed"] == ["('decode', 3, 1, 40)", "('prompt', 2, 256, 4)"]
    assert doc["unwarmed_count"] == 2
    assert doc["not_prepared"] == ["decode (3, 1, 33) -> (3, 1, 40)"]
    metrics = _get(f"http://127.0.0.1:{status}/metrics")
    assert "warmgate_runner_unwarmed_shapes 2\n" in metrics
    assert "warmgate_runner_not_prepared_buckets 1\n" in metrics


def test_sigterm_reaches_the_engine_and_its_exit_code_comes_back(serving: Any) -> None:
    proc, port, _status_port = serving
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0  # the stand-in shuts its server down and exits 0
    assert not healthy(port)


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, timeout=120, check=False)


def test_output_passes_through_unchanged(tmp_path: Path) -> None:
    tree = stdlib_tree(tmp_path / "tree")
    engine, env = _engine(tmp_path, free_port())
    env["STANDIN_FAULTS"] = "fixed_clock,exit_after_warmup,unwarmed_on_probe"
    alone = _run(engine, env, tree)
    under = _run(_serve_argv(tmp_path, free_port(), engine), env, tree)
    assert alone.returncode == under.returncode == 0
    assert b"was not warmed-up!" in alone.stdout
    assert b"\r" in alone.stderr  # tqdm's bare carriage returns survive too
    assert under.stdout == alone.stdout
    assert under.stderr == alone.stderr


def test_counts_survive_an_engine_restart(tmp_path: Path) -> None:
    tree = stdlib_tree(tmp_path / "tree")
    engine, env = _engine(tmp_path, free_port())
    env["STANDIN_FAULTS"] = "exit_after_warmup,unwarmed_on_probe"  # logs ('decode', 24, 1, 768)
    assert _run(_serve_argv(tmp_path, free_port(), engine), env, tree).returncode == 0
    env["STANDIN_FAULTS"] = "crash_at_start"
    # the container restarts; the engine crashes this time: its code is the runner's
    assert _run(_serve_argv(tmp_path, free_port(), engine), env, tree).returncode == 3
    env["STANDIN_FAULTS"] = "exit_after_warmup,unwarmed_on_probe"
    assert _run(_serve_argv(tmp_path, free_port(), engine), env, tree).returncode == 0
    state = json.loads((tmp_path / "state" / "observed.json").read_text())
    assert state["engine_starts"] == 3
    assert state["unwarmed"] == ["('decode', 24, 1, 768)"]
    assert state["unwarmed_count"] == 1  # logged again after the restart, counted once


def test_serve_mode_needs_an_engine(tmp_path: Path) -> None:
    tree = stdlib_tree(tmp_path / "tree")
    done = _run([sys.executable, "-S", "-E", "-m", "warmgate.warmup", "--serve"], {}, tree)
    assert done.returncode == 2
    assert b"needs the engine's command after --" in done.stderr


def test_the_warmup_runner_serves_its_stage_and_key(tmp_path: Path) -> None:
    port = free_port()
    plan = make_plan(tmp_path)
    proc = start_runner(tmp_path, plan, faults="hang", args=("--status-port", str(port)))
    try:
        wait_for(lambda: _serves(port), proc)
        wait_for(lambda: _status(port).get("stage") == "engine", proc)
        doc = _status(port)
        assert (doc["mode"], doc["key"]) == ("warmup", "config-a")
        assert doc["plan_hash"].startswith("sha256:")
        assert "warmgate_" not in _get(f"http://127.0.0.1:{port}/metrics")  # no gauges in warmup
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def _serves(port: int) -> bool:
    try:
        _status(port)
    except OSError:
        time.sleep(0.05)
        return False
    return True
