"""The stand-in engine prints the golden real-format logs byte for byte (tests/doubles/fixtures).

The fixtures were written from the upstream format strings (their README names each line's
source), not from the stand-in's output; this test keeps the stand-in faithful to them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runner_harness import STANDIN

FIXTURES = STANDIN.parent / "fixtures" / "engine_logs"
CASES = json.loads((FIXTURES / "cases.json").read_text())
# Config A's limits, k=1 and a pinned KV block count: what the fixtures' engine was started with.
ARGS = [
    "serve",
    "standin/model",
    "--max-model-len",
    "4096",
    "--max-num-seqs",
    "64",
    "--max-num-batched-tokens",
    "2048",
    "--speculative-config",
    '{"method": "ngram", "num_speculative_tokens": 1}',
    "--num-gpu-blocks-override",
    "8192",
]


def run_standin(name: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    case = CASES[name]
    skip = ("VLLM_", "NO_COLOR", "STANDIN_", "PT_HPU_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
    env.update(case["env"])
    env["STANDIN_FAULTS"] = ",".join(
        filter(None, [case["faults"], "fixed_clock", "exit_after_warmup"])
    )
    env["VLLM_BUCKETING_FROM_FILE"] = str(FIXTURES / f"seeds-{case['seeds']}.txt")
    env["PT_HPU_RECIPE_CACHE_CONFIG"] = f"{tmp_path / 'recipes'},True,8"
    argv = [sys.executable, "-S", "-E", str(STANDIN), *ARGS, *case["args"]]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("name", sorted(CASES))
def test_standin_prints_the_golden_log(name: str, tmp_path: Path) -> None:
    done = run_standin(name, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (FIXTURES / f"{name}.stdout").read_text()
    assert done.stderr == (FIXTURES / f"{name}.stderr").read_text()


def test_the_standin_is_one_standard_library_file() -> None:
    # Run with -S -E above (no site-packages); here: it imports nothing from this repository.
    source = STANDIN.read_text()
    assert "import warmgate" not in source
    assert "from warmgate" not in source
    assert "sys.path" not in source


def test_graph_seconds_writes_the_bar_as_each_graph_ends(tmp_path: Path) -> None:
    # graph_seconds paces the warmup (scenario u's WarmgateWarmupSlow): the bar's lines reach
    # the pipe while the engine compiles, the decode bar a prompt graph's time after the first
    # prompt line, not all at once when the warmup is over.
    name = sorted(CASES)[0]
    case = CASES[name]
    skip = ("VLLM_", "NO_COLOR", "STANDIN_", "PT_HPU_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
    env.update(case["env"])
    env["STANDIN_FAULTS"] = ",".join(
        filter(None, [case["faults"], "fixed_clock", "exit_after_warmup", "graph_seconds=0.1"])
    )
    env["VLLM_BUCKETING_FROM_FILE"] = str(FIXTURES / f"seeds-{case['seeds']}.txt")
    env["PT_HPU_RECIPE_CACHE_CONFIG"] = f"{tmp_path / 'recipes'},True,8"
    argv = [sys.executable, "-S", "-E", str(STANDIN), *ARGS, *case["args"]]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    seen, first = b"", {}
    try:
        while b"Decode warmup processing:" not in seen:
            piece = proc.stderr.read1(4096)
            assert piece, "the engine ended before its decode bar"
            seen += piece
            for bar in (b"Prompt", b"Decode"):
                if bar + b" warmup processing:" in seen:
                    first.setdefault(bar, time.monotonic())
    finally:
        proc.kill()
        proc.wait(timeout=10)
        proc.stderr.close()
    assert first[b"Decode"] - first[b"Prompt"] >= 0.1
    # the same run unpaced writes the golden log: the knob changes only the timing
    assert run_standin(name, tmp_path).stderr == (FIXTURES / f"{name}.stderr").read_text()
