"""Probe helpers (token patterns, health wait) and the reader-side `--restore-cache` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from runner_harness import REPO, free_port

from warmgate.contract.order import ProbeStep
from warmgate.warmup import cache
from warmgate.warmup.runner.probe import prompt_ids, wait_for_health


def step(pattern: str, tokens: int = 40) -> ProbeStep:
    return ProbeStep("s", concurrency=2, prompt_tokens=tokens, max_tokens=4, token_pattern=pattern)


def test_repeat_prompts_cycle_eight_ids_for_ngram_matches() -> None:
    ids = prompt_ids(step("repeat"), 0, 100, 20000)
    assert len(ids) == 40
    assert ids[8:16] == ids[:8]
    assert ids[32:] == ids[:8]
    assert prompt_ids(step("repeat"), 0, 100, 20000) == ids  # deterministic
    assert prompt_ids(step("repeat"), 5, 100, 20000)[:8] != ids[:8]  # its own cycle


def test_no_two_probe_requests_share_a_first_block() -> None:
    """Issue 25: request i of every step used the same ids, so with prefix caching a later
    step's prefill found an earlier step's blocks cached and ran other shapes."""
    steps = [step("varied", 300), step("varied", 600), step("repeat", 300)]
    firsts = [
        tuple(prompt_ids(s, i, 100, 20000, position)[:16])
        for position, s in enumerate(steps)
        for i in range(8)
    ]
    assert len(set(firsts)) == len(firsts)
    # Two steps of one name at different positions differ too (a replay of a replay).
    assert prompt_ids(steps[0], 0, 100, 20000, 0) != prompt_ids(steps[0], 0, 100, 20000, 3)


def test_varied_prompts_differ_per_request_and_stay_in_range() -> None:
    first = prompt_ids(step("varied", 500), 0, 100, 200)
    second = prompt_ids(step("varied", 500), 1, 100, 200)
    assert first != second
    assert first == prompt_ids(step("varied", 500), 0, 100, 200)  # deterministic
    assert min(first + second) >= 100
    assert max(first + second) <= 200
    assert len(set(first)) > 50


def test_health_wait_reports_an_exited_engine() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert wait_for_health(url, time.monotonic() + 60, alive=lambda: False) == "exited"


def test_health_wait_reports_timeout_when_the_deadline_has_passed() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert wait_for_health(url, time.monotonic() - 1, alive=lambda: True) == "timeout"


def restore_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "warmgate.warmup", "--restore-cache", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_restore_cache_command(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "recipe.bin").write_bytes(b"r" * 100)
    cache.publish(src, tmp_path / "vol", "key-1", {})
    done = restore_cli(str(tmp_path / "vol"), "key-1", str(tmp_path / "local"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"files": 1, "bytes": 100, "problems": []}
    assert (tmp_path / "local" / "recipe.bin").read_bytes() == b"r" * 100


def test_restore_cache_command_without_entry(tmp_path: Path) -> None:
    done = restore_cli(str(tmp_path / "vol"), "key-1", str(tmp_path / "local"))
    assert done.returncode == 1
    assert "no complete cache entry 'key-1'" in done.stderr
    assert not (tmp_path / "local").exists()
