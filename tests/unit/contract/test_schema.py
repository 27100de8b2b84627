"""The contract's shared reading and writing helpers (contract/schema.py)."""

from __future__ import annotations

import json

from warmgate.contract.board import SpecDecodeFigures
from warmgate.contract.order import ProbeStep
from warmgate.contract.sweepplan import SweepStepSpec


def test_a_documents_json_is_its_fields_in_order_with_tuples_as_lists() -> None:
    step = SweepStepSpec("s", 2, 1, 23, (("decode", 2, 1, 128),), 1, (2, 2), (9, 26), (0.6, 2.9))
    assert step.to_json() == {
        "name": "s",
        "concurrency": 2,
        "prompt_tokens": 1,
        "max_tokens": 23,
        "expected": [["decode", 2, 1, 128]],
        "new": 1,
        "decode_s_range": [2, 2],
        "engine_steps": [9, 26],
        "seconds": [0.6, 2.9],
    }
    assert list(step.to_json()) == list(step.__dataclass_fields__)
    probe = ProbeStep("p", 4, 8, 16, "varied").to_json()
    assert json.dumps(probe) == (
        '{"name": "p", "concurrency": 4, "prompt_tokens": 8, "max_tokens": 16, '
        '"token_pattern": "varied"}'
    )
    figures = SpecDecodeFigures(drafts=1, per_position_acceptance_rate=(0.5, 0.25)).to_json()
    assert figures["per_position_acceptance_rate"] == [0.5, 0.25]
    assert SpecDecodeFigures.from_json(figures) == SpecDecodeFigures(
        drafts=1, per_position_acceptance_rate=(0.5, 0.25)
    )
