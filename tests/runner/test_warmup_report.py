"""Report, termination summary (<= 4 KiB), progress lines and the verdict on logged lists."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from runner_harness import expected_lists, make_plan
from support.engines import CONFIG_A

from warmgate.buckets import EngineShapeConfig, plan_buckets
from warmgate.contract.order import parse_plan
from warmgate.contract.summary import SUMMARY_LIMIT
from warmgate.warmup.engine.parse import EngineLog
from warmgate.warmup.runner.outcomes import Outcome
from warmgate.warmup.runner.report import (
    Progress,
    RunRecord,
    build_report,
    summary,
    write_report,
)
from warmgate.warmup.runner.verdict import early_mismatches, final_verdict


def config_a_lists(k: int) -> dict[str, Any]:
    config = EngineShapeConfig(**CONFIG_A, num_gpu_blocks=8192, num_speculative_tokens=k)
    return {"plan": plan_buckets(config)}


def logged(k: int) -> EngineLog:
    """What vllm-gaudi logs (common.py): the spec line holds only the added buckets, the decode
    line the whole expanded list."""
    plan = config_a_lists(k)["plan"]
    log = EngineLog(kv_blocks_seen={8192}, warmup_secs=1.0)
    log.captured = {"prompt": len(plan.prompt_buckets), "decode": len(plan.decode_buckets)}
    log.add_list("prompt", plan.prompt_buckets)
    log.add_list("decode", plan.decode_buckets)
    if k:
        seeds = set(plan.seed_decode_buckets)
        log.add_list("spec_decode", [b for b in plan.decode_buckets if b not in seeds])
    return log


def test_verdict_accepts_matching_lists(tmp_path: Path) -> None:
    plan = parse_plan(make_plan(tmp_path, k=1))
    log = logged(1)
    assert len(log.lists["spec_decode"]) == 62  # §6: config A, k=1 adds 62 buckets
    verdict = final_verdict(plan, log)
    assert verdict.mismatches == []
    assert {c.name: c.match for c in verdict.checks} == {
        "decode": True,
        "prompt": True,
        "seed_decode": True,
    }
    seed = next(c for c in verdict.checks if c.name == "seed_decode")
    assert (seed.observed_count, seed.note.split(":")[0]) == (43, "derived")


def test_spec_line_holding_the_whole_list_fails_the_seed_check(tmp_path: Path) -> None:
    plan = parse_plan(make_plan(tmp_path, k=1))
    log = logged(1)
    log.add_list("spec_decode", list(log.lists["decode"]))
    (reason,) = early_mismatches(plan, log)
    assert reason.startswith("seed_decode buckets: engine generated 0 ")


def test_verdict_without_spec_decode_compares_plain_decode(tmp_path: Path) -> None:
    plan_doc = make_plan(tmp_path, k=0)
    _seed_text, expected = expected_lists(0)
    assert expected["seed_decode"] == expected["decode"]
    assert final_verdict(parse_plan(plan_doc), logged(0)).mismatches == []


def test_missing_lines_are_mismatches_only_at_the_end(tmp_path: Path) -> None:
    plan = parse_plan(make_plan(tmp_path, k=1))
    empty = EngineLog(info_records=12)
    assert early_mismatches(plan, empty) == []
    final = final_verdict(plan, empty).mismatches
    assert "engine never logged its prompt bucket list" in final
    assert "engine never logged 'Warmup finished in N secs'" in final
    silent = final_verdict(plan, EngineLog()).mismatches  # not even one INFO record
    assert silent[0].startswith("engine never logged its decode bucket list (the log holds no")


def test_graph_warmup_skipped_and_kv_counts_differing_are_mismatches(tmp_path: Path) -> None:
    plan = parse_plan(make_plan(tmp_path, k=1))
    log = logged(1)
    log.captured = {}
    log.kv_blocks_seen = {8192, 8000}
    assert final_verdict(plan, log).mismatches == [
        "KV blocks: engine has 8000, plan pins 8192",
        "engine processes reported different usable KV block counts: 8000, 8192",
        "engine finished warmup without a 'Graph/... captured' line: --enforce-eager makes the "
        "engine skip graph warmup",
    ]


def test_seed_file_expanded_twice_is_a_mismatch(tmp_path: Path) -> None:
    plan = parse_plan(make_plan(tmp_path, k=1))
    log = logged(1)
    # A seed file that was already expanded gets expanded again (§2.6): extra bs-256 rows.
    log.add_list("spec_decode", [*log.lists["spec_decode"], (256, 1, 4096)])
    log.add_list("decode", sorted([*log.lists["decode"], (256, 1, 4096)]))
    (reason,) = early_mismatches(plan, log)
    assert reason.startswith("decode buckets: engine generated 106 with digest sha256:")


def record(unwarmed: int, reason: str = "r") -> RunRecord:
    template = "Configuration: ('decode', {}, 1, {}) was not warmed-up!"
    lines = [template.format(i, i * 64) for i in range(1, unwarmed + 1)]
    return RunRecord(
        plan_id="p",
        plan_hash="sha256:" + "0" * 64,
        cache_key="config-a",
        outcome=Outcome.UNWARMED_SHAPES,
        reason=reason,
        unwarmed=lines,
        log=EngineLog(),
    )


def test_summary_fits_the_termination_message_limit() -> None:
    text = summary(record(5000, reason="x" * 10_000), Path("/cache/reports/config-a.json"))
    doc = json.loads(text)
    assert len(text.encode()) <= SUMMARY_LIMIT
    assert (doc["outcome"], doc["code"], doc["unwarmed_count"]) == ("unwarmed_shapes", 3, 5000)
    assert doc["truncated"] is True
    assert doc["unwarmed"][0] == "Configuration: ('decode', 1, 1, 64) was not warmed-up!"


def test_small_summary_is_complete() -> None:
    doc = json.loads(summary(record(2), None))
    assert "truncated" not in doc
    assert len(doc["unwarmed"]) == 2


def test_report_is_versioned_and_written_whole(tmp_path: Path) -> None:
    rec = record(1)
    path = write_report(build_report(rec), tmp_path / "reports", "config-a")
    doc = json.loads(path.read_text())
    assert (doc["report_version"], doc["outcome"], doc["exit_code"]) == (7, "unwarmed_shapes", 3)
    assert doc["digest_algorithm"] == "sha256-canonical-json-v1"
    assert [p.name for p in (tmp_path / "reports").iterdir()] == ["config-a.json"]


def test_progress_lines_are_throttled_to_whole_percent() -> None:
    out = io.StringIO()
    progress = Progress(out)
    for done in range(1, 1001):
        progress.count("decode", done, 1000)
    progress.stage("probe")
    lines = out.getvalue().splitlines()
    assert lines[0] == "warmgate-progress decode 1/1000"
    assert lines[-2:] == ["warmgate-progress decode 1000/1000", "warmgate-progress stage probe"]
    assert len(lines) == 102  # 0 %, 1 %, ... 100 % and the stage line
