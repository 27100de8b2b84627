"""The merge of a sharded warmup's slices (issue 38): cache.merge on real folders, and the
runner's wait for its slices (recipe entries on Gaudi, reports on an accepted CPU engine)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from runner_harness import make_plan

from warmgate.contract.order import parse_plan
from warmgate.contract.shardspec import shard_key
from warmgate.warmup import cache
from warmgate.warmup.runner.outcomes import Outcome, RunFailure
from warmgate.warmup.runner.report import Progress
from warmgate.warmup.runner.run import Runner


def _entry(volume: Path, key: str, files: dict[str, bytes]) -> None:
    src = volume.parent / f"src-{key}"
    for rel, data in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    assert cache.publish(src, volume, key, {}).status == "published"


def test_merge_copies_every_slice_once_and_counts_shared_paths(tmp_path: Path) -> None:
    volume = tmp_path / "volume"
    _entry(volume, "k.shard-0-of-2", {"a.bin": b"a", "same.bin": b"s", "g/x.bin": b"x0"})
    _entry(volume, "k.shard-1-of-2", {"b.bin": b"b", "same.bin": b"s", "g/x.bin": b"x1"})
    dest = tmp_path / "local"
    dest.mkdir()
    (dest / "stale.bin").write_bytes(b"old")
    result = cache.merge(volume, ["k.shard-0-of-2", "k.shard-1-of-2"], dest)
    assert (result.missing, result.problems) == ([], [])
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()) == [
        "a.bin",
        "b.bin",
        "g/x.bin",
        "same.bin",
    ]
    assert (dest / "g" / "x.bin").read_bytes() == b"x0"  # the first slice's copy
    assert (result.files, result.shared, result.differing) == (4, 2, 1)


def test_merge_names_a_missing_slice_and_a_damaged_file(tmp_path: Path) -> None:
    volume = tmp_path / "volume"
    _entry(volume, "k.shard-0-of-3", {"a.bin": b"a"})
    _entry(volume, "k.shard-2-of-3", {"c.bin": b"c"})
    (volume / "k.shard-2-of-3" / "c.bin").write_bytes(b"tampered")
    result = cache.merge(volume, [f"k.shard-{i}-of-3" for i in range(3)], tmp_path / "local")
    assert result.missing == ["k.shard-1-of-3"]
    assert result.problems == ["k.shard-2-of-3: c.bin: size or sha256 differs from the manifest"]


def _merge_runner(tmp_path: Path, shards: int, wait_s: float) -> Runner:
    doc = make_plan(tmp_path, k=1)
    doc["shard"] = {"role": "merge", "index": 0, "count": shards, "wait_s": wait_s}
    return Runner(parse_plan(doc), Progress(out=io.StringIO()))


def test_the_merge_waits_then_names_the_slice_that_never_published(tmp_path: Path) -> None:
    runner = _merge_runner(tmp_path, 2, wait_s=0.5)
    _entry(tmp_path / "volume", shard_key("config-a", 0, 2), {"a.bin": b"a"})
    with pytest.raises(RunFailure) as failed:
        runner._prepare_local()
    assert failed.value.outcome is Outcome.SHARD_MISSING
    assert f"slice 1 of 2 (key {shard_key('config-a', 1, 2)})" in failed.value.reason
    assert runner.record.shard is not None
    assert runner.record.shard["merged"] == 1


def test_on_a_cpu_engine_the_merge_waits_for_the_slices_reports(tmp_path: Path) -> None:
    runner = _merge_runner(tmp_path, 2, wait_s=0.5)
    runner.cpu = True
    reports = tmp_path / "volume" / "reports"
    reports.mkdir(parents=True)
    (reports / f"{shard_key('config-a', 0, 2)}.json").write_text(
        json.dumps({"outcome": "cpu_engine"})
    )
    with pytest.raises(RunFailure) as failed:
        runner._prepare_local()
    assert "slice 1 of 2" in failed.value.reason
    (reports / f"{shard_key('config-a', 1, 2)}.json").write_text(
        json.dumps({"outcome": "cpu_engine"})
    )
    assert runner._prepare_local() is False  # nothing restored: a CPU build has no recipes
    assert runner.record.cache["merged"] == {"slices": 2, "files": 0}
