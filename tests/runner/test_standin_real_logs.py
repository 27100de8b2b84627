"""The stand-in's non-Gaudi output has the real engine's form (issue 21, part 7).

The golden logs in tests/doubles/fixtures/real_engine_logs were recorded from the real vLLM CPU
engine (tests/realengine/record_golden.py). The stand-in serves one /health and one completion
and is stopped with SIGTERM; every line it prints that is not vllm-gaudi's (its process
prefixes, vLLM's own records, uvicorn's lines) must have the shape (digits aside) of a line the
real engine printed, in the plain and the coloured case. Its one line of its own, the
``TEST DOUBLE`` banner, is the exception. The Gaudi lines are checked against
fixtures/engine_logs instead (test_standin_fixtures.py): a CPU engine prints none.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import real_logs
from runner_harness import STANDIN, expected_lists, free_port

BANNER = "(TEST DOUBLE standin_vllm)"
CASES = {"plain": {"NO_COLOR": "1"}, "colour": {"VLLM_LOGGING_COLOR": "1"}}


def serve_once(tmp: Path, extra: dict[str, str]) -> str:
    """The stand-in's stdout and stderr for: start, /health, a completion, SIGTERM."""
    port = free_port()
    seeds, _ = expected_lists(1)
    (tmp / "seeds.txt").write_text(seeds)
    skip = ("VLLM_", "NO_COLOR", "STANDIN_", "PT_HPU_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
    env.update(extra, VLLM_BUCKETING_FROM_FILE=str(tmp / "seeds.txt"))
    env["PT_HPU_RECIPE_CACHE_CONFIG"] = f"{tmp / 'recipes'},True,8"
    argv = [sys.executable, "-S", "-E", str(STANDIN), "serve", "standin/model", "--port", str(port)]
    argv += ["--max-model-len", "4096", "--num-gpu-blocks-override", "8192"]
    argv += ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 1}']
    with (tmp / "out").open("wb") as out, (tmp / "err").open("wb") as err:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while not _healthy(url):
            assert time.monotonic() < deadline
            assert proc.poll() is None
            time.sleep(0.1)
        body = json.dumps({"model": "standin/model", "prompt": [101, 102], "max_tokens": 2})
        request = urllib.request.Request(url + "/v1/completions", data=body.encode())
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    return (tmp / "out").read_text() + (tmp / "err").read_text()


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_standins_non_gaudi_lines_have_the_real_engines_form(case: str, tmp_path: Path) -> None:
    output = serve_once(tmp_path, CASES[case])
    colour = case == "colour"
    mine = [x for x in real_logs.non_gaudi(output) if BANNER not in x]
    assert len(mine) >= 10  # prefixed records and uvicorn's lines
    real = real_logs.shapes(real_logs.golden(case), colour=colour)
    unknown = sorted({real_logs.shape(x, colour) for x in mine} - real)
    assert unknown == []


def test_the_comparison_can_fail(tmp_path: Path) -> None:
    """The control: a line the real engine never printed in that form is caught."""
    real = real_logs.shapes(real_logs.golden("plain"))
    for made_up in (
        "(APIServer pid=1) INFO 11-29 19:40:04 [launcher.py:80] Shutting down FastAPI HTTP server.",
        "(EngineCore_DP0 pid=2) INFO 11-29 19:40:04 [core.py:1] Initializing a V1 LLM engine",
        'INFO 127.0.0.1:5 - "GET /health HTTP/1.1" 200 OK',
    ):
        assert real_logs.shape(made_up) not in real
