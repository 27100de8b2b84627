"""The examples: each says what it shows on its first line, loads, and covers the issue's cases."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.paths import EXAMPLES

from warmgate.api import SpecDecodeDeployment, load_manifest


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_starts_with_a_comment_and_loads(path: Path) -> None:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# ")
    assert len(first) > 20
    load_manifest(path)


def _find(method: str, k: int, device: str) -> list[SpecDecodeDeployment]:
    found = [load_manifest(p) for p in EXAMPLES]
    return [
        s
        for s in found
        if (s.spec.speculative.method, s.spec.speculative.num_speculative_tokens, s.spec.device)
        == (method, k, device)
    ]


def test_the_three_cases_the_issue_asks_for_exist() -> None:
    eagle3 = [s for s in _find("eagle3", 2, "gaudi2") if "Llama-3.1-8B" in s.spec.model.name]
    assert eagle3
    assert all(s.spec.speculative.draft_model is not None for s in eagle3)
    ngram = [s for s in _find("ngram", 3, "gaudi3") if "70B" in s.spec.model.name]
    assert [s.spec.engine.tensor_parallel_size for s in ngram] == [4]
    mtp = [s for device in ("gaudi2", "gaudi3") for s in _find("mtp", 1, device)]
    assert mtp
    assert all(s.spec.speculative.draft_model is None for s in mtp)
