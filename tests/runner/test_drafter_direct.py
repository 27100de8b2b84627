"""The direct drafter warmup (issue 33): the plan's document, the plugin's lines and loop, the
runner's counts and the termination summary that carries them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.resource_cases import EXAMPLES, make_case

from warmgate.buckets.cost import estimate_direct_warmup
from warmgate.buckets.drafter.graphs import prove_drafter
from warmgate.buckets.drafter.sweep import plan_sweep
from warmgate.contract.drafterwarm import (
    DRAFTER_WARMUP_ENV,
    DRAFTER_WARMUP_FORMAT,
    DRAFTER_WARMUP_SWITCH,
    make_spec,
    read_drafter_warmup,
)
from warmgate.contract.order import PlanError, parse_plan
from warmgate.contract.summary import DirectWarmupCounts, TerminationSummary
from warmgate.contract.sweepplan import Graph
from warmgate.reconcile.planning.drafter_plan import sweep_budget
from warmgate.reconcile.planning.evaluate import evaluate
from warmgate.warmup.hook import drafter_warm
from warmgate.warmup.hook.lines import HookEvent, format_hook_line, parse_hook_line
from warmgate.warmup.runner.direct_check import check_direct

EAGLE3 = next(p for p in EXAMPLES if p.stem == "llama31-8b-eagle3-gaudi2")
SHAPES: list[Graph] = [("decode", 4, 1, 16), ("decode", 1, 1, 1), ("prompt", 1, 128, 0)]


def _events(lines: list[str]) -> list[HookEvent]:
    return [e for line in lines if (e := parse_hook_line(line)) is not None]


def test_the_plan_carries_every_shape_prove_drafter_lists() -> None:
    """The eagle3 example: the whole set (330 = 293 the engine compiles at runtime + 37 its own
    warmup builds), partial-draft shapes included, each in the engine's form, versioned, but
    the one engine limit: a target prompt shape (drafter_plan.DIRECT_LIMIT), 329 in all."""
    case = make_case(EAGLE3)
    doc = case.children().runner_plan["drafter_warmup"]
    assert doc["format"] == DRAFTER_WARMUP_FORMAT == "warmgate-drafter-warmup/1"
    assert (doc["method"], doc["k"], doc["block_size"]) == ("eagle3", 2, 128)
    evaluation = case.to_run.drafter_warmup
    assert evaluation is not None
    shapes = {tuple(s) for s in doc["shapes"]}
    config = case.plan.config
    assert config.max_model_len == doc["max_model_len"]
    spec_report = prove_drafter(case.plan, "eagle3", partial_drafts=True, structured_outputs=True)
    limits = {s.engine_config for s in spec_report.unwarmed if s.phase == "prompt"}
    assert len(limits) == 1
    assert shapes == {s.engine_config for s in spec_report.shapes} - limits
    assert len(shapes) == 329
    assert len(spec_report.unwarmed) == 293
    partial = {s.engine_config for s in spec_report.shapes if not s.full_drafts}
    assert partial
    assert partial <= shapes
    assert parse_plan(case.children().runner_plan).drafter_warmup == evaluation


def test_plans_without_a_modelled_drafter_carry_no_document() -> None:
    for path in EXAMPLES:
        doc = make_case(path).children().runner_plan
        assert ("drafter_warmup" in doc) == ("drafter_sweep" in doc), path.stem


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"format": "warmgate-drafter-warmup/2"}, "format"),
        ({"method": "ngram"}, "method"),
        ({"shapes": [["decode", 0, 1, 1]]}, "shapes"),
        ({"shapes": [["decode", 1, 1, 1], ["decode", 1, 1, 1]]}, "each shape once"),
        ({"extra": 1}, "extra: unknown field"),
    ],
)
def test_a_document_the_plugin_cannot_trust_is_refused(
    change: dict[str, Any], problem: str
) -> None:
    doc = {**make_spec("eagle", 2, 128, 4096, SHAPES).to_json(), **change}
    with pytest.raises(PlanError, match=problem):
        read_drafter_warmup(doc)


def test_the_runner_writes_the_engine_side_document(tmp_path: Path) -> None:
    spec = make_spec("eagle3", 3, 128, 4096, [*SHAPES, SHAPES[0]])
    assert spec.shapes == tuple(sorted(set(SHAPES)))
    path = spec.write(tmp_path)
    assert read_drafter_warmup(json.loads(path.read_text())) == spec


def test_hook_lines_of_the_direct_warmup_round_trip() -> None:
    ran = [["decode", 4, 1, 16], ["decode", 1, 1, 1]]
    line = format_hook_line("drafter-warm", 7, 1.5, graph=list(SHAPES[0]), ok=True, s=0.2, ran=ran)
    event = parse_hook_line("(Worker pid=7) " + line)
    assert event is not None
    assert (event.kind, event.fields["ran"], event.fields["ok"]) == ("drafter-warm", ran, True)
    line = format_hook_line("drafter-warmup", 7, 2.0, state="done", planned=3, warmed=3, failed=0)
    closing = parse_hook_line(line)
    assert closing is not None
    assert closing.kind == "drafter-warmup"


def _run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, warm: Any, env: dict[str, str] | None = None
) -> tuple[Any, list[HookEvent]]:
    lines: list[str] = []

    def emit(kind: str, **fields: Any) -> None:
        lines.append(format_hook_line(kind, 7, 1.0, **fields))

    path = make_spec("eagle", 2, 128, 4096, SHAPES).write(tmp_path)
    monkeypatch.setenv(DRAFTER_WARMUP_ENV, str(path))
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    spec = drafter_warm.start("cpu", emit)
    outcome = drafter_warm.run("cpu", emit, warm, spec) if spec is not None else None
    return outcome, _events(lines)


def test_every_shape_gets_a_line_and_one_failure_is_that_shapes_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def warm(shape: Graph) -> tuple[bool, str, dict[str, Any]]:
        if shape == ("decode", 4, 1, 16):
            raise RuntimeError("prepare_attn_metadata: assert")
        return True, "", {"ran": [shape[1] * shape[2]]}

    outcome, events = _run(monkeypatch, tmp_path, warm)
    per_shape = [e for e in events if e.kind == "drafter-warm"]
    assert [tuple(e.fields["graph"]) for e in per_shape] == sorted(SHAPES)
    assert (outcome.warmed, outcome.failed) == (2, 1)
    closing = events[-1]
    assert closing.kind == "drafter-warmup"
    assert (closing.fields["state"], closing.fields["planned"], closing.fields["failed"]) == (
        "done",
        3,
        1,
    )
    check = check_direct(events, make_spec("eagle", 2, 128, 4096, SHAPES))
    assert check.failed == {("decode", 4, 1, 16): "RuntimeError: prepare_attn_metadata: assert"}
    assert len(check.warmed) == 2
    assert check.missing == []


def test_the_switch_and_an_unreadable_document_end_with_a_closing_line_that_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    outcome, events = _run(monkeypatch, tmp_path, None, {DRAFTER_WARMUP_SWITCH: "0"})
    assert outcome is None
    assert [(e.kind, e.fields["state"]) for e in events] == [("drafter-warmup", "off")]
    lines: list[str] = []
    monkeypatch.setenv(DRAFTER_WARMUP_ENV, str(tmp_path / "absent.json"))
    monkeypatch.delenv(DRAFTER_WARMUP_SWITCH)
    drafter_warm.start("gaudi", lambda kind, **f: lines.append(format_hook_line(kind, 1, 1, **f)))
    assert [e.fields["state"] for e in _events(lines)] == ["unreadable"]


def test_a_whole_warmup_failure_is_a_closing_line_never_the_engines(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    lines: list[str] = []

    def broken(*args: Any, emit: Any) -> None:
        raise AttributeError("'HPUModelRunner' object has no attribute 'drafter'")

    drafter_warm.guarded(
        "gaudi", lambda kind, **f: lines.append(format_hook_line(kind, 1, 1, **f)), broken
    )
    (event,) = _events(lines)
    assert (event.kind, event.fields["state"]) == ("drafter-warmup", "error")
    assert "no attribute 'drafter'" in event.fields["reason"]


def test_counts_need_every_process_and_name_what_is_missing() -> None:
    """Two engine processes (TP ranks): a shape one of them never logged is missing, not
    warmed; no line at all leaves every shape missing and the state absent."""
    spec = make_spec("eagle", 2, 128, 4096, SHAPES)
    lines = [
        format_hook_line("drafter-warm", pid, 1.0, graph=list(g), ok=True)
        for pid in (1, 2)
        for g in SHAPES
        if (pid, g) != (2, SHAPES[1])
    ]
    lines += [
        format_hook_line("drafter-warmup", pid, 2.0, state="done", engine="gaudi", seconds=s)
        for pid, s in ((1, 3.5), (2, 4.0))
    ]
    check = check_direct(_events(lines), spec)
    assert check.missing == [SHAPES[1]]
    assert (len(check.warmed), check.seconds, check.state) == (2, 4.0, "done")
    counts = check.counts()
    assert not counts.complete
    assert counts.not_warmed == ("(decode, 1, 1, 1): no line",)
    nothing = check_direct([], spec).counts()
    assert (nothing.state, nothing.missing, nothing.warmed) == ("absent", 3, 0)
    assert not nothing.complete


def test_the_summary_carries_the_counts_and_fits_with_many_failures() -> None:
    shapes = [("decode", b, 1, c) for b in range(1, 40) for c in range(1, 20)]
    spec = make_spec("eagle3", 3, 128, 4096, shapes)
    reason = "RuntimeError: " + "x" * 400
    lines = [
        format_hook_line("drafter-warm", 1, 1.0, graph=list(g), ok=False, reason=reason)
        for g in shapes
    ]
    lines.append(format_hook_line("drafter-warmup", 1, 2.0, state="done", engine="gaudi"))
    counts = check_direct(_events(lines), spec).counts()
    text = TerminationSummary(outcome="verified", drafter_warmup=counts).to_json()
    assert len(text) <= 4096
    back = TerminationSummary.from_json(text)
    assert back is not None
    assert back.drafter_warmup == counts
    assert (counts.planned, counts.failed, counts.warmed) == (len(shapes), len(shapes), 0)
    done = [format_hook_line("drafter-warm", 1, 1.0, graph=list(g), ok=True) for g in shapes]
    done.append(format_hook_line("drafter-warmup", 1, 2.0, state="done", engine="gaudi"))
    complete = check_direct(_events(done), spec).counts()
    assert complete.complete
    assert complete.warmed_digest == complete.planned_digest
    assert DirectWarmupCounts.from_json({"state": 3}) is None


def test_the_cpu_form_of_a_shape_is_its_token_counts() -> None:
    assert drafter_warm.cpu_form(("decode", 16, 1, 48), max_num_seqs=4) == (16, 4)
    assert drafter_warm.cpu_form(("prompt", 1, 97, 0), max_num_seqs=4) == (97, 1)
    shapes = drafter_warm.cpu_shape_set(256, 4)
    firsts = {drafter_warm.cpu_form(s, 4)[0] for s in shapes}
    nexts = {drafter_warm.cpu_form(s, 4)[1] for s in shapes}
    assert (firsts, nexts) == (set(range(1, 257)), {1, 2, 3, 4})


def test_the_eagle3_example_is_warmed_whole_in_a_third_of_the_sweeps_estimate() -> None:
    """Issue 33's goal, in the cost model's figures (estimates, never run on Gaudi): 292 of the
    293 drafter shapes the engine would compile at runtime are in the document (329 with the 37
    its warmup builds; the other one is the engine limit, a target prompt shape), and the direct
    warmup's high estimate is at most a third of the sweep's."""
    case = make_case(EAGLE3)
    spec = case.to_run.drafter_warmup
    assert spec is not None
    report = prove_drafter(case.plan, "eagle3", partial_drafts=True, structured_outputs=True)
    unwarmed = {s.engine_config for s in report.unwarmed}
    assert len(unwarmed) == 293
    limits = unwarmed - set(spec.shapes)  # the engine limit: a target prompt shape
    assert len(limits) == 1
    assert all(g[0] == "prompt" for g in limits)
    warmed = [s.engine_config for s in report.shapes if s.warmed]
    evaluation = evaluate(case.sdd).evaluation
    assert evaluation is not None
    low, high = estimate_direct_warmup(spec.shapes, warmed, model=evaluation.model)
    # the sweep it replaces: the whole sweep the attempt's budget allowed (the plan's own sweep
    # is now its sample, drafter_plan.SAMPLE_BUDGET_S)
    budget = sweep_budget(case.sdd.spec.warmup.timeout_seconds)
    full = plan_sweep(case.plan, report, budget_s=budget, model=evaluation.model)
    assert high <= full.seconds[1] / 3
    assert low < full.seconds[0]
    sample = case.to_run.drafter_sweep
    assert sample is not None
    assert len(sample.steps) < len(full.spec.steps)


def test_warmgate_plan_says_the_plugin_warms_every_shape(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from warmgate.cli import main

    assert main(["plan", str(EAGLE3), "--top", "0"]) == 0
    out = capsys.readouterr().out
    assert "the engine plugin warms 329 of 330 directly before /health (issue 33), estimated" in out
    assert "the warmup sweep sample drives" in out
    assert "outside the sample (warmed directly)" in out
    assert "1 left to runtime by an engine limit: a target prompt shape" in out


def test_a_prompt_shape_tries_the_dummy_forms_the_engine_warmup_uses() -> None:
    """Where the context fits, q + k tokens (the dummy takes k off again); where the dummy must
    cut its context to fit max_model_len, the bucket's own q first, as the engine's warmup
    passes it (the stand-in run found (prompt, 1, 896, 15) at max_model_len 2048 reachable only
    so); a bucket at max_model_len caps q + k there."""
    assert drafter_warm.prompt_forms(("prompt", 1, 256, 2), 2, 2048, 128) == [258, 256]
    assert drafter_warm.prompt_forms(("prompt", 1, 896, 15), 2, 2048, 128) == [896, 898]
    assert drafter_warm.prompt_forms(("prompt", 1, 8192, 0), 2, 8192, 128) == [8192]
    with pytest.raises(ValueError, match="no prefill"):
        drafter_warm.prompt_forms(("prompt", 1, 1, 0), 2, 2, 128)
