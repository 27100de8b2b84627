"""`python -m warmgate.warmup` in front of a real `vllm serve` on CPU (issue 21, part 3).

The plan is the operator's own for the tiny eagle3 SDD (tiny.py). The runner starts the real
engine, reads its real log, waits for /health, drives the planned drafter sweep and the probe
through the real HTTP API, loads its compile hook through vLLM's plugin entry point, and must
end honestly: ``cpu_engine``, saying what it did and did not verify, never ``verified``. With the
default spec (no acceptCPUEngine) it refuses the CPU engine before starting it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from realengine import engine
from realengine.conftest import RunnerRuns
from realengine.runs import RunnerRun

from warmgate.warmup.hook.plugin import NO_GAUDI
from warmgate.warmup.runner.cpu_mode import NOT_VERIFIED


def test_the_default_spec_refuses_a_cpu_engine_before_starting_it(refused: RunnerRun) -> None:
    assert refused.code == 8, refused.summary
    assert refused.summary["outcome"] == "device_refused"
    assert "CPU build of vLLM" in refused.summary["reason"]
    assert "spec.engine.acceptCPUEngine" in refused.summary["reason"]
    report = refused.report
    assert report["facts"]["platform"] == "cpu"
    assert report["engine"]["argv"] == []  # never started
    assert not (Path(refused.plan["work_dir"]) / "engine.log").exists()


def test_an_accepted_cpu_engine_ends_cpu_engine_never_verified(accepted: RunnerRun) -> None:
    summary = accepted.summary
    assert accepted.code == 0, summary
    assert (summary["outcome"], summary["code"]) == ("cpu_engine", 12)
    assert summary["engine"] == {"kind": "cpu", "vllm": engine.VLLM_VERSION, "platform": "cpu"}
    assert NOT_VERIFIED in summary["reason"]
    assert summary["reason"].startswith(f"CPU engine (vLLM {engine.VLLM_VERSION}): started")
    assert summary["cache"] is None  # nothing published: no folder under the key
    assert not (Path(accepted.plan["cache"]["volume_dir"]) / accepted.plan["cache"]["key"]).exists()
    report = accepted.report
    assert (report["outcome"], report["code"], report["exit_code"]) == ("cpu_engine", 12, 0)
    assert report["buckets"] == {}  # no list checked: the engine has none


def test_the_runner_read_the_real_log(accepted: RunnerRun) -> None:
    log = accepted.report["engine_log"]
    assert log["info_records"] > 20
    assert set(log["processes"]) >= {"APIServer", "EngineCore"}
    assert log["problems"] == []
    # No Gaudi matcher fired on the real engine's other output (uvicorn lines, the weights'
    # progress bar, Python warnings): no list, no progress, no flag, no unwarmed shape.
    assert (log["bucket_lists"], log["progress"], log["flags"]) == ({}, {}, [])
    assert (log["unwarmed"], log["not_prepared"], log["omitted"]) == ([], [], [])
    text = accepted.engine_log
    assert re.search(r'INFO: +127\.0\.0\.1:\d+ - "GET /health HTTP/1\.1" 200 OK', text)
    assert re.search(r'"POST /v1/completions HTTP/1\.1" 200 OK', text)


def test_the_hook_loaded_through_its_entry_point_and_found_nothing_gaudi(
    accepted: RunnerRun,
) -> None:
    drafter = accepted.report["drafter"]
    assert (drafter["hook"], drafter["reason"], drafter["verified"]) == (
        "not-attached",
        NO_GAUDI,
        False,
    )
    loaded = {
        int(p)
        for p in re.findall(
            r"warmgate-hook v1 loaded pid=(\d+) \S+ gaudi=false", accepted.engine_log
        )
    }
    prefixed = {p for pids in accepted.report["engine_log"]["processes"].values() for p in pids}
    assert len(loaded) >= 2
    assert loaded <= prefixed  # each a real engine process
    assert (
        f"compile hook loaded by {len(loaded)} engine process(es), not attached"
        in (accepted.summary["reason"])
    )


def test_the_sweep_and_probe_went_through_the_real_http_api(accepted: RunnerRun) -> None:
    planned = accepted.plan["drafter_sweep"]["steps"]
    report = accepted.report
    sweep = report["drafter"]["sweep"]
    assert (sweep["steps_run"], sweep["skipped"], sweep["timed_out"]) == (len(planned), [], False)
    assert all(s["ok"] == s["sent"] and not s["errors"] for s in report["drafter"]["steps"])
    probe = report["probe"]["steps"]
    assert len(probe) == len(accepted.plan["probe"]["steps"]) > 0
    assert all(s["ok"] == s["sent"] for s in probe)
    assert (
        f"served {len(planned)} sweep step(s) and {len(probe)} probe step(s)"
        in (accepted.summary["reason"])
    )


def test_the_plugin_warmed_every_drafter_shape_of_the_operators_plan_in_the_engine(
    accepted: RunnerRun,
) -> None:
    """Issue 33, the whole chain on the real engine: the operator's plan.json carries
    drafter_warmup, the runner hands it to the engine, the plugin warms each shape inside the
    engine (CPU form: its token counts) and the summary counts every one as warmed directly."""
    planned = accepted.plan["drafter_warmup"]["shapes"]
    direct = accepted.summary["drafter_warmup"]
    assert (direct["state"], direct["engine"]) == ("done", "cpu"), direct
    assert direct["planned"] == direct["warmed"] == len(planned) > 0
    assert (direct["failed"], direct["missing"], direct["not_warmed"]) == (0, 0, [])
    assert direct["warmed_digest"] == direct["planned_digest"]
    assert sorted(accepted.report["drafter_warmup"]["warmed"]) == sorted(planned)


@pytest.fixture(scope="module")
def refused(runner_runs: RunnerRuns) -> RunnerRun:
    return runner_runs["refused"]


@pytest.fixture(scope="module")
def accepted(runner_runs: RunnerRuns) -> RunnerRun:
    return runner_runs["prefix-caching-on"]
