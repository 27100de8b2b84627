"""The engine hook's burst gate (hook/burst_gate.py) and the burst ids the runner sends.

The gate's rule on a clock the tests turn; the gate around a TEST DOUBLE ``Scheduler`` whose
waiting queue has the methods of vLLM v1's ``FCFSRequestQueue`` (a deque with
``remove_requests`` and ``prepend_request``); the plugin loading it the way vLLM loads general
plugins, in a fresh interpreter; and ``send_burst`` naming every request of a burst, read by a
local HTTP server. The gate against vLLM's own scheduler: tests/realengine/test_drafter_warmup.py
(a split burst) and test_sweep_scheduler.py (every sweep step).
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.hooked_engine import run_hooked, write_tree

from warmgate.warmup.hook.burst_gate import (
    BURST_GATE_ENV,
    BurstGate,
    attach,
    burst_request_id,
    parse_burst_id,
)
from warmgate.warmup.hook.lines import format_hook_line, parse_hook_line
from warmgate.warmup.runner.burst import send_burst


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def gate(hold_s: float = 5.0) -> tuple[BurstGate, Clock, list[dict[str, Any]]]:
    clock, lines = Clock(), []
    out = BurstGate(hold_s, lambda kind, **f: lines.append({"kind": kind, **f}), clock)
    return out, clock, lines


def ids(key: str, n: int) -> list[str]:
    # as vLLM 0.32 names them: "cmpl-" + X-Request-Id, the prompt's index, a random suffix
    return [f"cmpl-{burst_request_id(key, i, n)}-0-{i:08x}" for i in range(n)]


def test_a_burst_id_names_its_burst_and_size_inside_vllms_own_id() -> None:
    assert burst_request_id("3f9a", 2, 5) == "wgburst-3f9a-2of5"
    assert parse_burst_id("cmpl-wgburst-3f9a-2of5-0-1a2b3c4d") == ("3f9a", 5)
    assert parse_burst_id("wgburst-3f9a-0of1") == ("3f9a", 1)
    for other in ("cmpl-1a2b3c4d-0", "wgburst-3f9a-2of0", "wgburst--1of2", "chatcmpl-x"):
        assert parse_burst_id(other) is None


def test_a_burst_is_held_until_it_is_whole_then_enters_at_once() -> None:
    g, clock, lines = gate()
    a, b, c = ids("k1", 3)
    assert g.held([a, "cmpl-other-0"]) == {a}  # another request is never held
    clock.now += 0.2
    assert g.held([a, b]) == {a, b}
    clock.now += 0.3
    assert g.held([a, b, c]) == set()  # whole: every one of them goes to the scheduler now
    assert lines == [
        {"kind": "burst", "burst": "k1", "n": 3, "arrived": 3, "held_s": 0.5, "whole": True}
    ]
    assert g.held([a, b, c]) == set()  # released for good (still waiting, e.g. no KV room)


def test_a_burst_whose_last_request_never_comes_goes_in_after_the_hold() -> None:
    g, clock, lines = gate(hold_s=2.0)
    a, b, _ = ids("k2", 3)
    assert g.held([a, b]) == {a, b}
    clock.now += 1.99
    assert g.held([a, b]) == {a, b}
    clock.now += 0.01
    assert g.held([a, b]) == set()
    assert lines == [
        {"kind": "burst", "burst": "k2", "n": 3, "arrived": 2, "held_s": 2.0, "whole": False}
    ]


def test_a_single_request_and_a_whole_burst_are_never_held() -> None:
    g, _, lines = gate()
    assert g.held(ids("one", 1)) == set()
    assert g.held(ids("all", 4)) == set()
    assert [(x["burst"], x["arrived"], x["held_s"], x["whole"]) for x in lines] == [
        ("one", 1, 0.0, True),
        ("all", 4, 0.0, True),
    ]


def test_bursts_are_gated_each_on_its_own() -> None:
    g, clock, lines = gate()
    a = ids("ka", 2)
    b = ids("kb", 2)
    assert g.held([a[0], b[0]]) == {a[0], b[0]}
    clock.now += 1
    assert g.held([a[0], b[0], b[1]]) == {a[0]}
    assert [x["burst"] for x in lines] == ["kb"]


def test_the_burst_line_round_trips_through_the_hook_line_format() -> None:
    fields = {"burst": "3f9a0c1d2e4b", "n": 3, "arrived": 3, "held_s": 0.212, "whole": True}
    event = parse_hook_line("(EngineCore pid=9) " + format_hook_line("burst", 9, 1.5, **fields))
    assert event is not None
    assert (event.kind, event.pid, event.fields) == ("burst", 9, fields)


# --- around a scheduler -------------------------------------------------------------------


class Request:
    def __init__(self, request_id: str) -> None:
        self.request_id = request_id

    def __repr__(self) -> str:
        return self.request_id


class Queue(list[Request]):
    """TEST DOUBLE of vLLM v1's FCFSRequestQueue: the methods the gate calls."""

    def remove_requests(self, requests: list[Request]) -> None:
        gone = set(map(id, requests))
        self[:] = [r for r in self if id(r) not in gone]

    def prepend_request(self, request: Request) -> None:
        self.insert(0, request)


class Output:
    def __init__(self, scheduled: list[str]) -> None:
        self.scheduled = scheduled
        self.total_num_scheduled_tokens = len(scheduled)


class Module:
    """TEST DOUBLE of vllm.v1.core.sched.scheduler: its Scheduler schedules every waiting
    request it sees (and keeps them waiting, so the queue's order can be read after)."""

    __name__ = "vllm.v1.core.sched.scheduler"

    class Scheduler:
        def __init__(self, queue: Queue) -> None:
            self.waiting = queue
            self.seen: list[list[str]] = []

        def schedule(self) -> Output:
            self.seen.append([r.request_id for r in self.waiting])
            return Output(self.seen[-1])


@pytest.fixture
def module() -> Iterator[type[Module]]:
    original = Module.Scheduler.schedule
    yield Module
    Module.Scheduler.schedule = original  # type: ignore[method-assign]


def test_the_scheduler_does_not_see_a_burst_until_it_is_whole(module: type[Module]) -> None:
    lines: list[tuple[str, dict[str, Any]]] = []
    attach(module, 5.0, lambda kind, **f: lines.append((kind, f)))  # type: ignore[arg-type]
    a, b, c = (Request(r) for r in ids("k", 3))
    other = Request("cmpl-plain-0")
    queue = Queue([other, a, b])
    scheduler = module.Scheduler(queue)
    out = scheduler.schedule()
    assert out.scheduled == ["cmpl-plain-0"]  # the burst's two are out of its sight
    assert queue == [a, b, other]  # back in front, in their order
    queue.append(c)
    order = [a.request_id, b.request_id, "cmpl-plain-0", c.request_id]
    assert scheduler.schedule().scheduled == order  # whole: all three in this step
    assert lines[0] == ("attached", {"targets": ["burst-gate"], "hold_s": 5.0})
    assert [k for k, f in lines[1:]] == ["burst"]
    assert lines[1][1]["whole"] is True


def test_a_queue_the_gate_does_not_know_switches_it_off_and_the_engine_runs(
    module: type[Module],
) -> None:
    lines: list[tuple[str, dict[str, Any]]] = []
    attach(module, 5.0, lambda kind, **f: lines.append((kind, f)))  # type: ignore[arg-type]
    held = ids("k", 2)
    scheduler = module.Scheduler([Request(held[0])])  # type: ignore[arg-type]  # no remove_requests
    assert scheduler.schedule().scheduled == [held[0]]
    assert scheduler.schedule().scheduled == [held[0]]
    off = [f for k, f in lines if k == "not-attached"]
    assert len(off) == 1
    assert off[0]["target"] == "burst-gate"
    assert "remove_requests" in off[0]["reason"]


SCHEDULER = '''
"""TEST DOUBLE of vllm.v1.core.sched.scheduler."""
class Scheduler:
    def schedule(self):
        return "scheduled"
'''
LOAD = """
from importlib.metadata import entry_points
[p.load()() for p in entry_points(group="vllm.general_plugins")]
import vllm.v1.core.sched.scheduler as m
import json
print(json.dumps(getattr(m.Scheduler.schedule, "__wrapped__", None) is not None))
"""


def _about_the_gate(fields: dict[str, Any]) -> bool:
    return "burst-gate" in (fields.get("target"), *fields.get("targets", []))


@pytest.mark.parametrize(
    ("value", "wrapped", "said"),
    [
        ("5", True, "attached"),
        ("soon", False, "not-attached"),
        ("", False, None),
    ],
)
def test_the_plugin_gates_vllms_scheduler_only_when_asked(
    tmp_path: Path, value: str, wrapped: bool, said: str | None
) -> None:
    tree = write_tree(
        tmp_path / "engine",
        {
            "vllm/__init__.py": "",
            "vllm/v1/__init__.py": "",
            "vllm/v1/core/__init__.py": "",
            "vllm/v1/core/sched/__init__.py": "",
            "vllm/v1/core/sched/scheduler.py": SCHEDULER,
        },
    )
    env = {"PYTHONPATH": str(tree), BURST_GATE_ENV: value}
    events, done = run_hooked(tmp_path, LOAD, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) is wrapped
    gate_lines = [e.kind for e in events if _about_the_gate(e.fields)]
    assert gate_lines == ([said] if said else [])


# --- the runner's side ------------------------------------------------------------------------


def test_send_burst_names_every_request_as_one_of_its_burst() -> None:
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(self.headers["X-Request-Id"])
            body = json.dumps({"choices": [{"text": "x"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert send_burst(url, [{"prompt": [1]}] * 3, 10) == [None] * 3
        assert send_burst(url, [{"prompt": [2]}], 10) == [None]
    finally:
        server.shutdown()
        server.server_close()
    first, second = seen[:3], seen[3:]
    named = {parse_burst_id(r) for r in first}
    assert len(named) == 1
    ((key, n),) = named  # type: ignore[misc]
    assert n == 3
    assert sorted(first) == [burst_request_id(key, i, 3) for i in range(3)]
    again = parse_burst_id(second[0])
    assert again is not None
    assert again[0] != key  # a new key per burst
