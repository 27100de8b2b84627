"""The plan's drafter fields: the sweep document (``warmgate-drafter-sweep/1``) and the hook flag.

One type per document on both sides: the planner builds `SweepSpec` (``plan_sweep`` in
``warmgate.buckets.drafter.sweep``), plan.json carries its ``to_json()`` as ``drafter_sweep`` with
``drafter_hook`` next to it (docs/runner.md, "Drafter sweep and compile hook"), and the runner
reads them back with `parse_sweep` and `parse_hook`, the only readers. Like every plan field, an
unknown key, another ``format`` or a wrong type is refused with its path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from warmgate.contract.schema import Fields, fields_json

SWEEP_FORMAT = "warmgate-drafter-sweep/1"
PHASES = ("decode", "prompt")
# The engine's form of a graph, as vllm-gaudi's _check_config logs it and the hook names it:
# (phase, batch, query, block-list length).
Graph = tuple[str, int, int, int]


@dataclass(frozen=True)
class SweepStepSpec:
    """One burst of the sweep and the drafter graphs it surely makes the engine compile; the
    planner's figures (``new`` graphs, the decode ``s`` range, engine steps and seconds, each
    a (low, high) pair) travel with it for the report."""

    name: str
    concurrency: int
    prompt_tokens: int
    max_tokens: int
    expected: tuple[Graph, ...]
    new: int = 0
    decode_s_range: tuple[float, float] = (0, 0)
    engine_steps: tuple[float, float] = (0, 0)
    seconds: tuple[float, float] = (0, 0)

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


@dataclass(frozen=True)
class SweepSpec:
    """The sweep the operator planned (``plan_sweep``) and what it leaves undriven; ``seconds``
    and each step's are the planner's estimates rounded to 0.1 s, as the document writes them."""

    method: str
    k: int
    temperature: float
    ignore_eos: bool
    steps: tuple[SweepStepSpec, ...]
    targets: int
    undriven: tuple[tuple[Graph, str], ...]
    budget_s: float
    seconds: tuple[float, float]
    arrival_steps: int = 0
    driven: int = 0
    assumptions: tuple[str, ...] = ()

    @property
    def expected(self) -> frozenset[Graph]:
        """Every graph some step drives."""
        return frozenset(g for step in self.steps for g in step.expected)

    def to_json(self) -> dict[str, Any]:
        """The ``drafter_sweep`` document (format warmgate-drafter-sweep/1)."""
        return {
            "format": SWEEP_FORMAT,
            "method": self.method,
            "k": self.k,
            "request": {
                "temperature": self.temperature,
                "ignore_eos": self.ignore_eos,
                "token_pattern": "varied",
            },
            "arrival_steps": self.arrival_steps,
            "steps": [step.to_json() for step in self.steps],
            "targets": self.targets,
            "driven": self.driven,
            "undriven": [{"shape": list(g), "reason": why} for g, why in self.undriven],
            "budget_s": self.budget_s,
            "seconds": list(self.seconds),
            "assumptions": list(self.assumptions),
        }


@dataclass(frozen=True)
class HookSpec:
    """``drafter_hook``: install the compile hook; ``required``: no verdict without it;
    ``accept_missing``: a planned graph the sweep never drove is a named, counted gap instead of
    an unwarmed shape (the operator writes it for ``spec.buckets.coverage.complete: false``)."""

    enabled: bool = False
    required: bool = False
    accept_missing: bool = False

    def to_json(self) -> dict[str, Any]:
        """``accept_missing`` only when set: plans without it keep their text and hash."""
        doc: dict[str, Any] = {"enabled": self.enabled, "required": self.required}
        return {**doc, "accept_missing": True} if self.accept_missing else doc


def parse_hook(f: Fields) -> HookSpec:
    """The ``drafter_hook`` object (absent: disabled)."""
    if not f.present:
        return HookSpec()
    spec = HookSpec(
        enabled=f.boolean("enabled", True),
        required=f.boolean("required", False),
        accept_missing=f.boolean("accept_missing", False),
    )
    if spec.required and not spec.enabled:
        f.error("required: the hook cannot be required while enabled is false")
    f.finish()
    return spec


def parse_sweep(f: Fields, max_model_len: int | None) -> SweepSpec | None:
    """The ``drafter_sweep`` document, or None when the plan has none."""
    if not f.present:
        return None
    f.format(SWEEP_FORMAT)
    request = f.obj("request")
    temperature = request.number("temperature", 0.0, lo=0.0)
    ignore_eos = request.boolean("ignore_eos", True)
    request.choice("token_pattern", ("varied",), "varied")
    request.finish()
    assumptions = f.any_list("assumptions")
    for text in assumptions:
        if not isinstance(text, str):
            f.error(f"assumptions: expected strings, got {text!r}")
    spec = SweepSpec(
        method=f.text("method"),
        k=f.integer("k", lo=0),
        temperature=temperature,
        ignore_eos=ignore_eos,
        steps=tuple(_step(s, max_model_len) for s in f.obj_list("steps")),
        targets=f.integer("targets", lo=0),
        undriven=tuple(_undriven(u) for u in f.obj_list("undriven")),
        budget_s=f.number("budget_s", lo=0.0),
        seconds=_pair(f, "seconds"),
        arrival_steps=f.integer("arrival_steps", lo=0),
        driven=f.integer("driven", lo=0),
        assumptions=tuple(str(a) for a in assumptions),
    )
    names = [s.name for s in spec.steps]
    if len(set(names)) != len(names):
        f.error("steps: step names must be unique")
    f.finish()
    return spec


def _pair(f: Fields, key: str) -> tuple[float, float]:
    """Two numbers, kept as written (an int stays an int: the plan's text round-trips)."""
    value = f.any_list(key)
    ok = len(value) == 2 and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
    )
    if not ok:
        f.error(f"{key}: expected two numbers, got {value!r}")
        return 0.0, 0.0
    return value[0], value[1]


def graph(f: Fields, where: str, value: object) -> Graph | None:
    """A [phase, batch, query, blocks] list as a Graph, or None after reporting the problem."""
    if (
        isinstance(value, list)
        and len(value) == 4
        and value[0] in PHASES
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value[1:])
        and value[1] >= 1
        and value[2] >= 1
        and value[3] >= 0
    ):
        return (str(value[0]), int(value[1]), int(value[2]), int(value[3]))
    f.error(f"{where}: expected [phase, batch, query, blocks], got {value!r}")
    return None


def graphs(f: Fields, key: str) -> tuple[Graph, ...]:
    """The list ``key`` of graphs (absent: none), each problem reported."""
    found = [graph(f, key, value) for value in f.any_list(key)]
    return tuple(g for g in found if g is not None)


def _step(f: Fields, max_model_len: int | None) -> SweepStepSpec:
    expected = graphs(f, "expected")
    step = SweepStepSpec(
        name=f.text("name"),
        concurrency=f.integer("concurrency", lo=1, hi=1024),
        prompt_tokens=f.integer("prompt_tokens", lo=1),
        max_tokens=f.integer("max_tokens", lo=1),
        expected=expected,
        new=f.integer("new", lo=0),
        decode_s_range=_pair(f, "decode_s_range"),
        engine_steps=_pair(f, "engine_steps"),
        seconds=_pair(f, "seconds"),
    )
    if max_model_len is not None and step.prompt_tokens + step.max_tokens > max_model_len:
        f.error(f"prompt_tokens + max_tokens exceed engine.max_model_len {max_model_len}")
    f.finish()
    return step


def _undriven(f: Fields) -> tuple[Graph, str]:
    shape = graph(f, "shape", f.value("shape"))
    result = (shape or ("decode", 1, 1, 0), f.text("reason"))
    f.finish()
    return result
