"""The termination summary as one type for both sides: what the runner writes is what the
operator reads, and anything else reads as absent (issue 22 item 2)."""

from __future__ import annotations

import json

import pytest

from warmgate.contract.summary import (
    SUMMARY_LIMIT,
    SUMMARY_VERSION,
    DrafterCounts,
    EngineKind,
    TerminationSummary,
)

FULL = TerminationSummary(
    outcome="verified",
    reason="every planned bucket warmed",
    code=0,
    plan_hash="sha256:" + "1" * 64,
    key="gaudi2-tp1-abc",
    unwarmed=("Configuration: ('decode', 4, 1, 128) was not warmed-up!",),
    known_gaps=("Configuration: ('prompt', 1, 8192, 1) was not warmed-up!",),
    mismatches=("decode buckets: engine generated 3",),
    unreadable=("prompt",),
    kv_blocks=4321,
    cache="published",
    report="/cache/reports/gaudi2-tp1-abc.json",
    drafter=DrafterCounts("attached", True, expected=9, driven=9, missing=0, probe=0, gaps=1),
    engine=EngineKind("cpu", "0.32.0", "cpu"),
)


def test_what_the_runner_writes_the_operator_reads_back_whole() -> None:
    text = FULL.to_json()
    back = TerminationSummary.from_json(text)
    assert back == TerminationSummary(
        **{**FULL.__dict__, "unwarmed_count": 1, "known_gaps_count": 1}
    )
    doc = json.loads(text)
    assert (doc["v"], doc["outcome"], doc["code"]) == (SUMMARY_VERSION, "verified", 0)
    assert "truncated" not in doc


def test_a_long_summary_keeps_its_counts_and_says_it_was_cut() -> None:
    lines = tuple(f"Configuration: ('decode', {i}, 1, 128) was not warmed-up!" for i in range(900))
    text = TerminationSummary("unwarmed_shapes", "x" * 5000, code=3, unwarmed=lines).to_json()
    assert len(text.encode()) <= SUMMARY_LIMIT
    back = TerminationSummary.from_json(text)
    assert back is not None
    assert (back.unwarmed_count, back.truncated, len(back.reason)) == (900, True, 1000)
    assert 0 < len(back.unwarmed) <= 40
    assert back.unwarmed[0] == lines[0]


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '{"code": 0}', '{"outcome": 3}'])
def test_anything_but_the_runners_json_object_is_no_summary(text: str) -> None:
    assert TerminationSummary.from_json(text) is None


def test_fields_of_the_wrong_type_read_as_absent_never_as_a_pass() -> None:
    odd = {
        "outcome": "verified",
        "code": True,
        "key": 7,
        "unwarmed": "not a list",
        "kv_blocks": "9",
        "drafter": {"hook": "attached", "verified": "yes", "expected": -1, "driven": 2.5},
        "engine": {"kind": "tpu", "vllm": 32},
        "truncated": "yes",
        "v": "6",
    }
    read = TerminationSummary.from_json(json.dumps(odd))
    assert read is not None
    assert (read.code, read.key, read.unwarmed, read.kv_blocks) == (None, None, (), None)
    assert read.drafter == DrafterCounts("attached", None, expected=0, driven=0)
    assert read.engine == EngineKind(None, None, None)
    assert (read.truncated, read.version) == (False, 0)


def test_the_drafters_missing_evidence_travels_whole_and_an_odd_cause_reads_unknown() -> None:
    """Issue 33: unverified, cause and detail (capped) reach the operator; a verified drafter
    writes none of them (its counts stay as before)."""
    blind = DrafterCounts(
        "not-attached",
        False,
        expected=77,
        unverified=77,
        cause="metric-unreadable",
        detail="graph_compilation metric failed: " + "x" * 300,
    )
    doc = json.loads(TerminationSummary("drafter_unverified", drafter=blind).to_json())
    assert (doc["drafter"]["unverified"], doc["drafter"]["cause"]) == (77, "metric-unreadable")
    back = TerminationSummary.from_json(json.dumps(doc))
    assert back is not None
    assert back.drafter is not None
    assert back.drafter == DrafterCounts(**{**blind.__dict__, "detail": blind.detail[:200]})
    assert "cause" not in json.loads(FULL.to_json())["drafter"]
    doc["drafter"]["cause"] = "made-up"
    odd = TerminationSummary.from_json(json.dumps(doc))
    assert odd is not None
    assert odd.drafter is not None
    assert odd.drafter.cause == "unknown"
