"""``warmgate plan``'s padding lines and its distance to the exact optimum (issue 15)."""

from __future__ import annotations

import json

import pytest

from warmgate.cli import main

SMALL = [
    "--max-num-seqs=16",
    "--max-model-len=2048",
    "--max-num-batched-tokens=512",
    "--num-gpu-blocks=160",
    "-k",
    "3",
]


def test_table_shows_padding_of_both_plans(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", *SMALL, "--optimize-for", "WarmupTime"]) == 0
    out = capsys.readouterr().out
    assert "padding    engine plan     tokens mean 1.16x" in out
    assert "           completed plan  tokens mean 1.11x" in out
    assert "\noptimum    " not in out  # only when asked for
    # Issue 25: past the operator's budget (20,000 constraints) the greedy's seeds stay.
    assert "  seeds by the greedy; optimum: not used: 21,607 constraints: too large" in out


def test_optimum_line_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("highspy", reason="highspy (the dev extra) solves the integer program")
    assert main(["plan", *SMALL, "--optimum"]) == 0
    assert (
        "optimum    decode additions: completion 16.7 s, optimum 15.6 s (midpoint estimates) = "
        "1.07x the optimum" in capsys.readouterr().out
    )
    assert main(["plan", *SMALL, "--optimum", "--output", "json"]) == 0
    data = json.loads(capsys.readouterr().out)  # HiGHS' banner stays off stdout
    best = data["optimum"]
    assert len(best["seeds"]) == 8
    assert best["ratio"] == pytest.approx(best["completion_s"] / best["estimated_s"], abs=1e-3)
    assert data["padding"]["completed"]["states"] == data["coverage"]["decode_states"]


def test_optimum_out_of_scope_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*SMALL, "--contiguous-pa", "--optimum"]
    assert main(["plan", *argv]) == 0
    assert "optimum    not computed: contiguous PA" in capsys.readouterr().out
