"""Serve mode in front of a real `vllm serve` on CPU, and the engine's acceptance figures (part 5).

Two engines run at once under `python -m warmgate.warmup --serve`: the target with itself as its
``draft_model`` draft (every draft token accepted: acceptance 1.0, mean acceptance length 1 + k)
and with ``draft-zero`` (it always drafts token 0, which the target never emits: 0.0 and 1.0).
Requests go straight to the engine's port (serve mode is no proxy); the status port publishes
the engine's own spec-decode counters; SIGTERM stops the engine and every process it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import runner_harness
from realengine import engine
from realengine.conftest import record

K = 3
PROMPT = "gate warm shape bucket graph engine draft token"
# The engine's own log line, every 10 s while it serves (vllm/v1/spec_decode/metrics.py).
MEAN_LINE = re.compile(r"SpecDecoding metrics: Mean acceptance length: ([\d.]+)")


@dataclass
class Served:
    """One engine under serve mode: the runner process, its ports and its output files."""

    proc: subprocess.Popen[bytes]
    port: int
    status_port: int
    out: Path
    err: Path
    state: Path

    def status(self) -> dict[str, object]:
        loaded: dict[str, object] = json.loads(
            engine.get_text(f"http://127.0.0.1:{self.status_port}/warmgate/status")
        )
        return loaded

    def output(self) -> str:
        return self.out.read_text(errors="replace") + self.err.read_text(errors="replace")


def start(tmp: Path, models: dict[str, Path], draft: str) -> Served:
    tree = runner_harness.stdlib_tree(tmp / "runner-tree")
    port, status_port = engine.free_port(), engine.free_port()
    spec = {"method": "draft_model", "model": str(models[draft]), "num_speculative_tokens": K}
    argv = engine.serve_argv(
        models["target"],
        port,
        "--max-model-len", "512", "--max-num-seqs", "4", "--max-num-batched-tokens", "256",
        "-O0", "--speculative-config", json.dumps(spec),
    )  # fmt: skip
    state = tmp / "state" / "observed.json"
    runner = [str(engine.PYTHON), "-m", "warmgate.warmup", "--serve"]
    runner += ["--status-port", str(status_port), "--state-file", str(state)]
    runner += ["--spec-metrics-interval", "1", "--", *argv]
    out, err = tmp / "serve.out", tmp / "serve.err"
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen(runner, cwd=tree, env=engine.clean_env(), stdout=o, stderr=e)
    return Served(proc, port, status_port, out, err, state)


def wait_healthy(served: Served, timeout_s: float = 900) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert served.proc.poll() is None, served.output()[-3000:]
        with contextlib.suppress(OSError):
            engine.get_text(f"http://127.0.0.1:{served.port}/health", timeout=5)
            return
        time.sleep(1)
    raise TimeoutError(served.output()[-3000:])


@pytest.fixture(scope="module")
def served(
    models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Served]]:
    """Both engines, started together (2 servers: the tier's maximum), each stopped after."""
    both = {
        name: start(tmp_path_factory.mktemp(name), models, draft)
        for name, draft in (("all-accepted", "target"), ("none-accepted", "draft-zero"))
    }
    began = time.monotonic()
    try:
        for one in both.values():
            wait_healthy(one)
        record("serve mode: two engines started together, healthy", time.monotonic() - began)
        for one in both.values():
            for _ in range(2):
                complete(one)
        yield both
    finally:
        for one in both.values():
            if one.proc.poll() is None:
                one.proc.send_signal(signal.SIGTERM)
        for one in both.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                one.proc.wait(timeout=120)
            if one.proc.poll() is None:
                one.proc.kill()


def complete(one: Served) -> dict[str, object]:
    body = {"model": "tiny", "prompt": PROMPT, "max_tokens": 24, "temperature": 0.0}
    body["ignore_eos"] = True
    return engine.post_json(f"http://127.0.0.1:{one.port}/v1/completions", body)


def spec_decode(one: Served) -> dict[str, object]:
    """The status board's figures once they include the requests sent (read every second)."""
    deadline = time.monotonic() + 60
    while True:
        found = one.status().get("spec_decode")
        if isinstance(found, dict) and int(str(found["drafts"])) > 0:
            time.sleep(2)  # one more read after the last request's steps
            found = one.status()["spec_decode"]
            assert isinstance(found, dict)
            return found
        assert time.monotonic() < deadline, one.status()
        time.sleep(0.5)


def test_traffic_goes_to_the_engine_and_its_log_passes_through(served: dict[str, Served]) -> None:
    one = served["all-accepted"]
    answer = complete(one)
    choices = answer["choices"]
    assert isinstance(choices, list)
    assert choices[0]["finish_reason"] == "length"
    text = one.output()
    assert re.search(r'"POST /v1/completions HTTP/1\.1" 200 OK', text)
    assert re.search(r"\(APIServer pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[", text)
    assert re.search(r"\(EngineCore pid=\d+\) INFO ", text)


def test_the_status_port_answers_with_the_engines_acceptance(served: dict[str, Served]) -> None:
    all_in, none_in = spec_decode(served["all-accepted"]), spec_decode(served["none-accepted"])
    assert (all_in["acceptance_rate"], all_in["mean_acceptance_length"]) == (1.0, 1.0 + K)
    assert all_in["per_position_acceptance_rate"] == [1.0] * K
    assert (none_in["acceptance_rate"], none_in["mean_acceptance_length"]) == (0.0, 1.0)
    assert none_in["accepted_tokens"] == 0
    for found in (all_in, none_in):
        assert found["draft_tokens"] == K * int(str(found["drafts"]))
        assert found["error"] is None
    status = served["all-accepted"].status()
    assert (status["mode"], status["engine_starts"], status["unwarmed_count"]) == ("serve", 1, 0)


def test_the_figures_agree_with_the_engines_own_log_line(served: dict[str, Served]) -> None:
    one = served["all-accepted"]
    deadline = time.monotonic() + 60  # vLLM logs the line every 10 s while it serves
    while not MEAN_LINE.search(one.output()):
        assert time.monotonic() < deadline, "no SpecDecoding metrics line"
        complete(one)
        time.sleep(2)
    logged = {float(x) for x in MEAN_LINE.findall(one.output())}
    assert logged == {1.0 + K}
    assert spec_decode(one)["mean_acceptance_length"] == 1.0 + K


def test_the_metrics_export_the_figures(served: dict[str, Served]) -> None:
    for name, rate in (("all-accepted", 1.0), ("none-accepted", 0.0)):
        spec_decode(served[name])
        text = engine.get_text(f"http://127.0.0.1:{served[name].status_port}/metrics")
        assert f"warmgate_runner_spec_decode_acceptance_rate {rate:g}" in text
        assert "warmgate_runner_spec_decode_mean_acceptance_length" in text


def test_sigterm_stops_the_engine_and_every_process_it_started(served: dict[str, Served]) -> None:
    one = served["none-accepted"]
    pids = {
        int(p)
        for p in re.findall(r"\((?:APIServer|EngineCore|Worker)\S* pid=(\d+)\)", one.output())
    }
    assert len(pids) >= 2
    began = time.monotonic()
    one.proc.send_signal(signal.SIGTERM)
    code = one.proc.wait(timeout=120)
    seconds = time.monotonic() - began
    assert code in (0, 128 + signal.SIGTERM), one.output()[-2000:]
    alive = [p for p in pids if _alive(p)]
    assert alive == [], f"engine processes left after {seconds:.1f} s: {alive}"
    saved = json.loads(one.state.read_text())
    assert saved["spec_decode"]["acceptance_rate"] == 0.0  # kept for the next engine start


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"
