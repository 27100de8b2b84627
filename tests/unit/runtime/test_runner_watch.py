"""Between syncs, a serving runner that counts a new unwarmed shape wakes its object."""

from __future__ import annotations

import asyncio
from typing import Any

from warmgate.contract.board import RunnerBoard, read_board
from warmgate.runtime.runner_watch import RunnerWatch, reading

POD = {"metadata": {"name": "p", "uid": "pod-1"}}
SHAPE = "('decode', 8, 1, 64)"


def doc(*shapes: str, misses: int = 0) -> dict[str, Any]:
    """What a serving runner answers."""
    return {"mode": "serve", "unwarmed": list(shapes), "not_prepared_count": misses}


def board(*shapes: str) -> RunnerBoard:
    """What the sync read from it."""
    read = read_board(doc(*shapes))
    assert read is not None
    return read


def test_only_a_new_count_wakes_the_object() -> None:
    watch = RunnerWatch()
    watch.note("uid", ("ns", "a"), [(POD, board())])
    answers = [board(), board(SHAPE)]
    assert watch.changed(lambda pod: answers[0]) == []
    assert watch.changed(lambda pod: answers[1]) == [("ns", "a")]
    watch.note("uid", ("ns", "a"), [(POD, board(SHAPE))])  # the sync that followed
    assert watch.changed(lambda pod: answers[1]) == []


def test_what_is_no_serve_report_wakes_nothing() -> None:
    watch = RunnerWatch()
    watch.note("uid", ("ns", "a"), [(POD, board())])
    assert watch.changed(lambda pod: None) == []
    assert watch.changed(lambda pod: read_board({"mode": "warmup"})) == []

    def refuse(pod: Any) -> Any:
        raise ValueError("nested deeper than 8 levels")

    assert watch.changed(refuse) == []
    assert reading(read_board({"mode": "serve", "not_prepared_count": "many"})) == ((), 0)
    assert reading(read_board({"mode": "warmup"})) is None


def test_the_poll_wakes_within_its_interval() -> None:
    watch = RunnerWatch()
    watch.note("uid", ("ns", "a"), [(POD, board())])
    woken: list[Any] = []

    async def poll() -> None:
        task = asyncio.create_task(watch.run(lambda pod: board(SHAPE), woken.append, 0.01))
        while not woken:
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(asyncio.wait_for(poll(), 10))
    assert woken[0] == ("ns", "a")
    watch.forget("uid")
    assert len(watch) == 0
