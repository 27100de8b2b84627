"""What a runner's status port answers is bounded and checked before anything reads it."""

from __future__ import annotations

import json

import pytest

from warmgate.kube.runner_endpoints import (
    MAX_BYTES,
    RunnerDocError,
    depth,
    parse_board,
    parse_doc,
)


def test_a_runner_document_parses() -> None:
    doc = {"v": 1, "mode": "serve", "unwarmed": ["('decode', 8, 1, 64)"], "progress": {"x": [1]}}
    assert parse_doc(json.dumps(doc).encode()) == doc


def test_deep_nesting_is_refused_before_json_would_recurse() -> None:
    """json.loads raises RecursionError (no ValueError) past ~1,000 levels: it would have ended
    every sync of the object (issue 23 item 4)."""
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(RunnerDocError, match="nested deeper"):
        parse_doc(deep[:MAX_BYTES])
    assert depth(b'{"a": "[[[[[[[[[[[[", "b": [[1]]}') == 3  # brackets in strings do not count


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (b"x" * (MAX_BYTES + 1), "larger"),
        (b"not json", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
    ],
)
def test_what_is_no_runner_document_is_refused_with_its_reason(text: bytes, why: str) -> None:
    with pytest.raises(RunnerDocError, match=why):
        parse_doc(text)


def test_an_answer_of_no_known_mode_is_no_runners_board() -> None:
    assert parse_board(json.dumps({"mode": "serve", "unwarmed": ["x"]}).encode()) is not None
    with pytest.raises(RunnerDocError, match="no known mode"):
        parse_board(json.dumps({"mode": "train"}).encode())
