"""What the compile hook saw: whether it attached, what each sweep step drove and compiled, the
planned graphs the sweep never drove, and every compile during the probe, which is a graph the
warmup left cold (target or drafter).

Fail closed (issue 25): a graph the sweep plans is warmed only when the hook saw it run during
the sweep (its ``ran`` or ``compile`` line) or during the engine's own warmup. One that never ran
is ``missing``: the runner retries the steps that plan it once, and if it still never ran it is an
unwarmed shape of the run (named), unless the plan accepts it (``drafter_hook.accept_missing``,
written for ``spec.buckets.coverage.complete: false``), where it is a named, counted gap. Before,
such a graph was only listed, so a replay that missed it for the sweep's own reason hid it.

A drafter graph the sweep document lists as undriven (partial drafts only, over budget, ...)
is a known gap when the probe compiles it: the operator's status already counts it among the
graphs the engine compiles at runtime, so it is reported, not failed. Every other compile in the
probe is unwarmed: a graph the sweep promised, or one the drafter proof did not predict.

The hook's lines carry the engine's wall clock (``hooklog``); the runner records when the sweep's
steps and the probe began on the same clock, so each compile lands in the engine's start-up
(before the sweep), a sweep step, or the probe. With tensor parallelism every rank compiles the
same graphs: graphs are united over processes and counts taken from the busiest one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from warmgate.contract.summary import DrafterCounts
from warmgate.contract.sweepplan import Graph, HookSpec, SweepSpec
from warmgate.warmup.hook.lines import HookEvent
from warmgate.warmup.runner.sweep import SweepRun

NO_PROCESS = (
    "no engine process loaded the hook: vLLM did not load the plugin (check VLLM_PLUGINS), "
    "or no process imported vllm_gaudi's model runner"
)
NOT_LOADED = (
    "no engine process loaded the compile hook: vLLM did not load the plugin (check "
    "VLLM_PLUGINS, and that the image's vLLM loads vllm.general_plugins entry points)"
)
NO_RUNNER = "the compile hook loaded, but no engine process imported vllm_gaudi's model runner"
NOT_NAMED = "the drafter's forwards were not named"
# Where the evidence that a planned drafter graph was warmed comes from (issue 33, item 3): the
# hook saw it run or compile during the sweep, or run during the engine's own warmup. Another
# source (e.g. a direct drafter warmup in the engine) adds its graphs with ``add_evidence``.
SWEEP = "sweep"
ENGINE_WARMUP = "engine-warmup"
DIRECT = "direct"  # the engine plugin's direct drafter warmup (runner/direct_check.py)
# The causes whose ``detail`` is the hook's own reason (the others say it all).
SAID_BY_HOOK = ("hook-not-attached", "metric-unreadable", "proposer-not-found")


@dataclass
class DrafterCheck:
    """The hook's verdict on the drafter graphs; ``probe`` lists each compile in the probe."""

    hook: str = "off"  # off | attached | not-attached
    reason: str = ""
    drafter_named: bool = False
    warmup: dict[str, int] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    expected: frozenset[Graph] = frozenset()
    compiled: set[Graph] = field(default_factory=set)
    other: set[Graph] = field(default_factory=set)
    probe: list[str] = field(default_factory=list)
    known_gaps: list[Graph] = field(default_factory=list)
    # Planned graphs seen running in the sweep, and in the engine's warmup before it.
    ran: set[Graph] = field(default_factory=set)
    warmup_ran: set[Graph] = field(default_factory=set)
    # Missing planned graphs are gaps the plan allows (complete: false, or BestEffort).
    accepted: bool = False
    # Graphs with evidence of being warmed, by source (SWEEP, ENGINE_WARMUP, ...).
    evidence: dict[str, set[Graph]] = field(default_factory=dict)
    # Drafter graphs compiled during the probe (each also named in ``probe``).
    probe_graphs: set[Graph] = field(default_factory=set)
    # Engine processes that loaded the hook (its ``loaded`` lines).
    loaded: int = 0
    # Planned shapes the engine plugin's direct warmup tried and failed (issue 33): a shape
    # that failed is never evidence, and the run is not verified while any did.
    direct_failed: int = 0
    # The direct warmup's whole set (the plan's ``drafter_warmup``, issue 33): each of its
    # shapes needs evidence too (warmed directly, or compiled or run in the sweep or the
    # engine's warmup), else the run is not verified (``incomplete``). Empty: none planned.
    warmup_set: frozenset[Graph] = frozenset()
    failed_set: frozenset[Graph] = frozenset()

    def add_evidence(self, source: str, graphs: Collection[Graph]) -> None:
        """Record that ``source`` warmed ``graphs`` (only planned ones count)."""
        self.evidence.setdefault(source, set()).update(graphs)

    @property
    def seeing(self) -> bool:
        """Whether the hook can tell which planned graphs ran: it attached and named the
        drafter's forwards (or the plan has no graph to name)."""
        return self.hook == "attached" and (self.drafter_named or not self.planned)

    @property
    def missing(self) -> list[Graph]:
        """Planned graphs no source has evidence for (only known while the hook sees)."""
        return sorted(self.expected - self.driven) if self.seeing else []

    @property
    def planned(self) -> frozenset[Graph]:
        """Every planned drafter graph: the sweep's and the direct warmup's."""
        return self.expected | self.warmup_set

    @property
    def incomplete(self) -> list[Graph]:
        """Shapes of the direct warmup's set no source has evidence for, that the plugin did
        not fail and the sweep did not plan (those are ``direct_failed`` and ``missing``)."""
        if not self.seeing:
            return []
        return sorted(self.warmup_set - self.warmed - self.expected - self.failed_set)

    @property
    def warmed(self) -> set[Graph]:
        """Every graph some source has evidence for (planned or not)."""
        warmed: set[Graph] = set()
        for graphs in self.evidence.values():
            warmed |= graphs
        return warmed

    @property
    def unverified(self) -> int:
        """Planned graphs without evidence: every one when the hook cannot see (or no compile
        count tells whether the probe compiled them), else the missing ones, the direct
        warmup's shapes no source warmed, the ones it failed and those the probe compiled."""
        if self.hook == "off":
            return 0
        if not self.seeing:
            return len(self.planned)
        without = set(self.missing) | set(self.incomplete) | (self.probe_graphs & self.planned)
        failed = len(self.failed_set - without) if self.failed_set else self.direct_failed
        return len(without) + failed

    @property
    def cause(self) -> str:
        """Why planned graphs lack evidence, one of summary.DRAFTER_CAUSES ("" when none)."""
        if self.hook == "off":
            return ""
        if self.hook != "attached":
            if self.reason == NOT_LOADED:
                return "plugin-not-loaded"
            return "metric-unreadable" if _metric(self.reason) else "hook-not-attached"
        if not self.seeing:
            return "proposer-not-found"
        if self.missing:
            return "shapes-missing"
        if self.probe_graphs & self.expected or self.probe:
            return "probe-compiles"
        if self.direct_failed:
            return "direct-warmup-failed"
        if self.incomplete:
            return "direct-warmup-incomplete"
        return ""

    @property
    def verified(self) -> bool | None:
        """None without a hook; True when it attached, named the drafter's forwards (when the
        sweep plans graphs), saw every planned graph run or accepts the missing ones, and the
        probe compiled nothing (each compile in the probe is also an unwarmed shape)."""
        if self.hook == "off":
            return None
        settled = not self.missing or self.accepted
        direct = not self.direct_failed and not self.incomplete  # never accepted (issue 33)
        return self.seeing and settled and not self.probe and direct

    @property
    def unwarmed(self) -> list[str]:
        """The run's unwarmed entries from this check: planned graphs that never ran (unless
        accepted), then every compile in the probe."""
        missing = [] if self.accepted else self.missing_reasons()
        return missing + self.probe

    def missing_reasons(self) -> list[str]:
        """One line per planned graph the sweep never drove."""
        return [
            f"Drafter graph {g!r} planned for the sweep never ran in it (its steps retried): it "
            "compiles at runtime"
            for g in self.missing
        ]

    @property
    def not_compiled(self) -> list[Graph]:
        """Planned graphs no sweep step compiled (the engine's warmup, or the model, was off)."""
        return sorted(self.expected - self.compiled)

    @property
    def driven(self) -> set[Graph]:
        """Planned graphs with evidence from any source: the sweep compiled or ran them, or
        the engine's warmup ran them (or a source ``add_evidence`` recorded)."""
        return self.warmed & self.expected

    def line(self) -> str:
        """One line for the report's reason and the logs."""
        if self.hook == "off":
            return "drafter: not checked (no compile hook)"
        if self.hook != "attached":
            return f"drafter: not verified: {self.reason}"
        if not self.seeing:
            return f"drafter: not verified: {NOT_NAMED} ({self.reason})"
        missing = ""
        if self.missing:
            allowed = " (accepted by the plan)" if self.accepted else ""
            missing = f", {len(self.missing)} never ran{allowed}"
        direct = f"; {self.direct_failed} failed in the direct warmup" if self.direct_failed else ""
        if self.warmup_set:
            direct += (
                f"; direct warmup set: {len(self.warmup_set & self.warmed)} of "
                f"{len(self.warmup_set)} shapes with evidence"
            )
            if self.incomplete:
                direct += (
                    f", {len(self.incomplete)} neither warmed directly nor compiled in the "
                    f"sweep (first {self.incomplete[0]!r})"
                )
        return (
            f"drafter: the sweep drove {len(self.driven)} of {len(self.expected)} planned graphs "
            f"({len(self.compiled & self.expected)} compiled in it){missing}; "
            f"{len(self.probe)} unexpected compile(s) in the probe, {len(self.known_gaps)} of the "
            f"undriven graphs{direct}"
        )

    def to_json(self) -> dict[str, Any]:
        """Plain dict for the report."""
        return {
            "hook": self.hook,
            "reason": self.reason,
            "verified": self.verified,
            "drafter_named": self.drafter_named,
            "warmup_compiles": self.warmup,
            "expected": len(self.expected),
            "compiled": len(self.compiled & self.expected),
            "driven": len(self.driven),
            "not_compiled": [list(g) for g in self.not_compiled],
            "missing": [list(g) for g in self.missing],
            "missing_accepted": self.accepted,
            "unverified": self.unverified,
            "cause": self.cause,
            "warmup_set": len(self.warmup_set),
            "incomplete": [list(g) for g in self.incomplete],
            "evidence": {k: len(v & self.expected) for k, v in sorted(self.evidence.items())},
            "warmup_ran": [list(g) for g in sorted(self.warmup_ran & self.expected)],
            "other_sweep_graphs": [list(g) for g in sorted(self.other)],
            "steps": self.steps,
            "probe_compiles": self.probe,
            "probe_known_gaps": [list(g) for g in self.known_gaps],
        }

    def summary(self) -> DrafterCounts:
        """The few fields the operator reads from the termination summary."""
        return DrafterCounts(
            hook=self.hook,
            verified=self.verified,
            expected=len(self.expected),
            driven=len(self.driven),
            missing=len(self.missing),
            probe=len(self.probe),
            gaps=len(self.known_gaps),
            unverified=self.unverified,
            cause=self.cause,
            detail=self.reason if self.cause in SAID_BY_HOOK else "",
            planned=len(self.planned) if self.warmup_set else 0,
        )


def check_drafter(
    events: list[HookEvent],
    hook: HookSpec,
    sweep: SweepSpec | None,
    run: SweepRun | None,
    probe_began: float | None,
    *,
    unwarmable: Collection[Graph] = (),
    target_gaps: int = 0,
) -> DrafterCheck:
    """The check from the hook's events, the sweep's timing and the probe's start.

    ``unwarmable`` are the plan's known-unwarmable target shapes: a drafter graph of one of them
    in the probe is a known gap, like an undriven one. ``target_gaps`` is how many of them the
    engine logged as not warmed-up: that many compiles outside the drafter in the probe are
    theirs (one per process), not a graph the warmup left cold.
    """
    check = DrafterCheck(expected=sweep.expected if sweep else frozenset())
    if not hook.enabled:
        return check
    check.accepted = hook.accept_missing
    _state(check, events)
    warm = [e for e in events if e.kind == "warmup"]
    if warm:
        busiest = max(warm, key=lambda e: e.count)
        check.warmup = {"count": busiest.count, "drafter": busiest.drafter}
    sweep_began = run.began if run is not None else None
    in_probe, in_sweep, before = _placed(events, sweep_began, probe_began)
    check.steps = _per_step([e for e in in_sweep if e.kind == "compile"], sweep, run, in_sweep)
    graphs = {g for e in in_sweep if e.kind == "compile" and (g := _graph(e)) is not None}
    check.compiled = graphs
    check.other = graphs - check.expected
    check.ran = {g for e in in_sweep if e.kind == "ran" and (g := _graph(e)) is not None}
    check.warmup_ran = {g for e in before if e.kind == "ran" and (g := _graph(e)) is not None}
    check.add_evidence(SWEEP, check.compiled | check.ran)
    check.add_evidence(ENGINE_WARMUP, check.warmup_ran)
    undriven = {g for g, _ in sweep.undriven} if sweep is not None else set()
    undriven |= set(unwarmable)
    compiles = [e for e in in_probe if e.kind == "compile"]
    known = [e for e in compiles if _graph(e) in undriven]
    check.known_gaps = sorted({g for e in known if (g := _graph(e)) is not None})
    cold = [e for e in compiles if e not in known]
    check.probe_graphs = {g for e in cold if (g := _graph(e)) is not None}
    check.probe = _probe_reasons(cold, target_gaps)
    return check


def _placed(
    events: list[HookEvent], sweep_began: float | None, probe_began: float | None
) -> tuple[list[HookEvent], list[HookEvent], list[HookEvent]]:
    """(in the probe, in the sweep, before the sweep): each compile or ran event by its time."""
    probe, sweep, before = [], [], []
    for e in events:
        if e.kind not in ("compile", "ran"):
            continue
        if probe_began is not None and e.t >= probe_began:
            probe.append(e)
        elif sweep_began is not None and e.t >= sweep_began:
            sweep.append(e)
        else:
            before.append(e)
    return probe, sweep, before


def missing_steps(check: DrafterCheck, sweep: SweepSpec) -> list[str]:
    """The names of the sweep's steps that plan a graph the check found missing, in order."""
    missing = set(check.missing)
    return [s.name for s in sweep.steps if missing & set(s.expected)]


def _metric(reason: str) -> bool:
    """Whether the hook's reason is Habana's compile metric (missing, or unreadable)."""
    return "graph_compilation metric failed" in reason or "metric_localcontext missing" in reason


def _state(check: DrafterCheck, events: list[HookEvent]) -> None:
    check.loaded = len({e.pid for e in events if e.kind == "loaded"})
    attached = [e for e in events if e.kind == "attached"]
    failed = [e for e in events if e.kind == "not-attached"]
    step_ok = any("sample_tokens" in (e.fields.get("targets") or []) for e in attached)
    check.drafter_named = any("drafter" in (e.fields.get("targets") or []) for e in attached)
    # the burst gate (hook/burst_gate.py) only helps the sweep form its batches: its failure
    # leaves the compile counting as it was
    step_failed = [e for e in failed if e.fields.get("target") not in ("drafter", "burst-gate")]
    if step_ok and not step_failed:
        check.hook = "attached"
        drafter_failed = [e for e in failed if e.fields.get("target") == "drafter"]
        if drafter_failed:
            check.reason = str(drafter_failed[0].fields.get("reason", ""))
        elif not check.drafter_named:
            check.reason = (
                "no engine process attached the hook to vllm_gaudi's HpuEagleProposer (the "
                "drafter module was never imported)"
            )
        return
    check.hook = "not-attached"
    first = step_failed[0] if step_failed else None
    if first is not None:
        check.reason = str(first.fields.get("reason", ""))
    elif not check.loaded and not attached:
        check.reason = NOT_LOADED
    else:
        check.reason = NO_RUNNER if check.loaded else NO_PROCESS


def _graph(event: HookEvent) -> Graph | None:
    g = event.graph
    if event.where != "drafter" or g is None or len(g) != 4:
        return None
    if g[0] not in ("decode", "prompt") or not all(isinstance(v, int) for v in g[1:]):
        return None
    return (str(g[0]), int(g[1]), int(g[2]), int(g[3]))


def _per_step(
    events: list[HookEvent],
    sweep: SweepSpec | None,
    run: SweepRun | None,
    seen: list[HookEvent] | None = None,
) -> list[dict[str, Any]]:
    """Each step run: its compiles (from the busiest process), the graphs it compiled, and the
    planned graphs it neither compiled nor ran itself (an earlier step, or the engine's warmup,
    may have: the run's ``missing`` decides)."""
    if sweep is None or run is None:
        return []
    planned = {s.name: s for s in sweep.steps}
    out = []
    for i, step in enumerate(run.steps):
        end = run.steps[i + 1].began if i + 1 < len(run.steps) else float("inf")
        mine = [e for e in events if step.began <= e.t < end]
        ran = {g for e in seen or () if step.began <= e.t < end and (g := _graph(e)) is not None}
        graphs = sorted({g for e in mine if (g := _graph(e)) is not None})
        spec = planned.get(step.name)
        expected = spec.expected if spec else ()
        per_pid = Counter[int]()
        for e in mine:
            if e.where == "step":
                per_pid[e.pid] += e.count
        out.append(
            {
                **step.to_json(),
                "compiles": max(per_pid.values(), default=0),
                "graphs": [list(g) for g in graphs],
                "expected": len(expected),
                "missing": [list(g) for g in expected if g not in graphs and g not in ran],
            }
        )
    return out


def _probe_reasons(events: list[HookEvent], target_gaps: int = 0) -> list[str]:
    """Every drafter graph compiled in the probe, by name, then the other compiles as one line
    (less the ``target_gaps`` the engine logged for the plan's known-unwarmable shapes)."""
    reasons: list[str] = []
    seen: set[Graph] = set()
    unnamed = False
    for e in events:
        g = _graph(e)
        if g is not None and g not in seen:
            seen.add(g)
            reasons.append(f"Drafter graph {g!r} compiled during the probe (not warmed)")
        elif e.where == "drafter" and g is None and not unnamed:
            unnamed = True
            reasons.append("a drafter graph (shape unreadable) compiled during the probe")
    busiest = Counter[int]()
    steps = Counter[int]()
    for e in events:
        if e.where == "step" and e.count > e.drafter:  # drafter counts include known gaps
            busiest[e.pid] += e.count - e.drafter
            steps[e.pid] += 1
    pid, count = busiest.most_common(1)[0] if busiest else (0, 0)
    if count > target_gaps:
        count -= target_gaps
        reasons.append(
            f"{count} graph compilation(s) outside the drafter in {steps[pid]} probe step(s): "
            "target or sampler graphs the warmup did not compile"
        )
    return reasons
