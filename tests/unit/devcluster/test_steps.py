"""Provisioning prints one line when a step starts and one with its time, the tools' output goes
to a named log, and a failure shows the log's tail: hack/lib/steps.sh and its Python twin."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import REPO_ROOT

from warmgate.devcluster.steps import StepFailed, Steps, duration

HELPER = REPO_ROOT / "hack" / "lib" / "steps.sh"
SCRIPT = """
set -euo pipefail
STEPS_PREFIX=demo
source {helper}
noisy() {{ for i in $(seq 1 40); do echo "tool line $i"; done; echo "to stderr" >&2; }}
broken() {{ echo "first"; false; echo "after the failure"; }}
STEP_ABOUT="about 1 s" step noisy "a noisy step" noisy
step {second} "the second step" {second}
echo "script went on"
"""


def _run_shell(tmp_path: Path, second: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "provision-demo.sh"
    script.write_text(SCRIPT.format(helper=HELPER, second=second))
    env = {"PATH": "/usr/bin:/bin", "STEPS_LOG_DIR": str(tmp_path / "logs")}
    return subprocess.run(
        ["bash", str(script)], capture_output=True, text=True, env=env, check=False
    )


def _shape(line: str) -> str:
    """A line with its time and the log folder replaced, so both helpers compare equal."""
    line = re.sub(r"\d+ min \d+ s|\d+ s", "T", line)
    return re.sub(r"/\S*/logs/", "LOGS/", line)


def test_the_shell_helper_prints_two_lines_per_step_and_logs_the_rest(tmp_path: Path) -> None:
    done = _run_shell(tmp_path, "true")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "script went on\n"  # stdout stays the script's own
    lines = done.stderr.splitlines()
    assert [_shape(x) for x in lines] == [
        "demo: a noisy step (about T) ... (log: LOGS/demo.noisy.log)",
        "demo: a noisy step: T",
        "demo: the second step ... (log: LOGS/demo.true.log)",
        "demo: the second step: T",
    ]
    log = (tmp_path / "logs" / "demo.noisy.log").read_text()
    assert "tool line 40" in log
    assert "to stderr" in log


def test_a_failing_step_stops_at_its_first_error_and_shows_the_logs_tail(tmp_path: Path) -> None:
    done = _run_shell(tmp_path, "broken")
    assert done.returncode == 1
    assert "script went on" not in done.stdout  # the caller's set -e stops the script
    log = tmp_path / "logs" / "demo.broken.log"
    assert "after the failure" not in log.read_text()  # set -e inside the step
    lines = done.stderr.splitlines()
    assert _shape(lines[3]) == (
        "demo: the second step: FAILED after T (exit 1); the last lines of LOGS/demo.broken.log:"
    )
    assert lines[-2] == "    first"
    assert lines[-1] == f"demo: the whole output: {log}"


def test_the_python_twin_prints_the_same_lines(tmp_path: Path) -> None:
    said: list[str] = []
    steps = Steps(lambda m: said.append(f"demo: {m}"), prefix="demo", log_dir=tmp_path / "logs")
    with steps.step("noisy", "a noisy step", "about 1 s") as step:
        out = step.run(
            [
                sys.executable,
                "-c",
                "print('tool line'); print('err', file=__import__('sys').stderr)",
            ]
        )
    assert out == "tool line\n"
    assert [_shape(x) for x in said] == [
        "demo: a noisy step (about T) ... (log: LOGS/demo.noisy.log)",
        "demo: a noisy step: T",
    ]
    log = (tmp_path / "logs" / "demo.noisy.log").read_text()
    assert "tool line" in log
    assert "err" in log


def test_the_python_twin_shows_the_tail_and_raises(tmp_path: Path) -> None:
    said: list[str] = []
    steps = Steps(said.append, prefix="demo", log_dir=tmp_path / "logs")
    with (  # noqa: PT012 - the step's block is what raises
        pytest.raises(StepFailed, match="the whole output"),
        steps.step("broken", "a broken step") as step,
    ):
        step.run(["sh", "-c", "echo first; exit 3"])
        step.run(["echo", "never run"])
    assert _shape(said[1]).startswith("a broken step: FAILED after T (sh -c echo first; exit 3")
    assert "    first" in said
    assert said[-1].startswith("the whole output: ")
    assert "never run" not in (tmp_path / "logs" / "demo.broken.log").read_text()


@pytest.mark.parametrize(("seconds", "shown"), [(0, "0 s"), (59.9, "59 s"), (542, "9 min 2 s")])
def test_durations_read_as_the_shell_prints_them(seconds: float, shown: str) -> None:
    assert duration(seconds) == shown
    shell = f"source {HELPER}; duration {int(seconds)}"
    done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, check=True)
    assert done.stdout == shown + "\n"


def test_a_long_step_says_it_is_alive(tmp_path: Path) -> None:
    script = f"set -eu; STEPS_PREFIX=demo; source {HELPER}; step nap 'a long step' sleep 2.5"
    env = {"PATH": "/usr/bin:/bin", "STEPS_LOG_DIR": str(tmp_path), "STEPS_TICK_SECONDS": "1"}
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, check=True, timeout=30
    )
    ticks = [x for x in done.stderr.splitlines() if "still running" in x]
    assert ticks
    assert re.fullmatch(r"demo: a long step: still running \(\d s\)", ticks[0])
