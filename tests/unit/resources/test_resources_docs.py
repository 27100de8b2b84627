"""docs/resources.md documents every public builder and the name limit the code uses."""

from __future__ import annotations

from support.paths import DOCS

from warmgate import resources

DOC = (DOCS / "resources.md").read_text(encoding="utf-8")


def test_every_public_name_is_documented() -> None:
    for name in resources.__all__:
        assert name in DOC, f"docs/resources.md does not mention {name}"


def test_the_documented_limit_is_the_constant() -> None:
    assert f"MAX_NAME = {resources.MAX_NAME}" in DOC
