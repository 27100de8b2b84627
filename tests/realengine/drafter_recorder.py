"""A vLLM general plugin (test-side) that records the input shape of every drafter forward.

Installed by ``engine.install_plugin(folder, drafter_recorder)`` like ``sched_recorder.py``: a
``warmgate_drafter_recorder-1.dist-info`` whose entry point in ``vllm.general_plugins`` is
``drafter_recorder:register``. When ``WARMGATE_DRAFTER_LOG`` names a file, ``register`` wraps
vLLM's ``SpecDecodeBaseProposer.propose`` and ``dummy_run`` (the parent of ``EagleProposer``,
vllm/v1/spec_decode/llm_base_proposer.py) so that, during the call, the proposer's ``model`` is
a proxy that appends one JSON line per forward, in whichever engine process runs the drafter:

    {"t": 1733100000.25, "pid": 7, "via": "propose", "shape": [[12], [12], [12, 128]]}

``shape`` holds the shapes of ``input_ids``, ``positions`` and ``hidden_states`` (``null`` for an
argument the forward did not get); ``via`` is the proposer method that ran it. The test splits
the lines at the moment ``/health`` first answered. Runs inside the engine's processes:
standard library and vLLM only.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

ENV = "WARMGATE_DRAFTER_LOG"
NAME = "warmgate_drafter_recorder"
_lock = threading.Lock()
_state = {"registered": False}


def register() -> None:
    """The plugin entry point: wrap the proposer once per process when asked to."""
    path = os.environ.get(ENV)
    if not path or _state["registered"]:
        return
    _state["registered"] = True
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer

    for name in ("propose", "dummy_run"):
        original = getattr(SpecDecodeBaseProposer, name)
        setattr(SpecDecodeBaseProposer, name, _recorded(original, name, path))


def _recorded(original: Any, via: str, path: str) -> Any:
    """During the call, a forward pre-hook on the drafter's model writes each forward's shapes
    (a hook, not a proxy: eagle3's propose checks the model's class)."""

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        model = self.model
        if getattr(_local, "via", None) is not None or not hasattr(
            model, "register_forward_pre_hook"
        ):
            return original(self, *args, **kwargs)
        _local.via = via
        handle = model.register_forward_pre_hook(_hook(path), with_kwargs=True)
        try:
            return original(self, *args, **kwargs)
        finally:
            handle.remove()
            _local.via = None

    return method


_local = threading.local()


def _hook(path: str) -> Any:
    def hook(module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        shapes = [_shape(kwargs.get(k)) for k in ("input_ids", "positions", "hidden_states")]
        doc = {"t": time.time(), "pid": os.getpid(), "via": _local.via, "shape": shapes}
        with _lock, open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(doc) + "\n")

    return hook


def _shape(value: Any) -> list[int] | None:
    shape = getattr(value, "shape", None)
    return [int(d) for d in shape] if shape is not None else None
