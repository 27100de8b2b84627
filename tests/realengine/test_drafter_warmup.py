"""The engine plugin's direct drafter warmup on the real vLLM CPU engine (issue 33, items 1-2).

One serving engine per drafter (tiny EAGLE and EAGLE-3 heads with k = 3, a MiMo MTP layer with
k = 1), each under the runner's serve mode with ``--drafter-warmup``: serve mode loads
warmgate's engine plugin into every engine process, which runs vLLM's own
``EagleProposer.propose`` once for every shape of the planned set after the worker's warmup and
before ``/health``. A test-side plugin
(``drafter_recorder.py``) records the input shapes of every drafter forward inside the engine.
Then traffic: single prompts of chosen lengths, bursts of 2 to 6 requests of mixed lengths
(chunked prompts among them), greedy and sampled, with and without structured outputs (JSON).

**CPU form.** The CPU build pads nothing, so a drafter forward's shape is its token count:
``n`` tokens for call 1 (every n from 1 to max_num_batched_tokens) and the batch ``r`` for
calls 2..k (1 to max_num_seqs). ``cpu_shape_set`` lists that whole set in the plan's form
(``("prompt", 1, n, 0)`` and ``("decode", r, 1, 1)``), and the plugin maps a shape
``(phase, batch, query, blocks)`` to one ``propose`` over ``batch * query`` tokens in
``min(batch, max_num_seqs)`` requests (docs/runner.md, "Direct drafter warmup"). This proves the
mechanism (inside the engine process, every planned shape, before /health, and serving meets
no new drafter shape), not Gaudi's compiles.

Mutations (run by hand to see the tests fail, docs/testing.md): ``WARMGATE_DRAFTER_MUTATION=off``
switches the direct warmup off in the engine, ``=drop`` drops one planned shape (a prompt of
``DROPPED_TOKENS`` tokens, which the traffic sends alone).

mtp runs on a tiny MiMo target with one multi-token-prediction layer (``models.make_mimo``;
vLLM's mimo_mtp predicts one token, so k = 1 there: no calls 2..k).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import runner_harness
from realengine import drafter_recorder, engine
from realengine.conftest import record

from warmgate.contract.drafterwarm import DRAFTER_WARMUP_SWITCH, make_spec
from warmgate.warmup.hook.burst_gate import BURST_GATE_ENV, burst_request_id
from warmgate.warmup.hook.drafter_warm import cpu_shape_set
from warmgate.warmup.hook.lines import HookEvent, parse_hook_line

# method -> (target folder, draft folder or None for mtp, k)
CONFIGS = {
    "eagle": ("target", "eagle", 3),
    "eagle3": ("target", "eagle3", 3),
    "mtp": ("mimo", None, 1),
}
MAX_NUM_SEQS, MAX_TOKENS_BATCHED, MAX_MODEL_LEN = 4, 256, 512
LIMITS = (
    "--max-model-len", str(MAX_MODEL_LEN), "--max-num-seqs", str(MAX_NUM_SEQS),
    "--max-num-batched-tokens", str(MAX_TOKENS_BATCHED),
)  # fmt: skip
MUTATION = os.environ.get("WARMGATE_DRAFTER_MUTATION", "")
# The split burst: two prompts at once, the third LATE_S later (lengths no other pair sums to)
SPLIT, LATE_S, GATE_HOLD_S = ((11, 201), (13, 202), (19, 203)), 1.0, 10.0
DROPPED_TOKENS = 97  # > max_num_seqs: no other planned shape runs a forward of 97 tokens
# Bounded JSON (enums, no free whitespace), so a random model's answer ends within max_tokens.
SCHEMA = {
    "type": "object",
    "properties": {"name": {"enum": ["gate", "warm", "draft"]}, "n": {"enum": [1, 22, 333]}},
    "required": ["name", "n"],
    "additionalProperties": False,
}


ALLOWED = {
    json.dumps(doc, separators=(",", ":"))
    for name in SCHEMA["properties"]["name"]["enum"]  # type: ignore[index]
    for n in SCHEMA["properties"]["n"]["enum"]  # type: ignore[index]
    for doc in ({"name": name, "n": n}, {"n": n, "name": name})
}


@dataclass
class Engine:
    """One engine under serve mode with the direct drafter warmup, and what it recorded."""

    method: str
    k: int
    proc: subprocess.Popen[bytes]
    port: int
    status_port: int
    out: Path
    err: Path
    records: Path
    planned: int
    healthy_at: float = 0.0
    ready_s: float = 0.0
    answers: list[dict[str, Any]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.out.read_text(errors="replace") + self.err.read_text(errors="replace")

    def hook_events(self) -> list[HookEvent]:
        return [e for line in self.output().splitlines() if (e := parse_hook_line(line))]

    def forwards(self) -> list[dict[str, Any]]:
        lines = self.records.read_text().splitlines() if self.records.exists() else []
        return [json.loads(line) for line in lines]

    def status(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(
            engine.get_text(f"http://127.0.0.1:{self.status_port}/warmgate/status")
        )
        return loaded


def _start(tmp: Path, models: dict[str, Path], method: str) -> Engine:
    shapes = cpu_shape_set(MAX_TOKENS_BATCHED, MAX_NUM_SEQS)
    if MUTATION == "drop":
        shapes.remove(("prompt", 1, DROPPED_TOKENS, 0))
    target, draft, k = CONFIGS[method]
    doc = make_spec(method, k, 16, MAX_MODEL_LEN, shapes).write(tmp / "plan")
    recorder = engine.install_plugin(tmp / "recorder", drafter_recorder)
    records = tmp / "drafter-forwards.jsonl"
    extra = {"PYTHONPATH": str(recorder), drafter_recorder.ENV: str(records)}
    # The burst gate is the warmup runner's (serve mode never sets it); it is the engine
    # plugin's code all the same, so it rides along here to meet vLLM's own scheduler
    # (test_a_split_burst_enters_the_scheduler_whole); no other request here is of a burst.
    extra[BURST_GATE_ENV] = str(GATE_HOLD_S)
    if MUTATION == "off":
        extra[DRAFTER_WARMUP_SWITCH] = "0"
    tree = runner_harness.stdlib_tree(tmp / "runner-tree")
    port, status_port = engine.free_port(), engine.free_port()
    spec: dict[str, Any] = {"method": method, "num_speculative_tokens": k}
    if draft is not None:
        spec["model"] = str(models[draft])
    argv = engine.serve_argv(
        models[target], port, *LIMITS, "-O0", "--speculative-config", json.dumps(spec)
    )
    runner = [str(engine.PYTHON), "-m", "warmgate.warmup", "--serve"]
    runner += ["--status-port", str(status_port), "--state-file", str(tmp / "state" / "o.json")]
    runner += ["--spec-metrics-interval", "1", "--drafter-warmup", str(doc), "--", *argv]
    out, err = tmp / "serve.out", tmp / "serve.err"
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen(runner, cwd=tree, env=engine.clean_env(extra), stdout=o, stderr=e)
    return Engine(method, k, proc, port, status_port, out, err, records, planned=len(shapes))


def _wait_healthy(one: Engine, timeout_s: float = 900) -> None:
    began = time.monotonic()
    while time.monotonic() < began + timeout_s:
        assert one.proc.poll() is None, one.output()[-4000:]
        try:
            with urllib.request.urlopen(one.url + "/health", timeout=5) as answer:
                if answer.status == 200:
                    one.healthy_at, one.ready_s = time.time(), time.monotonic() - began
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError(one.output()[-4000:])


def _complete(
    one: Engine,
    prompt: list[int] | str,
    max_tokens: int,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> Any:
    body: dict[str, Any] = {"model": "tiny", "prompt": prompt, "max_tokens": max_tokens}
    body["ignore_eos"] = True
    body.update({"temperature": 0.0, **extra})
    return engine.post_json(one.url + "/v1/completions", body, headers=headers)


def _tokens(n: int, seed: int) -> list[int]:
    """``n`` token ids no other prompt of the run starts with (no prefix-cache hit)."""
    return [10 + (seed * 37 + i * 11) % 400 for i in range(n)]


def _traffic(one: Engine) -> None:
    """Every kind of step the tests want served: each answer is kept for the checks."""
    answers = one.answers
    # alone: a prefill of exactly DROPPED_TOKENS tokens (drafter call 1 at 97), then decodes
    answers.append(_complete(one, _tokens(DROPPED_TOKENS, 1), 8))
    for n, seed in ((5, 2), (130, 3), (300, 4)):  # 300 > 256: a chunked prompt
        answers.append(_complete(one, _tokens(n, seed), 12))
    bursts = [
        [(17, 5, 20), (64, 6, 24)],
        [(9, 7, 30), (200, 8, 16), (33, 9, 40), (120, 10, 8)],
        [(40, 11, 16), (41, 12, 16), (250, 13, 12), (3, 14, 24), (77, 15, 20), (160, 16, 10)],
    ]
    for burst in bursts:
        with ThreadPoolExecutor(len(burst)) as pool:
            jobs = [pool.submit(_complete, one, _tokens(n, s), m) for n, s, m in burst]
            answers += [job.result() for job in jobs]
    sampled = {"temperature": 1.0, "seed": 7}
    with ThreadPoolExecutor(3) as pool:
        jobs = [pool.submit(_complete, one, _tokens(n, 20 + n), 24, **sampled) for n in (6, 50, 90)]
        answers += [job.result() for job in jobs]
    guided = {"json": SCHEMA, "disable_any_whitespace": True}
    structured = {"structured_outputs": guided, "ignore_eos": False}
    with ThreadPoolExecutor(3) as pool:
        jobs = [
            pool.submit(_complete, one, f"item {i}: give json", 96, **structured) for i in range(3)
        ]
        answers += [job.result() for job in jobs]


@pytest.fixture(scope="module", params=list(CONFIGS))
def served(
    request: pytest.FixtureRequest,
    models: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Engine]:
    """One engine per drafter (one alive at a time), warmed, then served the traffic."""
    method = str(request.param)
    one = _start(tmp_path_factory.mktemp(f"drafter-{method}"), models, method)
    try:
        _wait_healthy(one)
        record(f"direct drafter warmup, {method}: engine healthy", one.ready_s)
        began = time.monotonic()
        _traffic(one)
        record(f"direct drafter warmup, {method}: traffic", time.monotonic() - began)
        time.sleep(2.5)  # the spec-decode counters are read every second
        yield one
    finally:
        if one.proc.poll() is None:
            one.proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            one.proc.wait(timeout=120)
        if one.proc.poll() is None:
            one.proc.kill()


def _shape(doc: dict[str, Any]) -> tuple[tuple[int, ...] | None, ...]:
    return tuple(tuple(s) if s is not None else None for s in doc["shape"])


def test_the_plugin_warms_every_planned_shape_inside_the_engine_before_health(
    served: Engine,
) -> None:
    closing = [e for e in served.hook_events() if e.kind == "drafter-warmup"]
    assert len(closing) == 1, [e.fields for e in closing] or served.output()[-3000:]
    done = closing[0]
    assert done.fields["state"] == "done", done.fields
    assert (done.fields["planned"], done.fields["warmed"], done.fields["failed"]) == (
        served.planned,
        served.planned,
        0,
    )
    assert done.t < served.healthy_at
    per_shape = [e for e in served.hook_events() if e.kind == "drafter-warm"]
    assert len(per_shape) == served.planned
    assert all(e.fields["ok"] for e in per_shape)
    # the recorder, inside the engine: propose ran each planned token count before /health
    early = [f for f in served.forwards() if f["t"] < served.healthy_at and f["via"] == "propose"]
    firsts = {f["shape"][0][0] for f in early}
    assert set(range(1, MAX_TOKENS_BATCHED + 1)) - firsts <= (
        {DROPPED_TOKENS} if MUTATION == "drop" else set()
    )
    assert {f["pid"] for f in early} == {done.pid}


def test_serving_meets_no_drafter_shape_the_warmup_did_not_run(served: Engine) -> None:
    forwards = served.forwards()
    warmed = {_shape(f) for f in forwards if f["t"] < served.healthy_at}
    serving = [f for f in forwards if f["t"] >= served.healthy_at]
    assert len(serving) > 50, "the traffic ran too few drafter forwards to mean anything"
    assert {f["via"] for f in serving} == {"propose"}
    new = sorted({_shape(f) for f in serving} - warmed, key=str)
    assert new == [], f"drafter input shapes first seen while serving: {new}"
    # the traffic reached partial batches, chunked prompts and the dropped length
    firsts = {f["shape"][0][0] for f in serving}
    assert {DROPPED_TOKENS, MAX_TOKENS_BATCHED} <= firsts
    if served.k > 1:  # calls 2..k run at the batch
        assert set(range(1, MAX_NUM_SEQS + 1)) <= firsts


def test_completions_answer_and_acceptance_stays_sane_after_the_warmup(served: Engine) -> None:
    for answer in served.answers[:-3]:
        choice = answer["choices"][0]
        assert choice["finish_reason"] == "length", answer
        assert choice["text"], answer
    for answer in served.answers[-3:]:  # structured outputs: the grammar's JSON
        choice = answer["choices"][0]
        # the backend lets a random model pad with whitespace (disable_any_whitespace is not
        # honoured by every backend): without it, the text is one of the schema's documents,
        # whole when the grammar ended it, else a beginning of one
        compact = "".join(choice["text"].split())
        assert any(doc.startswith(compact) for doc in ALLOWED), choice
        assert choice["finish_reason"] == "length" or compact in ALLOWED, choice
    # greedy is deterministic after the warmup (the same prompt, the same answer)
    prompt = _tokens(130, 3)
    again = _complete(served, prompt, 12)["choices"][0]["text"]
    assert again == served.answers[2]["choices"][0]["text"]
    found = served.status()["spec_decode"]
    assert isinstance(found, dict), found
    assert found["error"] is None, found
    drafts, drafted = int(found["drafts"]), int(found["draft_tokens"])
    assert drafts > 0
    assert drafted == served.k * drafts
    assert 0 <= int(found["accepted_tokens"]) <= drafted
    assert 0.0 <= float(found["acceptance_rate"]) <= 1.0
    assert 1.0 <= float(found["mean_acceptance_length"]) <= 1.0 + served.k


def test_the_serving_board_shows_the_direct_warmup(served: Engine) -> None:
    board = served.status()
    direct = board["drafter_warmup"]
    assert (direct["state"], direct["engine"]) == ("done", "cpu")
    assert direct["warmed"] == direct["planned"] == served.planned
    metrics = engine.get_text(f"http://127.0.0.1:{served.status_port}/metrics")
    assert f"warmgate_runner_drafter_warmup_warmed {served.planned:g}" in metrics
    assert "warmgate_runner_drafter_compiles 0" in metrics  # no Habana metric on CPU: never


def _split_burst(one: Engine, ids: list[str], seed: int) -> int:
    """SPLIT's first two prompts at once, the third LATE_S later; the token count of the first
    drafter forward after they were sent (call 1 runs over every token the step scheduled)."""
    prompts = [_tokens(n, s + seed) for n, s in SPLIT]
    began = time.time()

    def send(i: int) -> Any:
        return _complete(one, prompts[i], 4, headers={"X-Request-Id": ids[i]})

    with ThreadPoolExecutor(3) as pool:
        jobs = [pool.submit(send, 0), pool.submit(send, 1)]
        time.sleep(LATE_S)
        jobs.append(pool.submit(send, 2))
        for job in jobs:
            assert job.result()["choices"], job.result()
    after = [f for f in one.forwards() if f["t"] >= began and f["via"] == "propose"]
    assert after, "no drafter forward ran for the burst"
    first: int = after[0]["shape"][0][0]
    return first


def test_a_split_burst_enters_the_scheduler_whole(served: Engine) -> None:
    """A burst whose last request reaches the engine a second after the others: named as one
    (the runner's X-Request-Id), vLLM's scheduler first schedules all three in one step (one
    drafter forward over their 43 prompt tokens) and the hook says it held the burst; the
    control, the same split without the names, starts on the first two (24 tokens)."""
    whole = sum(n for n, _ in SPLIT)
    assert _split_burst(served, [burst_request_id("split", i, 3) for i in range(3)], 0) == whole
    (line,) = [e for e in served.hook_events() if e.kind == "burst"]
    assert (line.fields["burst"], line.fields["n"], line.fields["arrived"]) == ("split", 3, 3)
    assert line.fields["whole"] is True
    assert LATE_S * 0.8 <= line.fields["held_s"] < GATE_HOLD_S
    control = _split_burst(served, [f"plain-{i}" for i in range(3)], 100)
    assert control < whole, "without the gate the first two ran before the third arrived"
