"""Command line: `python3 -m warmgate.warmup --plan plan.json`, `--restore-cache` for readers,
`--shards DIR` in a sharded warmup's Pods (issue 38), or `--serve [--status-port N] -- ENGINE...`
to run the serving engine under the runner (serve.py)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from warmgate.contract.board import WarmupBoard
from warmgate.contract.order import PlanError, load_plan
from warmgate.contract.shardspec import INDEX_ENV, PLAN_FILE, shard_file
from warmgate.contract.summary import TerminationSummary
from warmgate.warmup import cache
from warmgate.warmup.engine.launch import echo
from warmgate.warmup.runner.outcomes import Outcome, RunFailure
from warmgate.warmup.runner.report import Progress, RunRecord, write_termination_log
from warmgate.warmup.runner.run import Runner, finish
from warmgate.warmup.serve import mode as serve
from warmgate.warmup.statusboard import Board, serve_board

DEFAULT_TERMINATION_LOG = Path("/dev/termination-log")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python3 -m warmgate.warmup", description=__doc__)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--plan", type=Path, help="the plan JSON written by the operator")
    mode.add_argument(
        "--shards",
        type=Path,
        metavar="DIR",
        help="a sharded warmup's Pod: run DIR/shard-<i>.json (i: $JOB_COMPLETION_INDEX); Pod 0 "
        "then merges every slice's recipes and runs DIR/plan.json on them",
    )
    parser.add_argument("--shard-index", type=int, help="overrides $JOB_COMPLETION_INDEX")
    mode.add_argument(
        "--restore-cache",
        nargs=3,
        metavar=("VOLUME_DIR", "KEY", "DEST"),
        help="copy a published recipe cache to local disk, verifying its manifest",
    )
    parser.add_argument("--termination-log", type=Path, help="overrides the plan's path")
    parser.add_argument("--quiet-engine", action="store_true", help="do not echo engine output")
    parser.add_argument(
        "--status-port",
        type=int,
        help="serve the progress on this port (GET /warmgate/status, /metrics) for the operator",
    )
    return parser


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    del frame
    # The Job's activeDeadlineSeconds or a deletion ends us with SIGTERM: stop the engine too.
    raise RunFailure(Outcome.TIMED_OUT, f"runner received signal {signum}")


def _stopped_early(signum: int, frame: FrameType | None) -> None:
    del frame
    # As PID 1 of its container the runner ignores SIGTERM until it installs a handler (the
    # kernel drops default-action signals to a namespace's init), so a Pod deleted during
    # start-up would wait out its whole grace period. Before the run there is nothing to stop.
    print(f"warmgate: received signal {signum} before the run started", file=sys.stderr)
    raise SystemExit(int(Outcome.TIMED_OUT))


def _restore(volume: str, key: str, dest: str) -> int:
    result = cache.restore(Path(volume), key, Path(dest))
    if result is None:
        print(f"warmgate: no complete cache entry {key!r} under {volume}", file=sys.stderr)
        return 1
    done = {"files": result.files, "bytes": result.total_bytes, "problems": result.problems}
    print(json.dumps(done))
    return 1 if result.problems else 0


def _invalid_plan(exc: PlanError, termination_log: Path) -> int:
    for problem in exc.problems:
        print(f"warmgate: plan invalid: {problem}", file=sys.stderr)
    refused = TerminationSummary(
        outcome=Outcome.PLAN_INVALID.label,
        code=int(Outcome.PLAN_INVALID),
        reason="; ".join(exc.problems),
    )
    write_termination_log(termination_log, refused.to_json())
    return int(Outcome.PLAN_INVALID)


def _declared_log(plan_path: Path) -> Path:
    """The termination-log path of a plan we refused, if it can be read at all."""
    try:
        raw = json.loads(plan_path.read_text(encoding="utf-8"))
        declared = raw["report"]["termination_log"]
    except (OSError, ValueError, KeyError, TypeError):
        declared = None
    return Path(declared) if isinstance(declared, str) and declared else DEFAULT_TERMINATION_LOG


def main(argv: Sequence[str] | None = None) -> int:
    """Run the warmup (or a cache restore, or serve mode) and return the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--serve"]:  # serve mode forwards signals to the engine (serve.py)
        return serve.main(argv[1:])
    signal.signal(signal.SIGTERM, _stopped_early)
    args = _parser().parse_args(argv)
    if args.restore_cache:
        return _restore(*args.restore_cache)
    board = Board(WarmupBoard())
    if args.status_port is not None:
        serve_board(board, args.status_port)
    if args.shards is not None:
        return _sharded(args, board)
    return _run(args.plan, args, board)[0]


def _run(
    path: Path, args: argparse.Namespace, board: Board, slice_outcome: str | None = None
) -> tuple[int, RunRecord | None]:
    """Run one plan file to its exit code (and record; None when the plan was refused)."""
    try:
        plan = load_plan(path)
    except PlanError as exc:
        return _invalid_plan(exc, args.termination_log or _declared_log(path)), None
    if args.termination_log is not None:
        plan = dataclasses.replace(plan, termination_log=args.termination_log)
    signal.signal(signal.SIGTERM, _on_sigterm)
    board.publish(WarmupBoard(key=plan.cache.key, plan_hash=plan.plan_hash))
    progress = Progress(board=board)
    runner = Runner(plan, progress, engine_echo=None if args.quiet_engine else echo)
    record = runner.run()
    if slice_outcome is not None and record.shard is not None:
        record.shard["slice"] = slice_outcome
    return finish(record, plan, progress), record


def _sharded(args: argparse.Namespace, board: Board) -> int:
    """One Pod of a sharded warmup: its slice, then in Pod 0 the merge and the whole plan."""
    raw = os.environ.get(INDEX_ENV, "") if args.shard_index is None else str(args.shard_index)
    if not raw.isdigit():
        problem = f"{INDEX_ENV}: expected the Pod's completion index, got {raw!r}"
        return _invalid_plan(PlanError([problem]), args.termination_log or DEFAULT_TERMINATION_LOG)
    index = int(raw)
    code, record = _run(args.shards / shard_file(index), args, board)
    # A CPU engine the plan accepts ends cpu_engine, never verified: its merge runs too, to
    # show the mechanism (cpu_mode.py); it merges no recipes and is never verified either.
    ok = (Outcome.VERIFIED, Outcome.CPU_ENGINE)
    if index != 0 or record is None or record.outcome not in ok:
        return code
    return _run(args.shards / PLAN_FILE, args, board, slice_outcome=record.outcome.label)[0]


if __name__ == "__main__":
    sys.exit(main())
