"""End-to-end: the runner against the stand-in engine, one test per outcome and exit code."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runner_harness import make_plan, run_runner, start_runner, wait_for

from warmgate.resources.warmup_children import PERMANENT_EXIT_CODES
from warmgate.warmup.cache import (
    MANIFEST_NAME,
    ORPHAN_GRACE_S,
    TMP_PREFIX,
    find_published,
    publish,
)
from warmgate.warmup.runner.outcomes import Outcome

pytestmark = pytest.mark.slow


def _assert_outcome(result: object, outcome: Outcome) -> None:
    code = getattr(result, "code", None)
    assert code == int(outcome), (getattr(result, "stdout", ""), getattr(result, "stderr", ""))
    summary = getattr(result, "summary", {})
    assert summary["outcome"] == outcome.label
    assert summary["code"] == int(outcome)


def test_verified_run_publishes_cache_and_reports(tmp_path: Path) -> None:
    result = run_runner(tmp_path, make_plan(tmp_path, k=1))
    _assert_outcome(result, Outcome.VERIFIED)
    report = result.report()
    assert report["report_version"] == 7
    assert {n: c["match"] for n, c in report["buckets"].items()} == {
        "decode": True,
        "prompt": True,
        "seed_decode": True,
    }
    assert report["buckets"]["decode"]["observed_count"] == 105  # config A, k=1 (§6)
    assert report["engine_log"]["kv_blocks"] == 8192
    assert report["engine_log"]["warmup_finished"] is True
    assert report["engine_log"]["captured"] == {"decode": 105, "prompt": 63}
    manifest = find_published(tmp_path / "volume", "config-a")
    assert manifest is not None
    assert manifest["plan_hash"] == report["plan_hash"]
    assert {f["path"] for f in manifest["files"]} >= {"recipe-0.bin", "graphs/decode.bin"}
    assert result.summary["cache"] == "published"


def test_progress_lines_reach_stdout(tmp_path: Path) -> None:
    result = run_runner(tmp_path, make_plan(tmp_path, k=1))
    lines = result.stdout.splitlines()
    assert "warmgate-progress decode 105/105" in lines
    assert "warmgate-progress prompt 63/63" in lines
    assert "warmgate-progress probe 20/20" in lines
    assert "warmgate-progress stage done verified" in lines
    assert sum(line.startswith("warmgate-progress decode ") for line in lines) <= 101


def test_engine_gets_seed_file_warmup_cache_and_pinned_flags(tmp_path: Path) -> None:
    plan = make_plan(tmp_path, k=2)
    result = run_runner(tmp_path, plan)
    _assert_outcome(result, Outcome.VERIFIED)
    record = result.standin_record()
    env = record["env"]
    assert env["VLLM_SKIP_WARMUP"] == "false"
    assert Path(env["VLLM_BUCKETING_FROM_FILE"]).read_text() == plan["buckets"]["seed_file_text"]
    assert env["PT_HPU_RECIPE_CACHE_CONFIG"] == f"{tmp_path / 'local' / 'recipes'},True,8192"
    # Defect 4 (and 1): the runner owns vLLM's logging; NO_COLOR keeps colour out of prefixes.
    assert (env["VLLM_CONFIGURE_LOGGING"], env["VLLM_LOGGING_LEVEL"]) == ("1", "INFO")
    assert (env["VLLM_LOGGING_PREFIX"], env["NO_COLOR"]) == ("", "1")
    argv = record["argv"]
    assert argv[argv.index("--num-gpu-blocks-override") + 1] == "8192"
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec["num_speculative_tokens"] == 2


def test_second_run_restores_cache_and_keeps_first_entry(tmp_path: Path) -> None:
    plan = make_plan(tmp_path, k=1)
    first = run_runner(tmp_path, plan)
    _assert_outcome(first, Outcome.VERIFIED)
    manifest = find_published(tmp_path / "volume", "config-a")
    second = run_runner(tmp_path, plan)
    _assert_outcome(second, Outcome.VERIFIED)
    env = second.standin_record()["env"]
    assert env["PT_HPU_RECIPE_CACHE_CONFIG"].endswith(",False,8192")  # reader side, §4.6
    assert second.summary["cache"] == "exists"
    assert find_published(tmp_path / "volume", "config-a") == manifest


def _entry(volume: Path, key: str, owner: str, created: int, namespace: str = "team-a") -> None:
    """An entry another runner published on the shared volume, ``created`` seconds since 1970."""
    src = volume.parent / f"src-{key}"
    src.mkdir(parents=True)
    (src / "r.bin").write_bytes(b"r")
    meta = {"owner": owner, "owner_namespace": namespace}
    assert publish(src, volume, key, meta).status == "published"
    path = volume / key / MANIFEST_NAME
    path.write_text(json.dumps({**json.loads(path.read_text()), "created_unix": created}))


def test_a_verified_run_prunes_a_gone_objects_entries_on_the_shared_volume(
    tmp_path: Path,
) -> None:
    """Issue 23 item 12: with the operator's list of users, the runner deletes what an object
    that is gone published, and keeps what a live object owns or uses and what is not ours."""
    volume, now = tmp_path / "volume", int(time.time())
    _entry(volume, "gone-entry", "uid-gone", now - 2 * ORPHAN_GRACE_S)
    _entry(volume, "gone-but-used", "uid-gone", now - 2 * ORPHAN_GRACE_S)
    _entry(volume, "live-entry", "uid-live", now - 2 * ORPHAN_GRACE_S)
    _entry(volume, "other-namespace", "uid-gone", now - 2 * ORPHAN_GRACE_S, "team-b")
    (volume / "not-ours").mkdir()
    (volume / "reports").mkdir()
    (volume / "reports" / "gone-entry.json").write_text("{}")
    plan = make_plan(tmp_path, k=1)
    users = {"owners": ["uid-me", "uid-live"], "keys": ["gone-but-used"], "as_of_unix": now}
    plan["cache"].update(owner="uid-me", retain=3, users=users, namespace="team-a")
    result = run_runner(tmp_path, plan)
    _assert_outcome(result, Outcome.VERIFIED)
    assert result.report()["cache"]["pruned_orphans"] == ["gone-entry"]
    names = sorted(p.name for p in volume.iterdir() if not p.name.startswith(TMP_PREFIX))
    assert names == [
        "config-a", "gone-but-used", "live-entry", "not-ours", "other-namespace", "reports",
    ]  # fmt: skip
    assert not (volume / "reports" / "gone-entry.json").exists()
    published = find_published(volume, "config-a")
    assert published is not None
    assert (published["owner"], published["owner_namespace"]) == ("uid-me", "team-a")


def test_logging_settings_of_the_image_are_overridden(tmp_path: Path) -> None:
    # Defect 4: an image whose ENV hides or reshapes vLLM's lines; the stand-in honours them
    # exactly as vLLM does, so without the runner's own settings nothing could be verified.
    image_env = {
        "VLLM_LOGGING_LEVEL": "WARNING",
        "VLLM_CONFIGURE_LOGGING": "0",
        "VLLM_LOGGING_PREFIX": "[svc] ",
        "VLLM_LOGGING_COLOR": "1",
    }
    result = run_runner(tmp_path, make_plan(tmp_path, k=1), image_env=image_env)
    _assert_outcome(result, Outcome.VERIFIED)
    assert "(EngineCore pid=" in result.stderr  # the runner echoes the engine's output


def test_dropped_seeds_stop_the_run_early_and_are_named(tmp_path: Path) -> None:
    # Defect 2 (and 1): the engine drops a seed (bs 64 > 32 blocks) and logs one record for it.
    plan = make_plan(tmp_path, k=1)
    plan["buckets"]["seed_file_text"] += "(64, 1, 32)\n"
    result = run_runner(tmp_path, plan, faults="old_vllm,hang")
    _assert_outcome(result, Outcome.PLAN_MISMATCH)
    assert result.summary["reason"] == (
        "engine dropped 1 seed bucket(s) of the file: decode (64, 1, 32) (condition: bs <= ctx,)"
    )
    omitted = result.report()["engine_log"]["omitted"]
    assert omitted == [
        {"phase": "decode", "bucket": [64, 1, 32], "condition": "condition: bs <= ctx,"}
    ]
    assert "stage probe" not in result.stdout  # stopped while the engine was still starting


def test_tensor_parallel_copies_with_one_garbled_verify(tmp_path: Path) -> None:
    # Defect 3: two ranks log every line; rank 0's decode list is cut by rank 1's prefix.
    plan = make_plan(tmp_path, k=1)
    plan["engine"]["tensor_parallel_size"] = 2
    result = run_runner(tmp_path, plan, faults="garble_copies=1")
    _assert_outcome(result, Outcome.VERIFIED)
    copies = result.report()["engine_log"]["list_copies"]["decode"]
    assert len(copies["unreadable"]) == 1
    assert copies["readable_from"] != []


def test_tensor_parallel_copies_all_garbled_are_unreadable_not_a_mismatch(
    tmp_path: Path,
) -> None:
    plan = make_plan(tmp_path, k=1)
    plan["engine"]["tensor_parallel_size"] = 2
    result = run_runner(tmp_path, plan, faults="garble_copies=2")
    _assert_outcome(result, Outcome.LOG_UNREADABLE)
    assert result.code not in PERMANENT_EXIT_CODES  # the Job retries it
    assert result.summary["unreadable"][0].startswith("no readable copy of the decode bucket list")
    assert find_published(tmp_path / "volume", "config-a") is None


def test_enforce_eager_in_the_plan_is_refused(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    plan["engine"]["args"].append("--enforce-eager")
    result = run_runner(tmp_path, plan)
    _assert_outcome(result, Outcome.PLAN_INVALID)
    assert "--enforce-eager skips graph warmup" in result.summary["reason"]


def test_unwarmed_shape_during_probe(tmp_path: Path) -> None:
    result = run_runner(tmp_path, make_plan(tmp_path), faults="unwarmed_on_probe")
    _assert_outcome(result, Outcome.UNWARMED_SHAPES)
    assert result.summary["unwarmed"][0] == (
        "Configuration: ('decode', 24, 1, 768) was not warmed-up!"
    )
    assert result.summary["unwarmed_count"] == 2  # plus the fallback bucket line
    unwarmed = result.report()["engine_log"]["unwarmed"]
    assert unwarmed == [{"config": "('decode', 24, 1, 768)", "after_warmup": True}]
    assert find_published(tmp_path / "volume", "config-a") is None


def test_known_unwarmable_shapes_are_reported_not_failed(tmp_path: Path) -> None:
    """The plan lists both shapes the probe's first request runs unwarmed (the configuration and
    the fallback bucket) as known unwarmable: verified, with them as known gaps."""
    plan = make_plan(tmp_path)
    plan["buckets"]["known_unwarmable"] = [["decode", 24, 1, 768], ["decode", 24, 1, 896]]
    result = run_runner(tmp_path, plan, faults="unwarmed_on_probe")
    _assert_outcome(result, Outcome.VERIFIED)
    assert (result.summary["unwarmed_count"], result.summary["known_gaps_count"]) == (0, 2)
    assert result.summary["known_gaps"] == [
        "Configuration: ('decode', 24, 1, 768) was not warmed-up!",
        "Decode bucket for (24, 1, 800) was not prepared (added (24, 1, 896))",
    ]
    assert "2 known gap(s), shapes the plan lists as unwarmable" in result.summary["reason"]
    assert result.report()["known_gaps"] == result.summary["known_gaps"]
    assert find_published(tmp_path / "volume", "config-a") is not None


def test_a_known_gap_hides_no_other_unwarmed_shape(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    plan["buckets"]["known_unwarmable"] = [["decode", 24, 1, 768]]
    result = run_runner(tmp_path, plan, faults="unwarmed_on_probe")
    _assert_outcome(result, Outcome.UNWARMED_SHAPES)
    assert result.summary["unwarmed"] == [
        "Decode bucket for (24, 1, 800) was not prepared (added (24, 1, 896))"
    ]
    assert result.summary["known_gaps_count"] == 1


@pytest.mark.parametrize(
    ("faults", "reason_part"),
    [
        ("kv_blocks=2000", "KV blocks: engine has 2000, plan pins 8192"),
        ("extra_decode_bucket", "decode buckets: engine generated 106"),
        ("skip_warmup", "Skipping warmup"),
    ],
)
def test_plan_mismatch(tmp_path: Path, faults: str, reason_part: str) -> None:
    result = run_runner(tmp_path, make_plan(tmp_path), faults=faults)
    _assert_outcome(result, Outcome.PLAN_MISMATCH)
    assert reason_part in result.summary["reason"]
    assert find_published(tmp_path / "volume", "config-a") is None


def test_engine_crash_at_start(tmp_path: Path) -> None:
    result = run_runner(tmp_path, make_plan(tmp_path), faults="crash_at_start")
    _assert_outcome(result, Outcome.ENGINE_FAILED)
    assert "exited with 3 before /health" in result.summary["reason"]


def test_engine_exits_during_probe(tmp_path: Path) -> None:
    result = run_runner(tmp_path, make_plan(tmp_path), faults="exit_on_probe")
    _assert_outcome(result, Outcome.ENGINE_FAILED)


def test_probe_failure(tmp_path: Path) -> None:
    result = run_runner(tmp_path, make_plan(tmp_path), faults="probe_http_500")
    _assert_outcome(result, Outcome.PROBE_FAILED)
    assert "HTTP 500" in result.summary["reason"]


def test_hung_engine_times_out(tmp_path: Path) -> None:
    plan = make_plan(tmp_path, timeouts={"startup_s": 3, "stop_grace_s": 5})
    result = run_runner(tmp_path, plan, faults="hang")
    _assert_outcome(result, Outcome.TIMED_OUT)


def test_engine_ignoring_sigterm_is_killed(tmp_path: Path) -> None:
    plan = make_plan(tmp_path, timeouts={"startup_s": 5, "stop_grace_s": 1})
    result = run_runner(tmp_path, plan, faults="hang_ignore_term")
    _assert_outcome(result, Outcome.TIMED_OUT)
    pid = result.standin_record()["pid"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert result.report()["engine"]["exit_code"] == -9


def test_device_count_below_tensor_parallel_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "fake-site"
    hpu = fake / "habana_frameworks" / "torch" / "hpu"
    hpu.mkdir(parents=True)
    (fake / "habana_frameworks" / "__init__.py").write_text("")
    (fake / "habana_frameworks" / "torch" / "__init__.py").write_text("__version__ = '1.22.0'\n")
    (hpu / "__init__.py").write_text(
        "def device_count():\n    return 1\n\ndef get_device_name():\n    return 'GAUDI3'\n"
    )
    plan = make_plan(tmp_path)
    plan["engine"]["tensor_parallel_size"] = 2
    plan["engine"]["env"]["PYTHONPATH"] = str(fake)
    plan["require_device"] = True
    result = run_runner(tmp_path, plan)
    _assert_outcome(result, Outcome.DEVICE_REFUSED)
    facts = result.report()["facts"]
    assert (facts["hpu_count"], facts["gaudi_generation"]) == (1, "Gaudi3")
    assert not (tmp_path / "standin-record.json").exists()  # the engine never started


def test_missing_device_is_refused_when_required(tmp_path: Path) -> None:
    result = run_runner(tmp_path, make_plan(tmp_path, require_device=True))
    _assert_outcome(result, Outcome.DEVICE_REFUSED)
    assert "cannot count HPUs" in result.summary["reason"]


def test_unknown_plan_version_is_refused(tmp_path: Path) -> None:
    result = run_runner(tmp_path, make_plan(tmp_path, format_version=2))
    _assert_outcome(result, Outcome.PLAN_INVALID)
    assert "format_version" in result.summary["reason"]
    assert "plan invalid" in result.stderr


def test_missing_engine_executable_fails_to_start(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    plan["engine"]["command"] = [str(tmp_path / "no-such-vllm"), "serve"]
    result = run_runner(tmp_path, plan)
    _assert_outcome(result, Outcome.ENGINE_FAILED)
    assert "cannot start" in result.summary["reason"]


def test_sigterm_to_the_runner_stops_the_engine(tmp_path: Path) -> None:
    plan = make_plan(tmp_path, timeouts={"startup_s": 300, "stop_grace_s": 5})
    proc = start_runner(tmp_path, plan, faults="hang")
    record = tmp_path / "standin-record.json"
    try:
        # the stand-in creates the file, then writes it: wait for the content, not the name
        wait_for(lambda: record.exists() and record.read_text().endswith("}"), proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == int(Outcome.TIMED_OUT)
    finally:
        proc.kill()
        proc.wait()
    summary = json.loads((tmp_path / "termination-log").read_text())
    assert summary["reason"] == "runner received signal 15"
    with pytest.raises(ProcessLookupError):
        os.kill(json.loads(record.read_text())["pid"], 0)


def test_key_held_by_a_folder_without_manifest_fails_publication(tmp_path: Path) -> None:
    squatter = tmp_path / "volume" / "config-a"
    squatter.mkdir(parents=True)
    (squatter / "leftover.bin").write_bytes(b"?")
    result = run_runner(tmp_path, make_plan(tmp_path))
    _assert_outcome(result, Outcome.CACHE_FAILED)
    assert "folder without manifest" in result.summary["reason"]
    assert [p.name for p in squatter.iterdir()] == ["leftover.bin"]  # left untouched


def test_unexpected_runner_error_still_reports(tmp_path: Path) -> None:
    (tmp_path / "not-a-dir").write_text("")
    result = run_runner(tmp_path, make_plan(tmp_path, work_dir=str(tmp_path / "not-a-dir")))
    _assert_outcome(result, Outcome.INTERNAL_ERROR)
    assert result.summary["reason"].startswith(("FileExistsError", "NotADirectoryError"))


def test_log_records_glued_to_tqdm_bars_on_one_stream(tmp_path: Path) -> None:
    # Records on stderr (a logging config the runner cannot override) and two ranks: one
    # rank's record lands right behind the other rank's tqdm bar, on the same line.
    plan = make_plan(tmp_path, k=1)
    plan["engine"]["tensor_parallel_size"] = 2
    result = run_runner(tmp_path, plan, faults="logs_on_stderr")
    _assert_outcome(result, Outcome.VERIFIED)
    assert re.search(r"\?item/s(, \d+/\d+)?\]\(Worker_TP[01] pid=\d+\) ", result.stderr)
    log = result.report()["engine_log"]
    assert log["captured"] == {"decode": 105, "prompt": 63}
    assert log["progress"] == {"decode": [105, 105], "prompt": [63, 63]}


def test_sigterm_before_the_run_ends_the_runner_at_once(tmp_path: Path) -> None:
    # PID 1 of a container ignores SIGTERM without a handler: the runner installs one first.
    script = (
        "import os, signal, sys, time\n"
        "import warmgate.warmup.__main__ as entry\n"
        "def load(path):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(30)\n"
        "entry.load_plan = load\n"
        "sys.exit(entry.main(['--plan', 'plan.json']))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert proc.returncode == int(Outcome.TIMED_OUT), proc.stderr
    assert "received signal 15 before the run started" in proc.stderr
