"""``warmgate buckets``: table, JSON and bucket-file output, and flag errors."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from warmgate.buckets import plan_buckets
from warmgate.cli import main
from warmgate.cli.buckets import add_engine_arguments, engine_config_from_args

A_FLAGS = [
    "buckets",
    "--max-num-seqs",
    "64",
    "--max-model-len",
    "4096",
    "--max-num-batched-tokens",
    "2048",
    "--num-gpu-blocks",
    "8192",
]


def test_table_summarises_counts_rows_and_spec(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*A_FLAGS, "-k", "2"]) == 0
    out = capsys.readouterr().out
    assert "prompt buckets: 63" in out
    assert "seed decode buckets: 43" in out
    assert "decode buckets: 108 (spec expansion added 65)" in out
    assert "bs 192     192..6144 (19)" in out
    assert "largest decode buckets: (192, 1, 6144)" in out


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*A_FLAGS, "-k", "1", "--output", "json", "--profile", "main-2026-08"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["counts"] == {"prompt": 63, "seed_decode": 43, "decode": 105, "spec_added": 62}
    assert data["profile"] == "main-2026-08"
    assert data["decode_buckets"][-1] == [128, 1, 4096]


def test_bucket_file_output_reads_back(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main([*A_FLAGS, "-k", "1", "-o", "bucket-file"]) == 0
    path = tmp_path / "buckets.txt"
    path.write_text(capsys.readouterr().out)
    assert main([*A_FLAGS, "-k", "1", "-o", "json", "--bucket-file", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["counts"]["decode"] == 105


def test_invalid_flags_name_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*A_FLAGS, "--max-num-seqs", "0"]) == 2
    assert "--max-num-seqs" in capsys.readouterr().err
    assert main([*A_FLAGS, "--bucket-env", "VLLM_DECODE_BS_BUCKET_STEP=0"]) == 2
    assert "VLLM_DECODE_BS_BUCKET_STEP" in capsys.readouterr().err
    assert main([*A_FLAGS, "--bucket-env", "NOPE"]) == 2
    assert "NAME=VALUE" in capsys.readouterr().err


def test_engine_refusal_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*A_FLAGS, "--max-model-len", "100"]) == 2
    assert "0 prompt buckets" in capsys.readouterr().err


def test_shared_engine_arguments_build_the_config() -> None:
    parser = argparse.ArgumentParser()
    add_engine_arguments(parser)
    flags = ["--max-model-len", "4096", "--max-num-seqs", "64", "--strategy", "lin"]
    flags += ["--bucket-env", "VLLM_DECODE_BS_BUCKET_STEP=16", "--contiguous-pa"]
    args = parser.parse_args([*flags, "--num-gpu-blocks", "100"])
    cfg = engine_config_from_args(args)
    assert cfg.overrides is not None
    assert cfg.overrides.decode_bs_step == 16
    assert cfg.contiguous_pa
    assert plan_buckets(cfg).seed_decode_buckets[-1] == (64, 1, 100)
