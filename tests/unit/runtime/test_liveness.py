"""The liveness endpoint (runtime/liveness.py): green while syncs make progress, red when not."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request

import pytest

from warmgate.runtime.liveness import Heartbeat, Liveness, SyncProgress, serve


class Clock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


def test_waiting_syncs_with_none_finished_for_the_bound_is_a_stall() -> None:
    clock = Clock()
    progress = SyncProgress(60.0, clock)
    clock.now += 1000
    assert progress.stalled() is None  # nothing waits: an idle operator is alive
    progress.started()
    clock.now += 59
    assert progress.stalled() is None
    clock.now += 2
    assert progress.stalled() == "1 sync(s) wait and none finished for 61 s"
    progress.finished()
    assert progress.stalled() is None


def test_a_busy_operator_whose_syncs_keep_finishing_is_not_stalled() -> None:
    clock = Clock()
    progress = SyncProgress(60.0, clock)
    for _ in range(16):  # a burst: 16 threads busy, more queued
        progress.started()
    for _ in range(100):
        clock.now += 30
        progress.finished()  # one ends, another starts
        progress.started()
        assert progress.stalled() is None
    clock.now += 61  # then none ends any more: 16 stuck
    assert progress.stalled() == "16 sync(s) wait and none finished for 61 s"


def test_a_loop_that_stopped_beating_fails() -> None:
    clock = Clock()
    heartbeat = Heartbeat(30.0, clock)
    clock.now += 29
    assert heartbeat.stalled() is None
    clock.now += 2
    assert heartbeat.stalled() == "the event loop did not run for 31 s"
    heartbeat.beat()
    assert heartbeat.stalled() is None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_endpoint_answers_200_or_503_with_the_failures() -> None:
    health = Liveness()
    reason: list[str | None] = [None]
    health.add("syncs", lambda: reason[0])
    port = _free_port()
    server = serve(f"http://127.0.0.1:{port}/healthz", health)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as ok:
            assert (ok.status, json.load(ok)) == (200, {"ok": True, "failures": {}})
        reason[0] = "16 sync(s) wait and none finished for 301 s"
        with pytest.raises(urllib.error.HTTPError) as failed:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5)
        with failed.value:
            assert failed.value.code == 503
            assert json.load(failed.value)["failures"] == {"syncs": reason[0]}
        health.remove("syncs")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as ok:
            assert ok.status == 200
        with pytest.raises(urllib.error.HTTPError) as other:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/other", timeout=5)
        with other.value:
            assert other.value.code == 404
    finally:
        server.shutdown()
        server.server_close()


def test_an_endpoint_that_is_no_http_url_is_refused() -> None:
    with pytest.raises(ValueError, match="--liveness"):
        serve("tcp://0.0.0.0", Liveness())
