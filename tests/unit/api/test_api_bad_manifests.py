"""The bad-manifest corpus: pydantic refuses every case too, and docs/validation.md lists it."""

from __future__ import annotations

import pytest
from support.bad_manifests import BadCase, base_manifest, load_cases
from support.paths import DOCS

from warmgate.api import ManifestError, parse_manifest
from warmgate.api.base import ApiModel

CASES = load_cases()


def test_the_corpus_is_large_and_unique() -> None:
    names = [case.name for case in CASES]
    assert len(names) >= 25
    assert len(set(names)) == len(names)


def test_the_base_manifest_is_valid() -> None:
    parse_manifest(base_manifest())


def _field_of(expect: str) -> str:
    """The last path segment the server names: `maxNumSeqs` in `spec.engine.maxNumSeqs: ...`."""
    if expect.startswith("strict decoding error"):
        return expect.rsplit(".", 1)[-1].rstrip('"')
    path = expect.split(":", 1)[0]
    return path.rsplit(".", 1)[-1].split("[", 1)[0]


def _rule_messages() -> list[str]:
    from warmgate.api import SpecDecodeDeployment

    seen: set[type[ApiModel]] = set()
    todo: list[type[ApiModel]] = [SpecDecodeDeployment]
    while todo:
        model = todo.pop()
        seen.add(model)
        for field in model.model_fields.values():
            todo.extend(m for m in _models_in(field.annotation) if m not in seen)
    return [rule.message for model in seen for rule in model.cel_rules]


def _models_in(annotation: object) -> list[type[ApiModel]]:
    from typing import get_args

    from warmgate.api.base import ApiModel

    found = (
        [annotation] if isinstance(annotation, type) and issubclass(annotation, ApiModel) else []
    )
    return found + [m for arg in get_args(annotation) for m in _models_in(arg)]


RULE_MESSAGES = _rule_messages()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_pydantic_refuses_what_the_server_refuses(case: BadCase) -> None:
    with pytest.raises(ManifestError) as info:
        parse_manifest(case.manifest)
    message = str(info.value)
    assert _field_of(case.expect[0]) in message, message
    # A CEL rule refused it on the server: pydantic must give the very same message.
    for rule_message in RULE_MESSAGES:
        if rule_message[:60] in case.expect[0]:
            assert rule_message in message


def test_docs_list_every_case_with_its_message() -> None:
    doc = (DOCS / "validation.md").read_text(encoding="utf-8")
    for case in CASES:
        assert f"`{case.name}`" in doc, f"docs/validation.md lacks {case.name}"
        for expect in case.expect:
            assert expect.replace("|", "\\|") in doc, f"docs/validation.md lacks {expect!r}"
