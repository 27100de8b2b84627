"""The runner's verdict on golden real-format engine logs (tests/doubles/fixtures/engine_logs).

Each fixture is what vLLM v0.26.0 + vllm-gaudi (v0.26.0 and main print the same lines) writes to
stdout and stderr for one seed file and one logging set-up; the README there names the upstream
line of every format. The plan expects the lists warmgate.buckets computes from the same seeds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from runner_harness import CONFIG_A, make_plan

from warmgate.buckets import EngineShapeConfig, plan_buckets
from warmgate.contract.order import WarmupOrder, bucket_digest, parse_plan
from warmgate.warmup.engine.parse import EngineLog, LogParser
from warmgate.warmup.runner.outcomes import Outcome
from warmgate.warmup.runner.verdict import decide, early_mismatches, final_verdict, unwarmed_reasons

FIXTURES = Path(__file__).resolve().parents[1] / "doubles" / "fixtures" / "engine_logs"
CASES: dict[str, Any] = json.loads((FIXTURES / "cases.json").read_text())
UNWARMED = "Configuration: ('decode', 24, 1, 768) was not warmed-up!"
DROPPED = (
    "engine dropped 3 seed bucket(s) of the file: "
    "prompt (1, 4096, 0) (condition: bs * query <= max_num_batched_tokens); "
    "prompt (1, 128, 40) (condition: ctx <= ceil((max_model_len - 1) / block_size) and query "
    "<= max_model_len); decode (64, 1, 32) (condition: bs <= ctx,)"
)


def fixture_plan(tmp_path: Path, seeds: str) -> WarmupOrder:
    """The plan the operator writes for the fixture's seed file (config A limits, k=1)."""
    text = (FIXTURES / f"seeds-{seeds}.txt").read_text()
    config = EngineShapeConfig(
        **CONFIG_A, num_gpu_blocks=8192, num_speculative_tokens=1, bucket_file=text
    )
    planned = plan_buckets(config)
    lists = {
        "prompt": planned.prompt_buckets,
        "seed_decode": planned.seed_decode_buckets,
        "decode": planned.decode_buckets,
    }
    doc = make_plan(tmp_path, k=1)
    doc["buckets"] = {
        "seed_file_text": text,
        "expected": {n: {"count": len(v), "digest": bucket_digest(v)} for n, v in lists.items()},
    }
    return parse_plan(doc)


def parse_fixture(name: str, chunk: int = 509) -> EngineLog:
    """Feed both streams as the runner's reader threads do: chunks of each, interleaved."""
    out = (FIXTURES / f"{name}.stdout").read_text()
    err = (FIXTURES / f"{name}.stderr").read_text()
    parser = LogParser()
    for start in range(0, max(len(out), len(err)), chunk):
        parser.feed(out[start : start + chunk], "stdout")
        parser.feed(err[start : start + chunk], "stderr")
    parser.close()
    return parser.state


def outcome(tmp_path: Path, name: str) -> tuple[Outcome, str, EngineLog]:
    log = parse_fixture(name)
    plan = fixture_plan(tmp_path, CASES[name]["seeds"])
    result, reason = decide(final_verdict(plan, log), unwarmed_reasons(log))
    return result, reason, log


def test_every_fixture_has_a_verdict_test() -> None:
    tested = {
        "tp1-colour",
        "old-vllm-omitted",
        "tp1-omitted",
        "tp2-interleaved",
        "tp2-all-garbled",
        "user-prefix-debug",
        "level-warning",
        "configure-logging-0",
        "enforce-eager",
    }
    assert set(CASES) == tested


@pytest.mark.parametrize("name", ["tp1-colour", "tp2-interleaved"])
def test_clean_runs_verify(tmp_path: Path, name: str) -> None:
    result, reason, log = outcome(tmp_path, name)
    assert (result, reason) == (Outcome.VERIFIED, reason)
    assert set(log.lists) == {"prompt", "spec_decode", "decode"}
    assert log.kv_blocks == 8192
    assert log.captured == {"prompt": 3, "decode": 7}
    assert log.progress == {"prompt": (3, 3), "decode": (7, 7)}


def test_prefixed_and_coloured_lines_after_omitted_seeds_are_all_read(tmp_path: Path) -> None:
    # Defect 1: the coloured "(EngineCore_DP0 pid=N)" prefix of older vLLM after the omitted
    # header used to swallow every later line: lists, "Warmup finished", unwarmed lines.
    plan = fixture_plan(tmp_path, "bad")
    log = parse_fixture("old-vllm-omitted")
    assert set(log.lists) == {"prompt", "spec_decode", "decode"}
    assert log.warmup_finished
    assert [u.text for u in log.unwarmed] == ["('decode', 24, 1, 768)"]
    assert [(n.requested, n.added) for n in log.not_prepared] == [("(24, 1, 800)", "(24, 1, 896)")]
    assert early_mismatches(plan, log) == [DROPPED]  # the early abort fires on the seeds
    result, reason = decide(final_verdict(plan, log), unwarmed_reasons(log))
    assert (result, reason) == (Outcome.PLAN_MISMATCH, DROPPED)


@pytest.mark.parametrize("name", ["tp1-omitted", "user-prefix-debug"])
def test_dropped_seeds_are_named_with_the_filter_that_dropped_them(
    tmp_path: Path, name: str
) -> None:
    # Defect 2: one WARNING record per dropped seed, a 5-tuple, never a [...] list.
    result, reason, log = outcome(tmp_path, name)
    assert (result, reason) == (Outcome.PLAN_MISMATCH, DROPPED)
    assert [(s.phase, s.bucket) for s in log.omitted] == [
        ("prompt", (1, 4096, 0)),
        ("prompt", (1, 128, 40)),
        ("decode", (64, 1, 32)),
    ]
    assert set(log.lists) == {"prompt", "spec_decode", "decode"}  # lists still read and checked
    checks = final_verdict(fixture_plan(tmp_path, "bad"), log).checks
    assert all(c.match for c in checks)


def test_one_garbled_tp_copy_is_noise_not_a_verdict(tmp_path: Path) -> None:
    # Defect 3: rank 0's decode line was cut by rank 1's prefix; rank 1's copy is whole.
    plan = fixture_plan(tmp_path, "good")
    log = parse_fixture("tp2-interleaved")
    assert early_mismatches(plan, log) == []
    # Rank 1's prompt line starts "(Worker_TP1 ...) (Worker_TP0 ...) ": rank 0's prefix write
    # landed behind rank 1's, so both copies name rank 0; they agree, which is what counts.
    assert sorted(log.copies["prompt"].clean) == ["Worker_TP0 pid=300"]
    assert log.list_fragments == 1  # the tail of rank 0's cut line


def test_every_tp_copy_garbled_is_unreadable_and_retryable(tmp_path: Path) -> None:
    plan = fixture_plan(tmp_path, "good")
    log = parse_fixture("tp2-all-garbled")
    assert early_mismatches(plan, log) == []
    result, reason, _ = outcome(tmp_path, "tp2-all-garbled")
    assert result is Outcome.LOG_UNREADABLE
    assert reason.startswith("no readable copy of the decode bucket list")


@pytest.mark.parametrize("name", ["level-warning", "configure-logging-0"])
def test_logging_settings_that_hide_info_lines_never_verify(tmp_path: Path, name: str) -> None:
    # Defect 4, if the runner's settings did not reach the engine: only WARNING lines remain.
    result, reason, log = outcome(tmp_path, name)
    assert result is Outcome.PLAN_MISMATCH
    assert reason.startswith("engine never logged its decode bucket list (the log holds no INFO")
    assert [u.text for u in log.unwarmed] == ["('decode', 24, 1, 768)"]
    assert unwarmed_reasons(log)[0] == UNWARMED


def test_enforce_eager_warmup_without_graphs_is_a_mismatch(tmp_path: Path) -> None:
    result, reason, log = outcome(tmp_path, "enforce-eager")
    assert log.warmup_finished
    assert (result, reason) == (
        Outcome.PLAN_MISMATCH,
        "engine finished warmup without a 'Graph/... captured' line: --enforce-eager makes the "
        "engine skip graph warmup",
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_feeding_whole_streams_or_single_characters_agrees(name: str) -> None:
    whole = parse_fixture(name, chunk=1 << 30)
    assert parse_fixture(name, chunk=1) == whole
