"""The hook's line format, the plan's drafter fields and the check of what the hook saw."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from runner_harness import make_drafter_plan

from warmgate.contract.order import PlanError, parse_plan
from warmgate.contract.summary import DrafterCounts
from warmgate.contract.sweepplan import HookSpec, SweepSpec, SweepStepSpec
from warmgate.warmup.engine.parse import LogParser
from warmgate.warmup.hook.lines import HookEvent, format_hook_line, parse_hook_line
from warmgate.warmup.runner.drafter_check import (
    DIRECT,
    NO_RUNNER,
    NOT_LOADED,
    DrafterCheck,
    check_drafter,
    missing_steps,
)
from warmgate.warmup.runner.sweep import SweepRun, SweepStepRun, sweep_prompt


def test_every_event_round_trips() -> None:
    lines = [
        format_hook_line("attached", 7, 1.25, targets=["sample_tokens", "warmup_model"]),
        format_hook_line("not-attached", 7, 2.0, target="step", reason='a "moved" method = x'),
        format_hook_line("warmup", 7, 3.5, count=250, drafter=25),
        format_hook_line(
            "compile", 8, 4.125, where="drafter", graph=["decode", 16, 1, 48], count=1
        ),
        format_hook_line("compile", 8, 5.0, where="step", count=3, drafter=1),
    ]
    assert lines[3] == (
        'warmgate-hook v1 compile pid=8 t=4.125 where=drafter graph=["decode",16,1,48] count=1\n'
    )
    events = [parse_hook_line(line) for line in lines]
    kinds = ["attached", "not-attached", "warmup", "compile", "compile"]
    assert [e.kind for e in events if e] == kinds
    assert events[1] is not None
    assert events[1].fields["reason"] == 'a "moved" method = x'
    assert events[3] == HookEvent(
        "compile", 8, 4.125, {"where": "drafter", "graph": ["decode", 16, 1, 48], "count": 1}
    )
    assert events[3].graph == ("decode", 16, 1, 48)
    assert (events[4].count, events[4].drafter, events[4].where) == (3, 1, "step")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "line",
    [
        "(EngineCore pid=5) warmgate-hook v1 compile pid=5 t=1.0 where=step count=2 drafter=0",
        "\x1b[0;36m(Worker_TP1 pid=5)\x1b[0;0m warmgate-hook v1 compile pid=5 t=1.0 where=step "
        "count=2 drafter=0",
    ],
)
def test_a_hook_line_after_a_process_prefix_is_read(line: str) -> None:
    parser = LogParser()
    parser.feed(line + "\n", "stderr")
    (event,) = parser.state.hook_events
    assert (event.pid, event.count) == (5, 2)


@pytest.mark.parametrize(
    "line",
    [
        "warmgate-hook v1 compile pid=5 t=1.0 where=st(EngineCore pid=9) INFO ep count=2",
        'warmgate-hook v1 compile pid=5 t=1.0 graph=["decode",16,1',
        "warmgate-hook v1 compile t=1.0 count=2",
        "warmgate-hook v2 compile pid=5 t=1.0 count=2",
        "warmgate-hook v1 exploded pid=5 t=1.0",
    ],
)
def test_a_garbled_or_foreign_hook_line_is_no_event(line: str) -> None:
    assert parse_hook_line(line) is None


def test_the_operator_sweep_document_parses(tmp_path: Path) -> None:
    raw = make_drafter_plan(tmp_path)
    plan = parse_plan(raw)
    sweep = plan.drafter_sweep
    assert sweep is not None
    assert (sweep.method, sweep.k, len(sweep.steps), len(sweep.expected)) == ("eagle3", 3, 49, 77)
    assert plan.drafter_hook == HookSpec(enabled=True, required=True)
    assert sweep.steps[0].expected[0][0] == "decode"


def _bad(tmp_path: Path, edit: Any) -> list[str]:
    raw = copy.deepcopy(make_drafter_plan(tmp_path))
    edit(raw)
    with pytest.raises(PlanError) as caught:
        parse_plan(raw)
    return caught.value.problems


def test_drafter_fields_are_validated_with_their_path(tmp_path: Path) -> None:
    def other_format(raw: dict[str, Any]) -> None:
        raw["drafter_sweep"]["format"] = "warmgate-drafter-sweep/2"

    def bad_shape(raw: dict[str, Any]) -> None:
        raw["drafter_sweep"]["steps"][0]["expected"][0] = ["decode", 0, 1, 8]

    def unknown(raw: dict[str, Any]) -> None:
        raw["drafter_sweep"]["steps"][1]["extra"] = 1
        raw["drafter_hook"]["required"] = "yes"

    def required_off(raw: dict[str, Any]) -> None:
        raw["drafter_hook"] = {"enabled": False, "required": True}

    assert _bad(tmp_path, other_format) == [
        "plan.drafter_sweep.format: this runner reads 'warmgate-drafter-sweep/1', the plan says "
        "'warmgate-drafter-sweep/2'"
    ]
    assert _bad(tmp_path, bad_shape) == [
        "plan.drafter_sweep.steps[0].expected: expected [phase, batch, query, blocks], got "
        "['decode', 0, 1, 8]"
    ]
    assert _bad(tmp_path, unknown) == [
        "plan.drafter_sweep.steps[1].extra: unknown field",
        "plan.drafter_hook.required: expected true or false, got 'yes'",
    ]
    assert _bad(tmp_path, required_off) == [
        "plan.drafter_hook.required: the hook cannot be required while enabled is false"
    ]


def test_sweep_prompts_are_distinct_per_step_and_request() -> None:
    steps = [SweepStepSpec(f"drafter-decode-n8-p{p}-m30", 8, 256, 30, ()) for p in (128, 256)]
    prompts = [tuple(sweep_prompt(s, i, 100, 20000)) for s in steps for i in range(8)]
    assert len({p[:16] for p in prompts}) == 16  # no two share even their first block's start
    assert all(100 <= t <= 20000 for p in prompts for t in p)
    assert sweep_prompt(steps[0], 3, 100, 20000) == sweep_prompt(steps[0], 3, 100, 20000)
    retry = [tuple(sweep_prompt(s, i, 100, 20000, attempt=1)) for s in steps for i in range(8)]
    assert not {p[:16] for p in retry} & {p[:16] for p in prompts}  # a retry hits no cached block


SPEC = SweepSpec(
    method="eagle3",
    k=3,
    temperature=0.0,
    ignore_eos=True,
    steps=(
        SweepStepSpec("a", 2, 1, 30, (("decode", 2, 1, 8), ("decode", 8, 1, 8))),
        SweepStepSpec("b", 3, 1, 30, (("decode", 4, 1, 4),)),
    ),
    targets=5,
    undriven=((("decode", 12, 1, 16), "partial drafts only"),),
    budget_s=60,
    seconds=(1.0, 2.0),
)
RUN = SweepRun(
    began=100.0,
    ended=120.0,
    steps=[SweepStepRun("a", 2, 2, 100.0, 110.0), SweepStepRun("b", 3, 3, 110.0, 120.0)],
)
ATTACHED = [
    HookEvent("attached", 1, 10.0, {"targets": ["sample_tokens", "warmup_model"]}),
    HookEvent("attached", 1, 10.0, {"targets": ["drafter"]}),
    HookEvent("warmup", 1, 50.0, {"count": 100, "drafter": 10}),
]


def drafter(t: float, graph: list[Any], pid: int = 1) -> HookEvent:
    return HookEvent("compile", pid, t, {"where": "drafter", "graph": graph, "count": 1})


def not_attached(t: float, target: str, reason: str) -> HookEvent:
    return HookEvent("not-attached", 1, t, {"target": target, "reason": reason})


def step(t: float, count: int, drafters: int, pid: int = 1) -> HookEvent:
    return HookEvent("compile", pid, t, {"where": "step", "count": count, "drafter": drafters})


def test_compiles_are_placed_in_sweep_steps_and_the_probe() -> None:
    events = [
        *ATTACHED,
        drafter(101.0, ["decode", 2, 1, 8]),
        step(101.0, 1, 1),
        drafter(111.0, ["decode", 4, 1, 4]),
        drafter(111.0, ["decode", 16, 1, 4]),  # not planned: another graph the step ran
        step(111.0, 2, 2),
        drafter(111.5, ["decode", 4, 1, 4], pid=2),  # TP rank 1 compiles the same graph
        step(111.5, 1, 1, pid=2),
        drafter(131.0, ["decode", 8, 1, 8]),  # the graph step "a" planned, first seen in probe
        drafter(131.0, ["decode", 12, 1, 16]),  # a known gap: the sweep could not drive it
        step(131.0, 4, 2),
    ]
    check = check_drafter(events, HookSpec(enabled=True), SPEC, RUN, probe_began=130.0)
    assert (check.hook, check.drafter_named, check.warmup) == (
        "attached",
        True,
        {"count": 100, "drafter": 10},
    )
    assert check.compiled == {("decode", 2, 1, 8), ("decode", 4, 1, 4), ("decode", 16, 1, 4)}
    assert check.not_compiled == [("decode", 8, 1, 8)]
    assert check.other == {("decode", 16, 1, 4)}
    assert [(s["name"], s["compiles"], s["missing"]) for s in check.steps] == [
        ("a", 1, [["decode", 8, 1, 8]]),
        ("b", 2, []),
    ]
    assert check.probe == [
        "Drafter graph ('decode', 8, 1, 8) compiled during the probe (not warmed)",
        "2 graph compilation(s) outside the drafter in 1 probe step(s): target or sampler "
        "graphs the warmup did not compile",
    ]
    assert check.known_gaps == [("decode", 12, 1, 16)]
    # Step "a" planned (8, 1, 8) and nothing in the sweep ran it: missing, and named first.
    assert check.missing == [("decode", 8, 1, 8)]
    assert check.unwarmed[0].startswith("Drafter graph ('decode', 8, 1, 8) planned for the sweep")
    assert check.unwarmed[1:] == check.probe
    assert check.verified is False
    # Without evidence: the missing graph, which the probe also compiled (issue 33).
    assert check.summary() == DrafterCounts(
        hook="attached",
        verified=False,
        expected=3,
        driven=2,
        missing=1,
        probe=2,
        gaps=1,
        unverified=1,
        cause="shapes-missing",
    )


def ran(t: float, graph: list[Any], warmup: bool = False) -> HookEvent:
    return HookEvent("ran", 1, t, {"where": "drafter", "graph": graph, "warmup": warmup})


def test_a_planned_graph_that_never_ran_fails_closed_and_names_its_steps() -> None:
    """Issue 25: a planned graph the sweep did not drive used to pass when the probe's replay
    missed it too; it is now an unwarmed shape, and the steps that plan it are retried."""
    events = [*ATTACHED, drafter(101.0, ["decode", 2, 1, 8]), step(101.0, 1, 1)]
    events += [
        ran(101.0, ["decode", 2, 1, 8]),
        ran(112.0, ["decode", 4, 1, 4]),
    ]  # cached: no compile
    check = check_drafter(events, HookSpec(enabled=True), SPEC, RUN, probe_began=130.0)
    assert check.probe == []  # the replay compiled nothing: the old verdict passed here
    assert check.driven == {("decode", 2, 1, 8), ("decode", 4, 1, 4)}
    assert check.missing == [("decode", 8, 1, 8)]
    assert check.verified is False
    assert missing_steps(check, SPEC) == ["a"]
    assert "3 planned graphs" in check.line()
    assert "1 never ran" in check.line()
    # The engine's own warmup ran it: shown warmed, nothing missing.
    warmed = check_drafter(
        [*events, ran(60.0, ["decode", 8, 1, 8], warmup=True)],
        HookSpec(enabled=True),
        SPEC,
        RUN,
        probe_began=130.0,
    )
    assert (warmed.missing, warmed.verified, warmed.unwarmed) == ([], True, [])
    # The plan accepts missing graphs (complete: false): a named, counted gap, not a failure.
    accepted = check_drafter(
        events, HookSpec(enabled=True, accept_missing=True), SPEC, RUN, probe_began=130.0
    )
    assert (accepted.missing, accepted.verified, accepted.unwarmed) == (
        [("decode", 8, 1, 8)],
        True,
        [],
    )
    assert accepted.summary().missing == 1
    assert "1 never ran (accepted by the plan)" in accepted.line()


def test_without_named_drafter_forwards_planned_graphs_are_not_verified() -> None:
    events = [
        ATTACHED[0],
        not_attached(10.0, "drafter", "propose missing"),
    ]
    check = check_drafter(events, HookSpec(enabled=True), SPEC, RUN, 130.0)
    assert (check.hook, check.drafter_named, check.missing) == ("attached", False, [])
    assert check.verified is False  # it cannot tell which planned graphs ran
    assert "forwards were not named (propose missing)" in check.line()


def test_the_plans_known_unwarmable_shapes_are_gaps_in_the_probe_and_nothing_else() -> None:
    """The drafter's prefill of a known-unwarmable target shape and the target's own compile
    of it (one per shape the engine logged) are known gaps; one more compile is unwarmed."""
    events = [
        *ATTACHED,
        drafter(101.0, ["decode", 2, 1, 8]),
        drafter(101.0, ["decode", 8, 1, 8]),
        step(101.0, 2, 2),
        drafter(111.0, ["decode", 4, 1, 4]),
        step(111.0, 1, 1),
        drafter(131.0, ["prompt", 1, 8192, 1]),
        step(131.0, 2, 1),  # the drafter's graph and the target's (1, 8192, 1)
    ]
    known = [("prompt", 1, 8192, 1)]

    def run(target_gaps: int) -> DrafterCheck:
        hook = HookSpec(enabled=True)
        return check_drafter(
            events, hook, SPEC, RUN, 130.0, unwarmable=known, target_gaps=target_gaps
        )

    check = run(1)
    assert (check.probe, check.known_gaps, check.verified) == ([], known, True)
    unlogged = run(0)  # the engine logged no known gap: the target's compile is unwarmed
    assert unlogged.probe == [
        "1 graph compilation(s) outside the drafter in 1 probe step(s): target or sampler "
        "graphs the warmup did not compile"
    ]
    assert unlogged.verified is False


def test_the_burst_gate_attached_or_not_leaves_the_drafter_check_as_it_was() -> None:
    events = [*ATTACHED, drafter(101.0, ["decode", 2, 1, 8]), step(101.0, 1, 1)]
    alone = check_drafter(events, HookSpec(enabled=True), SPEC, RUN, 130.0)
    gate = [
        HookEvent("attached", 1, 9.0, {"targets": ["burst-gate"], "hold_s": 5.0}),
        not_attached(9.5, "burst-gate", "LookupError: queue"),
    ]
    both = check_drafter([*gate, *events], HookSpec(enabled=True), SPEC, RUN, 130.0)
    assert both.hook == alone.hook == "attached"
    assert both.to_json() == alone.to_json()
    only_gate = check_drafter(gate, HookSpec(enabled=True), SPEC, RUN, 130.0)
    assert only_gate.hook == "not-attached"  # the gate is not the compile hook


def test_without_an_attached_hook_nothing_is_verified() -> None:
    silent = check_drafter([], HookSpec(enabled=True), SPEC, RUN, 130.0)
    assert (silent.hook, silent.reason, silent.verified) == ("not-attached", NOT_LOADED, False)
    assert (silent.cause, silent.unverified) == ("plugin-not-loaded", 3)
    loaded = check_drafter(
        [HookEvent("loaded", 1, 1.0, {"gaudi": True})], HookSpec(enabled=True), SPEC, RUN, 130.0
    )
    assert (loaded.reason, loaded.cause, loaded.unverified) == (NO_RUNNER, "hook-not-attached", 3)
    moved = [not_attached(1.0, "step", "X.sample_tokens missing")]
    check = check_drafter(moved, HookSpec(enabled=True), SPEC, RUN, 130.0)
    assert check.line() == "drafter: not verified: X.sample_tokens missing"
    assert (check.cause, check.unverified) == ("hook-not-attached", 3)
    off = check_drafter(ATTACHED, HookSpec(), SPEC, RUN, 130.0)
    assert (off.hook, off.verified, off.line()) == (
        "off",
        None,
        "drafter: not checked (no compile hook)",
    )


def test_a_drafter_that_cannot_be_named_still_counts_step_compiles() -> None:
    events = [
        ATTACHED[0],
        not_attached(10.0, "drafter", "propose missing"),
        step(131.0, 2, 0),
    ]
    check = check_drafter(events, HookSpec(enabled=True), SPEC, RUN, 130.0)
    assert (check.hook, check.drafter_named) == ("attached", False)
    assert len(check.probe) == 1
    assert check.probe[0].startswith("2 graph compilation(s) outside the drafter")


def test_missing_evidence_names_its_cause_and_counts_every_planned_graph() -> None:
    """Issue 33: each way the hook cannot see leaves every planned graph without evidence, with
    the cause the operator names; only the hook's own view (attached, drafter named) counts."""
    metric = [
        *ATTACHED,
        drafter(101.0, ["decode", 2, 1, 8]),
        not_attached(102.0, "step", "graph_compilation metric failed: RuntimeError: x"),
    ]
    check = check_drafter(metric, HookSpec(enabled=True), SPEC, RUN, 130.0)
    assert (check.cause, check.unverified, check.verified) == ("metric-unreadable", 3, False)
    assert check.summary().detail == "graph_compilation metric failed: RuntimeError: x"
    renamed = [
        ATTACHED[0],
        not_attached(10.0, "drafter", "LookupError: hpu_eagle.HpuEagleProposer.propose"),
    ]
    check = check_drafter(renamed, HookSpec(enabled=True), SPEC, RUN, 130.0)
    assert (check.cause, check.unverified, check.verified) == ("proposer-not-found", 3, False)
    never = check_drafter([ATTACHED[0]], HookSpec(enabled=True), SPEC, RUN, 130.0)
    assert (never.cause, never.unverified) == ("proposer-not-found", 3)
    assert "HpuEagleProposer (the drafter module was never imported)" in never.reason


def test_evidence_from_another_source_counts_and_the_rest_stays_missing() -> None:
    """The design stays open for a direct drafter warmup (issue 33 item 1): its graphs count as
    evidence like the sweep's; a planned graph no source warmed is missing."""
    events = [*ATTACHED, drafter(101.0, ["decode", 2, 1, 8]), step(101.0, 1, 1)]
    check = check_drafter(events, HookSpec(enabled=True), SPEC, RUN, probe_began=130.0)
    assert check.missing == [("decode", 4, 1, 4), ("decode", 8, 1, 8)]
    check.add_evidence("direct", [("decode", 8, 1, 8), ("decode", 99, 1, 1)])
    assert check.missing == [("decode", 4, 1, 4)]
    assert check.driven == {("decode", 2, 1, 8), ("decode", 8, 1, 8)}
    assert (check.cause, check.unverified, check.verified) == ("shapes-missing", 1, False)
    assert check.to_json()["evidence"] == {"direct": 1, "engine-warmup": 0, "sweep": 1}
    check.add_evidence("direct", [("decode", 4, 1, 4)])
    assert (check.cause, check.unverified, check.verified) == ("", 0, True)


def test_a_shape_the_direct_warmup_failed_is_never_evidence_and_fails_closed() -> None:
    """Issue 33: warmed directly counts as evidence; a planned shape the engine plugin tried and
    failed leaves the run not verified, with its own cause, whatever the other sources saw."""
    events = [*ATTACHED, drafter(101.0, ["decode", 2, 1, 8]), step(101.0, 1, 1)]
    check = check_drafter(events, HookSpec(enabled=True), SPEC, RUN, probe_began=130.0)
    check.add_evidence(DIRECT, [("decode", 4, 1, 4), ("decode", 8, 1, 8)])
    assert (check.cause, check.unverified, check.verified) == ("", 0, True)
    check.direct_failed = 2
    assert (check.cause, check.unverified, check.verified) == ("direct-warmup-failed", 2, False)
    assert "2 failed in the direct warmup" in check.line()
    counts = DrafterCounts.from_json(check.summary().to_json())
    assert counts is not None
    assert (counts.cause, counts.unverified, counts.verified) == ("direct-warmup-failed", 2, False)


def test_every_shape_of_the_direct_warmup_set_needs_evidence() -> None:
    """Issue 33: a shape of the plan's drafter_warmup set that was neither warmed directly nor
    compiled or run in the sweep leaves the run not verified (direct-warmup-incomplete), counted
    and named; BestEffort's accept_missing does not accept it (only the sweep's missing ones)."""
    events = [*ATTACHED, drafter(101.0, ["decode", 2, 1, 8]), step(101.0, 1, 1)]
    check = check_drafter(events, HookSpec(enabled=True), SPEC, RUN, probe_began=130.0)
    check.add_evidence(DIRECT, [("decode", 4, 1, 4), ("decode", 8, 1, 8), ("decode", 1, 1, 1)])
    check.warmup_set = frozenset({("decode", 1, 1, 1), ("decode", 3, 1, 4), ("decode", 2, 1, 8)})
    assert check.incomplete == [("decode", 3, 1, 4)]
    assert (check.cause, check.unverified, check.verified) == ("direct-warmup-incomplete", 1, False)
    assert "direct warmup set: 2 of 3 shapes with evidence, 1 neither warmed directly" in (
        check.line()
    )
    assert check.to_json()["incomplete"] == [["decode", 3, 1, 4]]
    counts = DrafterCounts.from_json(check.summary().to_json())
    assert counts is not None
    assert (counts.cause, counts.unverified, counts.planned, counts.total) == (
        "direct-warmup-incomplete",
        1,
        5,
        5,
    )
    check.accepted = True
    assert check.verified is False
    check.add_evidence(DIRECT, [("decode", 3, 1, 4)])
    assert (check.cause, check.unverified, check.verified) == ("", 0, True)


def test_a_blind_hook_counts_the_direct_warmup_set_too() -> None:
    check = check_drafter([ATTACHED[0]], HookSpec(enabled=True), SPEC, RUN, 130.0)
    check.warmup_set = frozenset({("decode", 1, 1, 1), ("decode", 4, 1, 4)})
    assert (check.cause, check.unverified) == ("proposer-not-found", 4)
