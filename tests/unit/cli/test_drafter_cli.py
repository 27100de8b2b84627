"""``warmgate plan``'s drafter lines and JSON (issue 16): the drafter's graphs and their sweep."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from warmgate.buckets import EngineShapeConfig, plan_buckets
from warmgate.buckets.completion.choose import complete_choice
from warmgate.buckets.drafter.graphs import prove_drafter
from warmgate.buckets.drafter.sweep import SWEEP_FORMAT
from warmgate.cli import main

EXAMPLES = Path(__file__).parents[3] / "examples"
ISSUE = [
    "--max-num-seqs=8",
    "--max-model-len=4096",
    "--max-num-batched-tokens=2048",
    "-k",
    "3",
]


def test_table_has_a_drafter_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", *ISSUE, "--method", "eagle3", "--top", "0", "--no-complete"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("drafter")]
    assert lines == [
        "drafter    eagle3 k=3: 121 shapes the engine will compile at runtime (the drafter runs "
        "188, its prompt warmup compiles 67)"
    ]


def test_table_shows_the_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", *ISSUE, "--method", "eagle", "--top", "0", "--no-complete"]) == 0
    out = capsys.readouterr().out
    # the direct warmup covers the set, so the sweep is its sample (drafter_plan.SAMPLE_BUDGET_S);
    # the whole sweep drove 77 in 49 steps
    assert "the warmup sweep sample drives 49 of them in 28 steps" in out
    assert "28 outside the sample (warmed directly)" in out
    assert "not driven: " in out
    assert "34 partial drafts only" in out


def test_manifest_gives_the_method(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(EXAMPLES / "llama31-8b-eagle3-gaudi2.yaml"), "--top", "0"]) == 0
    assert "drafter    eagle3 k=2: " in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (ISSUE, "drafter    method unknown: pass --method or a manifest"),
        (
            [*ISSUE, "--method", "ngram"],
            "drafter    ngram: no drafter graphs: NgramProposer drafts on the CPU",
        ),
        (
            [*ISSUE, "--method", "mtp", "--prompt-bs-max", "2"],
            "drafter    mtp: not modelled: prompt batches",
        ),
    ],
)
def test_no_drafter_lines(capsys: pytest.CaptureFixture[str], argv: list[str], line: str) -> None:
    assert main(["plan", *argv, "--top", "0"]) == 0
    assert line in capsys.readouterr().out


def test_json_carries_report_and_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", *ISSUE, "--method", "eagle3", "--sweep-budget-s", "120", "--no-complete"]
    argv += ["-o", "json"]
    assert main(argv) == 0
    drafter = json.loads(capsys.readouterr().out)["drafter"]
    assert drafter["method"] == "eagle3"
    assert drafter["report"]["unwarmed_shapes"] == 121
    sweep = drafter["sweep"]
    assert sweep["format"] == SWEEP_FORMAT
    assert sweep["budget_s"] == 120
    assert 0 < sweep["seconds"][1] <= 120


def test_the_drafter_proof_uses_the_plan_warmgate_warms(capsys: pytest.CaptureFixture[str]) -> None:
    """With completion applied, the drafter graphs are those of the completed plan.

    mbt 1024, not the issue's 2048: eagle3 k=3 leaves prefills no bucket can serve on the
    issue's config (a 2045-token chunk after 17 blocks), so completion does not apply there.
    """
    cfg = EngineShapeConfig(
        max_num_seqs=8,
        max_model_len=4096,
        max_num_batched_tokens=1024,
        num_speculative_tokens=3,
        speculative_method="eagle3",
    )
    engine = len(prove_drafter(plan_buckets(cfg), "eagle3").unwarmed)
    completed = complete_choice(cfg, True, None).plan  # refined for serving speed (default)
    expected = len(prove_drafter(completed, "eagle3").unwarmed)
    flags = [f for f in ISSUE if not f.startswith("--max-num-batched-tokens")]
    argv = ["plan", *flags, "--max-num-batched-tokens=1024", "--method", "eagle3", "-o", "json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["completion"]["applies"] is True
    assert data["drafter"]["report"]["unwarmed_shapes"] == expected != engine


def test_plan_names_the_reachable_drafter_crash(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 25 item 5: k = 3 at a block boundary crashes the drafter's assert in reachable
    states; `warmgate plan` says so with the states and the fix, in the table and the JSON."""
    assert main(["plan", *ISSUE, "--method", "eagle3", "--top", "0", "--no-complete"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("CRASH")]
    assert "last accepted token is at position 4094" in line
    assert "maxModelLen 4094 or less" in line
    assert main(["plan", *ISSUE, "--method", "eagle3", "--no-complete", "-o", "json"]) == 0
    crash = json.loads(capsys.readouterr().out)["drafter"]["crash"]
    assert (crash["decode_positions"], crash["prompt_lengths"]) == ([4094, 4094], [4095, 4095])
    assert (crash["safe_max_model_len"], crash["safe_k"]) == (4094, 2)
    safe = [a if a != "--max-model-len=4096" else "--max-model-len=4094" for a in ISSUE]
    assert main(["plan", *safe, "--method", "eagle3", "--no-complete", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["drafter"]["crash"] is None
