"""The demo prints whole sentences: wrapped or shortened at word boundaries, never mid-word,
and each example's summary leads with what was proved, then warmed, then what serves."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from warmgate.cli.demo_text import (
    WIDTH,
    clauses,
    example_summary,
    headline,
    phase_message,
    shorten,
    wrap,
)

# The message the issue saw cut as "drafter: 98 of 98 plann".
WARMED = (
    "The engine warmed every planned bucket and logged no unwarmed shape (Job "
    "llama31-8b-eagle3-warmup-0f3c2a); KV blocks 8192; drafter: 98 of 98 planned graphs "
    "compiled in the sweep, none in the probe"
)
words = st.text(alphabet="abcdefghij,;:()-=", min_size=1, max_size=14)


def _condition(type_: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {"type": type_, "status": status, "reason": reason, "message": message}


def sdd() -> dict[str, Any]:
    return {
        "metadata": {"name": "llama31-8b-eagle3"},
        "status": {
            "phase": "Ready",
            # in the status' own order (BucketsPlanned, CoverageProven, Warmed, Ready)
            "conditions": [
                _condition("BucketsPlanned", "True", "Planned", "8 prompt and 32 decode buckets"),
                _condition("CoverageProven", "True", "CoverageComplete", "all 1,234 states"),
                _condition("Warmed", "True", "WarmupSucceeded", WARMED),
                _condition("Ready", "True", "ReplicasReady", "1/1 replicas ready on plan sha"),
            ],
        },
    }


@given(st.lists(words, min_size=1, max_size=60), st.integers(min_value=20, max_value=120))
def test_wrapping_keeps_every_word_whole_and_every_line_in_width(
    parts: list[str], width: int
) -> None:
    text = " ".join(parts)
    first, indent = "     x: ", "        "
    lines = wrap(text, first, indent, width=width)
    assert " ".join(" ".join(lines).split()[1:]) == text  # same words, in order, none cut
    bodies = [lines[0][len(first) :], *(line[len(indent) :] for line in lines[1:])]
    # only a single word longer than the width may stand alone past it
    assert all(len(line) <= width for line, body in zip(lines, bodies, strict=True) if " " in body)


@given(st.lists(words, min_size=1, max_size=60), st.integers(min_value=12, max_value=120))
def test_shortening_cuts_at_a_word_boundary(parts: list[str], width: int) -> None:
    text = " ".join(parts)
    short = shorten(text, width)
    assert len(short) <= width
    kept = short.removesuffix("...").split()  # "..." alone: not even the first word fits
    assert kept == text.split()[: len(kept)]


def test_an_example_leads_with_proved_then_warmed_then_serving_whole() -> None:
    lines = example_summary(sdd(), 41.6)
    assert lines[0] == "   llama31-8b-eagle3: Ready after 42 s"
    leads = [line.split()[0] for line in lines[1:] if not line.startswith("          ")]
    assert leads == ["proved:", "warmed:", "serving:"]
    at = lines.index("     warmed:  Warmed=True (WarmupSucceeded)")
    assert lines[at + 1].startswith("              - The engine warmed every planned bucket")
    assert (
        "              - drafter: 98 of 98 planned graphs compiled in the sweep, none in the "
        "probe" in lines
    )
    said = " ".join(" ".join(lines).split())
    assert "drafter: 98 of 98 planned graphs compiled in the sweep, none in the probe" in said
    assert all(len(line) <= WIDTH for line in lines)


def test_the_headline_counts_ready_examples_and_names_the_stand_in() -> None:
    text = " ".join(headline({"a": "Ready", "b": "Ready", "c": "Failed"}, 72.4))
    assert text.startswith("== Result: 2 of 3 examples Ready in 72 s.")
    assert "stand-in" in text


# The eagle3 example's CoverageProven message as the operator wrote it on the local cluster.
PROVED = (
    "target: Completed the plan with 42 extra buckets; 1 of 1,835,072 reachable states in 1 "
    "shape(s) compile at runtime whatever the plan, e.g. ('prompt', 1, 8192, 1) for prompt "
    "state (1, 8190, 1): the engine's warmup dummy of any bucket serving it runs another bucket "
    "(its context is cut to 0 blocks to fit maxModelLen and its requests are 2 tokens short, "
    "left for the draft model); an engine limit: with a draft model, "
    "spec.speculative.numSpeculativeTokens=1 leaves none at the top query row (docs/coverage.md, "
    "'Buckets the warmup never compiles'); the warmup reports these shapes as known gaps; "
    "drafter: 180 shapes the engine compiles at runtime, 98 driven by the warmup sweep (63 "
    "steps, 112 s-9 min); warmup 107 s-6 min for 224 graphs, 8.03B parameters (known model)"
)


def test_a_message_splits_into_its_clauses_and_never_inside_parentheses() -> None:
    parts = clauses(PROVED)
    assert "; ".join(parts) == PROVED
    assert parts[0] == "target: Completed the plan with 42 extra buckets"
    assert parts[-2].startswith("drafter: 180 shapes")
    assert all(p.count("(") == p.count(")") for p in parts)
    assert clauses("(a; b); c") == ["(a; b)", "c"]


@pytest.mark.parametrize(
    ("phase", "said"),
    [("Pending", "waits"), ("Warming", "warming the plan"), ("Starting", "Rolling out")],
)
def test_a_phase_change_shows_what_that_phase_is_doing(phase: str, said: str) -> None:
    status = {
        "phase": phase,
        "conditions": [
            _condition("Warmed", "False", "WarmupRunning", f"Job w {said} ..."),
            _condition("Ready", "False", "WarmupPending", "Serving waits for a verified warmup"),
        ],
    }
    if phase == "Starting":
        status["conditions"][1]["message"] = "Rolling out: 0/1 updated to plan abc"
    assert said in phase_message(status)


def test_a_served_plans_record_still_shows_what_the_runner_verified() -> None:
    """Once serving, the Warmed message of the plan's record names only the Job; the summary
    adds what status.warmup keeps: buckets, time, KV blocks and the drafter sweep."""
    obj = sdd()
    obj["status"]["conditions"][2]["message"] = (
        "Verified by w-1: the plan serving now (its record r)"
    )
    obj["status"]["warmup"] = {
        "warmedBuckets": 224,
        "durationSeconds": 153,
        "kvBlocks": 8192,
        "drafterDriven": 98,
        "drafterVerified": True,
    }
    obj["status"]["plan"] = {"drafterSwept": 98}
    said = " ".join(" ".join(example_summary(obj, None)).split())
    assert "- 224 buckets warmed in 153 s - KV blocks 8192 - drafter: 98 of 98 planned" in said
    assert "compiled in the sweep, none in the probe after it serving:" in said


def test_facts_the_runners_message_already_says_are_not_repeated() -> None:
    obj = sdd()
    obj["status"]["warmup"] = {"kvBlocks": 8192, "drafterDriven": 98, "drafterVerified": True}
    said = " ".join(example_summary(obj, None))
    assert said.count("KV blocks") == 1
    assert said.count("drafter:") == 1
