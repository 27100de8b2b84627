"""Between syncs, ask the serving runners whether they saw a new unwarmed shape; wake on news.

A sync reads the serving Pods' runners (`gather`), but syncs are rare at rest (the slow
jittered resync, 15 minutes by default): an unwarmed shape in production would reach the status
up to a resync later. So every `POLL_SECONDS` this task asks the runners of the Pods the last
sync of each object trusted (its own Deployment's running Pods of the served plan), through
their Pod IP, no API request, and wakes the object's follower when a runner's count changed:
the bound from the engine's line to status.drift is the poll interval plus one sync (measured in
docs/operator.md, "How progress and drift reach the operator").
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final

from warmgate.api import Manifest
from warmgate.contract.board import RunnerBoard, ServeBoard
from warmgate.kube.children import ParentKey

POLL_SECONDS: Final = 30.0
# Runners asked at once by one poll.
POLL_WORKERS: Final = 8
LOG = logging.getLogger(__name__)
# A reading of what a runner counted so far: its distinct unwarmed shapes and its misses.
Reading = tuple[tuple[str, ...], int]
Read = Callable[[Manifest], RunnerBoard | None]
Wake = Callable[[ParentKey], object]


def reading(board: RunnerBoard | None) -> Reading | None:
    """What a serve-mode board counts; None for anything else."""
    if not isinstance(board, ServeBoard):
        return None
    return board.unwarmed, board.not_prepared_count


class RunnerWatch:
    """The serving runners each object's last sync trusted, and what they counted then."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pods: dict[str, tuple[ParentKey, dict[str, tuple[Manifest, Reading]]]] = {}

    def note(self, uid: str, key: ParentKey, read: list[tuple[Manifest, RunnerBoard]]) -> None:
        """After a sync (in its thread): the Pods whose runners it read, and their readings."""
        found = {}
        for pod, doc in read:
            counted = reading(doc)
            if counted is not None:
                found[str(pod["metadata"].get("uid"))] = (pod, counted)
        with self._lock:
            if found:
                self._pods[uid] = (key, found)
            else:
                self._pods.pop(uid, None)

    def forget(self, uid: str) -> None:
        with self._lock:
            self._pods.pop(uid, None)

    def __len__(self) -> int:
        with self._lock:
            return sum(len(pods) for _, pods in self._pods.values())

    def changed(self, read: Read) -> list[ParentKey]:
        """Ask every noted runner once (blocking: call it in a thread); the objects whose
        runners count something new since their last sync."""
        with self._lock:
            noted = [
                (key, pod, before)
                for key, pods in self._pods.values()
                for pod, before in pods.values()
            ]

        def ask(pod: Manifest) -> Reading | None:
            try:
                return reading(read(pod))
            except Exception:  # no runner's document, whatever raised: the sync says so
                return None

        # Every runner at once (a bounded pool): one slow Pod holds one worker for at most its
        # read's deadline, never the others' answers (issue 34 case 4).
        woken: list[ParentKey] = []
        if not noted:
            return woken
        with ThreadPoolExecutor(min(POLL_WORKERS, len(noted)), "warmgate-runner-poll") as pool:
            answers = list(pool.map(ask, [pod for _, pod, _ in noted]))
        for (key, _, before), now in zip(noted, answers, strict=True):
            if now is not None and now != before and key not in woken:
                woken.append(key)
        return woken

    async def run(self, read: Read, wake: Wake, interval: float = POLL_SECONDS) -> None:
        """Poll until cancelled; nothing a Pod answers ends the task (issue 34 case 6)."""
        while True:
            await asyncio.sleep(interval)
            if not len(self):
                continue
            try:
                woken = await asyncio.to_thread(self.changed, read)
            except Exception:  # a bug, never a Pod's answer (`changed` takes those)
                LOG.exception("The poll of the serving runners failed; polling again")
                continue
            for key in woken:
                wake(key)
