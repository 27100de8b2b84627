"""docs/api.md carries the current generated field reference and names every condition type."""

from __future__ import annotations

from support.paths import DOCS

from warmgate.api.constants import CONDITION_TYPES, Reason
from warmgate.api.reference import render_reference

DOC = (DOCS / "api.md").read_text(encoding="utf-8")


def test_field_reference_is_current() -> None:
    assert render_reference() in DOC, "stale docs/api.md: paste `warmgate crd --reference`"


def test_every_condition_type_and_reason_is_documented() -> None:
    for type_ in CONDITION_TYPES:
        assert f"`{type_}`" in DOC
    reasons = [v for k, v in vars(Reason).items() if k.isupper()]
    for reason in reasons:
        assert f"`{reason}`" in DOC, reason
