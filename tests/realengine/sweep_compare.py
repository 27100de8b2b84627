"""Compare, step by step, the batches vLLM's real scheduler formed with the sweep warmgate planned.

Input: the runner plan (its ``drafter_sweep``), the bucket plan it was built from, and the
scheduler recorder's lines (sched_recorder.py). Each sweep request is found by its prompt's first
token ids (``sweep_prompt``, the runner's own generator). For every sweep step this checks the
assumptions its guarantee rests on (warmgate.buckets.drafter.ramp) against what the scheduler
did (counting the engine steps that scheduled a token), and maps the recorded steps through the
plan's lookups to the drafter graphs a Gaudi engine would have run (call 1 on the target's
decode shape (B*T, 1, C); calls 2..k on the padded batch B over X_j = sum ceil((c_i + a_i + j)
/ block) blocks, a_i the drafts step i accepted; the calls after each prompt). A step "formed
as planned" when every assumption held and its graphs include every graph the sweep expected
of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from warmgate.buckets.coverage.states import StateSpace
from warmgate.buckets.drafter.ramp import Ramp, RampOracle
from warmgate.buckets.drafter.walk import DrafterWalk, Key
from warmgate.buckets.engine.plan import BucketPlan
from warmgate.contract.order import parse_plan
from warmgate.contract.sweepplan import SweepStepSpec
from warmgate.warmup.runner.sweep import sweep_prompt

Graph = tuple[str, int, int, int]
HEAD = 8


@dataclass
class StepCheck:
    """One sweep step against the real scheduler."""

    name: str
    n: int
    prompt: int
    max_tokens: int
    expected: set[Graph]
    ramp: Ramp | None
    engine_steps: int = 0
    arrival: int | None = None  # engine steps from the first request's to the last one's arrival
    prefill: int | None = None  # engine steps before the first all-n decode step
    s_seen: list[int] = field(default_factory=list)  # S at each all-n decode step
    graphs: set[Graph] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)

    @property
    def formed(self) -> bool:
        """Every assumption held and every expected graph ran."""
        return not self.failures

    @property
    def missing(self) -> list[Graph]:
        """Expected graphs the recorded steps did not run."""
        return sorted(self.expected - self.graphs)

    def line(self) -> str:
        """One line for the figures."""
        verdict = "as planned"
        if not self.formed:
            verdict = f"NOT as planned ({'; '.join(self.failures)})"
        return (
            f"{self.name}: {self.engine_steps} engine steps, arrival {self.arrival}, prefill "
            f"{self.prefill}, S {self.s_seen[:1]}..{self.s_seen[-1:]}, "
            f"{len(self.expected & self.graphs)}/{len(self.expected)} graphs: {verdict}"
        )


def _config(key: Key) -> Graph:
    phase, (bs, query, blocks) = key
    return (phase, bs, query, bs * blocks if phase == "prompt" else blocks)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


class Comparison:
    """The plan's lookups and the recorder's lines; ``check(step)`` per sweep step."""

    def __init__(
        self, doc: dict[str, Any], plan: BucketPlan, lines: list[dict[str, Any]], pc: bool
    ) -> None:
        parsed = parse_plan(doc)
        assert parsed.drafter_sweep is not None, "the plan has no drafter sweep"
        self.sweep = parsed.drafter_sweep
        self.ids = (parsed.probe.token_id_min, parsed.probe.token_id_max)
        self.k = plan.config.num_speculative_tokens
        self.block = plan.config.block_size
        space = StateSpace.of(plan.config, partial_drafts=True, prefix_caching=pc)
        self.walk = DrafterWalk(plan, space)
        self.oracle = RampOracle(plan, self.walk, int(doc["drafter_sweep"]["arrival_steps"]))
        # An engine step is a step that scheduled a token: while the runner's burst gate holds
        # a burst (hook/burst_gate.py), EngineCore calls the scheduler and runs no forward.
        self.lines = [line for line in lines if line["reqs"]]
        self.arrival_steps = self.oracle.arrival
        self.owner = self._owners()

    def _owners(self) -> dict[str, tuple[str, int]]:
        """Request id -> (sweep step, index), from each new request's first prompt ids."""
        heads = {}
        for step in self.sweep.steps:
            for i in range(step.concurrency):
                head = tuple(sweep_prompt(step, i, *self.ids)[:HEAD])
                heads[head] = (step.name, i)
        owner = {}
        for line in self.lines:
            for rid, new in line["new"].items():
                found = heads.get(tuple(new["head"]))
                if found is not None and new["prompt"] == self._step(found[0]).prompt_tokens:
                    owner[rid] = found
        return owner

    def _step(self, name: str) -> SweepStepSpec:
        return next(s for s in self.sweep.steps if s.name == name)

    def checks(self) -> list[StepCheck]:
        """Every sweep step, in the plan's order."""
        return [self.check(step) for step in self.sweep.steps]

    def check(self, step: SweepStepSpec) -> StepCheck:
        """One sweep step: the assumptions, then the graphs its recorded steps ran."""
        ramp = self.oracle.ramp(step.concurrency, step.prompt_tokens, step.max_tokens)
        out = StepCheck(step.name, step.concurrency, step.prompt_tokens, step.max_tokens,
                        set(step.expected), ramp)  # fmt: skip
        mine = {rid for rid, (name, _) in self.owner.items() if name == step.name}
        if len(mine) != step.concurrency:
            out.failures.append(f"{len(mine)} of {step.concurrency} requests reached the scheduler")
            return out
        idx = [i for i, line in enumerate(self.lines) if mine & set(line["reqs"])]
        window = self.lines[idx[0] : idx[-1] + 1]
        out.engine_steps = len(window)
        self._assumptions(out, mine, window)
        self._graphs(out, mine, window)
        for graph in out.missing:
            out.failures.append(f"expected graph {graph} did not run")
        return out

    def _assumptions(self, out: StepCheck, mine: set[str], window: list[dict[str, Any]]) -> None:
        arrived = [self._arrival(rid) for rid in mine]
        out.arrival = max(arrived) - min(arrived)
        if out.arrival > self.arrival_steps:
            out.failures.append(f"arrival took {out.arrival} engine steps > {self.arrival_steps}")
        others = {rid for line in window for rid in line["reqs"]} - mine
        if others:
            out.failures.append(f"{len(others)} other request(s) ran during the step (not idle)")
        hits = [n["computed"] for line in window for rid, n in line["new"].items() if rid in mine]
        if any(hits):
            out.failures.append(f"prefix-cache hits: a request started at {max(hits)} tokens")
        if any(line["preempted"] for line in window):
            out.failures.append("a request was preempted")
        decode = [i for i, line in enumerate(window) if self._all_n_decode(line, mine, out.prompt)]
        if out.ramp is None or not out.ramp.decodes:
            return
        if not decode:
            out.failures.append("no step decoded all n requests with full drafts")
            return
        out.prefill = decode[0]
        out.s_seen = [self._s(window[i], mine) for i in decode]
        f = self.oracle.prefill_steps(out.n, out.prompt)
        r = out.ramp
        if f is not None and out.prefill > f:
            out.failures.append(f"prefill took {out.prefill} engine steps > F = {f}")
        if not r.s_start <= out.s_seen[0] <= r.s_first:
            out.failures.append(
                f"decode began at S {out.s_seen[0]}, outside [{r.s_start}, {r.s_first}]"
            )
        if out.s_seen[-1] < r.s_last:
            out.failures.append(f"decode ended at S {out.s_seen[-1]} < s_last {r.s_last}")

    def _arrival(self, rid: str) -> int:
        """The engine step at which the scheduler first saw the request (waiting or scheduled)."""
        return next(
            i for i, line in enumerate(self.lines) if rid in line["waiting"] or rid in line["reqs"]
        )

    def _all_n_decode(self, line: dict[str, Any], mine: set[str], prompt: int) -> bool:
        reqs = line["reqs"]
        if set(reqs) != mine:
            return False
        return all(r["computed"] >= prompt and r["spec"] == self.k for r in reqs.values())

    def _s(self, line: dict[str, Any], mine: set[str]) -> int:
        return sum(_ceil(line["reqs"][rid]["computed"] + 1, self.block) for rid in mine)

    def _graphs(self, out: StepCheck, mine: set[str], window: list[dict[str, Any]]) -> None:
        """The drafter graphs of every decode step with drafts, and of every prompt's end."""
        t = self.k + 1
        for j in range(2, self.k + 1):  # each prompt of P tokens completes once
            x = _ceil(out.prompt + j - 1, self.block)
            out.graphs.add(_config(("decode", (1, 1, self.walk.next_ctx(1, x)))))
        for i, line in enumerate(window):
            decoding = {
                rid: r for rid, r in line["reqs"].items()
                if rid in mine and r["computed"] >= out.prompt and r["spec"] == self.k
            }  # fmt: skip
            if not decoding:
                continue
            n = len(decoding)
            s = sum(_ceil(r["computed"] + 1, self.block) for r in decoding.values())
            shape = next(iter(self.walk.decode.pieces(n, t, s, s)))[2]
            out.graphs.add(_config(("decode", shape)))
            after = window[i + 1]["reqs"] if i + 1 < len(window) else {}
            if self.k < 2 or any(rid not in after for rid in decoding):
                continue  # a request ended here: its accepted drafts are not recorded
            padded = shape[0] // t
            for j in range(2, self.k + 1):
                x = 0
                for rid, r in decoding.items():
                    accepted = after[rid]["computed"] - r["computed"] - 1
                    x += _ceil(r["computed"] + accepted + j, self.block)
                out.graphs.add(_config(("decode", (padded, 1, self.walk.next_ctx(padded, x)))))


def summary(checks: list[StepCheck]) -> str:
    """'9 of 9 planned steps formed as planned'."""
    return f"{sum(c.formed for c in checks)} of {len(checks)} planned steps formed as planned"
