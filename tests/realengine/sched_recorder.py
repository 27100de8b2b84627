"""A vLLM general plugin (test-side) that records what the real scheduler schedules, step by step.

Installed by ``engine.install_plugin(folder, sched_recorder)``: a
``warmgate_sched_recorder-1.dist-info`` whose entry point in
the group ``vllm.general_plugins`` is ``sched_recorder:register``; the folder goes on the
engine's PYTHONPATH (vLLM calls every general plugin in every process it starts,
vllm/plugins/__init__.py). When ``WARMGATE_SCHED_LOG`` names a file, ``register`` wraps
``vllm.v1.core.sched.scheduler.Scheduler.schedule`` and appends one JSON line per engine step
(only the EngineCore process schedules):

    {"step": 7, "t": 1733100000.25, "waiting": ["cmpl-a-0"], "running": 3,
     "reqs": {"cmpl-b-0": {"scheduled": 3, "computed": 130, "spec": 2}, ...},
     "new": {"cmpl-b-0": {"prompt": 128, "head": [101, 433, ...], "computed": 0}}}

``computed`` is the request's num_computed_tokens before the step (a prefix-cache hit shows as
a new request starting above 0), ``scheduled`` its scheduled tokens, ``spec`` its scheduled
draft tokens, ``head`` its first 8 prompt token ids (to tell which sweep request it is).
Runs inside the engine's processes: standard library and vLLM only.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

ENV = "WARMGATE_SCHED_LOG"
NAME = "warmgate_sched_recorder"
HEAD = 8
_lock = threading.Lock()
_state = {"registered": False, "step": 0}


def register() -> None:
    """The plugin entry point: wrap Scheduler.schedule once per process when asked to."""
    path = os.environ.get(ENV)
    if not path or _state["registered"]:
        return
    _state["registered"] = True
    from vllm.v1.core.sched.scheduler import Scheduler

    original = Scheduler.schedule

    def schedule(self: Any, *args: Any, **kwargs: Any) -> Any:
        waiting = [r.request_id for r in list(self.waiting)]
        running = len(self.running)
        out = original(self, *args, **kwargs)
        try:
            _write(path, _step(out, waiting, running))
        except Exception as exc:  # recording must never stop the engine
            _write(path, {"error": f"{type(exc).__name__}: {exc}"})
        return out

    Scheduler.schedule = schedule  # type: ignore[method-assign]


def _step(out: Any, waiting: list[str], running: int) -> dict[str, Any]:
    _state["step"] += 1
    computed: dict[str, int] = {}
    new: dict[str, Any] = {}
    for req in out.scheduled_new_reqs:
        ids = list(req.prompt_token_ids or [])
        computed[req.req_id] = int(req.num_computed_tokens)
        new[req.req_id] = {"prompt": len(ids), "head": ids[:HEAD], "computed": computed[req.req_id]}
    cached = out.scheduled_cached_reqs
    for req_id, done in zip(cached.req_ids, cached.num_computed_tokens, strict=True):
        computed[req_id] = int(done)
    spec = out.scheduled_spec_decode_tokens
    reqs = {
        rid: {
            "scheduled": int(n),
            "computed": computed.get(rid, -1),
            "spec": len(spec.get(rid, [])),
        }
        for rid, n in out.num_scheduled_tokens.items()
    }
    return {
        "step": _state["step"],
        "t": time.time(),
        "waiting": waiting,
        "running": running,
        "reqs": reqs,
        "new": new,
        "finished": sorted(out.finished_req_ids),
        "preempted": sorted(out.preempted_req_ids or ()),
    }


def _write(path: str, doc: dict[str, Any]) -> None:
    with _lock, open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(doc) + "\n")
