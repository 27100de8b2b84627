"""Issue 34 cases 5 and 6: the readers of the runners' documents are total.

Whatever a Pod writes into its termination message or answers on its status port, the reader
returns a document or says "invalid": never a RecursionError or an OverflowError, and never a
number a status field cannot hold (the API server refuses a whole status patch with one
integer beyond int64, 422, on every sync).
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from warmgate.api.status import WarmupProgress
from warmgate.contract import schema
from warmgate.contract.board import ServeBoard, WarmupBoard, read_board
from warmgate.contract.summary import TerminationSummary
from warmgate.kube.runner_endpoints import RunnerDocError, parse_board
from warmgate.reconcile.planning.drift_seeds import parse_shape
from warmgate.reconcile.sync.progress import progress_of
from warmgate.runtime.runner_watch import RunnerWatch

INT64_MAX = 2**63 - 1
AT = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
HUGE = 10**30


@pytest.mark.parametrize(
    "text",
    [
        "[" * 4096,  # case 5: json.loads recursed once per level
        '{"outcome": "verified", "x": ' + "[" * 2000 + "]" * 2000 + "}",
        "{" * 50000,
        '{"outcome": "verified", "kv_blocks": NaN}',
        '{"outcome": "verified", "kv_blocks": Infinity}',
        '{"outcome": "verified", "kv_blocks": 1e999}',
        "1" * 5000,  # more digits than Python converts
        '{"outcome": "verified", "reason": "' + "x" * 40000 + '"}',
    ],
)
def test_a_termination_message_that_is_no_summary_reads_as_none(text: str) -> None:
    assert TerminationSummary.from_json(text) is None


def test_a_summarys_numbers_fit_the_status() -> None:
    text = json.dumps(
        {"outcome": "verified", "key": "k", "kv_blocks": HUGE, "code": HUGE, "v": HUGE}
    )
    summary = TerminationSummary.from_json(text)
    assert summary is not None
    assert summary.kv_blocks == schema.MAX_COUNT
    assert summary.code == schema.MAX_COUNT
    assert schema.MAX_COUNT <= INT64_MAX


@pytest.mark.parametrize(
    "body",
    [
        b'{"mode": "warmup", "elapsed_s": 1e999}',
        b'{"mode": "serve", "spec_decode": {"drafts": 1e999}}',
        b'{"mode": "serve", "unwarmed_count": NaN}',
        b'{"mode": "serve", "unwarmed_count": -Infinity}',
        b"[" * 4096,
    ],
)
def test_a_board_with_numbers_json_cannot_carry_is_invalid(body: bytes) -> None:
    with pytest.raises(RunnerDocError):
        parse_board(body)


def test_a_boards_numbers_are_clamped_to_what_the_status_holds() -> None:
    warmup = read_board(
        {
            "mode": "warmup",
            "key": "k",
            "elapsed_s": float(HUGE),
            "progress": {"prompt": [HUGE, HUGE], "decode": [1, HUGE]},
        }
    )
    assert isinstance(warmup, WarmupBoard)
    progress = progress_of(warmup, planned=100, estimate_s=10.0, key="k", at=AT)
    assert isinstance(progress, WarmupProgress)
    for value in progress.model_dump().values():
        if isinstance(value, int):
            assert value <= INT64_MAX
    serve = read_board(
        {
            "mode": "serve",
            "unwarmed_count": HUGE,
            "not_prepared_count": HUGE,
            "spec_decode": {"drafts": float(HUGE), "draft_tokens": HUGE, "scraped_unix": HUGE},
        }
    )
    assert isinstance(serve, ServeBoard)
    assert serve.unwarmed_count == schema.MAX_COUNT
    assert serve.spec_decode is not None
    assert serve.spec_decode.drafts == schema.MAX_COUNT
    assert serve.spec_decode.draft_tokens == schema.MAX_COUNT


def test_an_infinite_number_in_a_decoded_board_is_no_number() -> None:
    """A board handed over as a dict (a test double, or a future reader) with inf in it."""
    board = read_board({"mode": "warmup", "key": "k", "elapsed_s": float("inf")})
    assert isinstance(board, WarmupBoard)
    assert board.elapsed_s == 0.0
    assert progress_of(board, planned=10, estimate_s=5.0, key="k", at=AT) is not None
    figures = read_board({"mode": "serve", "spec_decode": {"drafts": float("inf")}})
    assert isinstance(figures, ServeBoard)
    assert figures.spec_decode is not None
    assert figures.spec_decode.drafts == 0


@pytest.mark.parametrize(
    "shape", [f"('decode', {HUGE}, 1, 64)", "('decode', 1e999, 1, 64)", "(" * 100]
)
def test_a_shape_no_engine_runs_is_no_shape(shape: str) -> None:
    assert parse_shape(shape) is None


def test_whatever_a_read_raises_never_ends_the_runner_watch() -> None:
    """Case 6: the poll between syncs caught ValueError only; an OverflowError or a
    RecursionError from one Pod ended the task, and every object fell back to the resync."""
    watch = RunnerWatch()
    pod = {"metadata": {"name": "p", "uid": "pod-1"}}
    other = {"metadata": {"name": "q", "uid": "pod-2"}}
    before = read_board({"mode": "serve"})
    assert before is not None
    watch.note("a", ("ns", "a"), [(pod, before)])
    watch.note("b", ("ns", "b"), [(other, before)])
    news = read_board({"mode": "serve", "unwarmed": ["('decode', 8, 1, 64)"]})

    def read(target: dict[str, Any]) -> Any:
        if target["metadata"]["name"] == "p":
            raise OverflowError("cannot convert float infinity to integer")
        return news

    assert watch.changed(read) == [("ns", "b")]
    woken: list[Any] = []

    async def run() -> None:
        task = asyncio.create_task(watch.run(read, woken.append, interval=0.01))
        await asyncio.sleep(0.2)
        assert not task.done()
        task.cancel()

    asyncio.run(run())
    assert ("ns", "b") in woken
