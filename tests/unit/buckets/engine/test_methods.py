"""The method table is the one list of speculative methods, and the CRD follows it."""

from __future__ import annotations

from typing import get_args

from warmgate.api.crd import build_crd
from warmgate.buckets.engine.methods import METHOD_NAMES, METHODS, SpeculativeMethod


def test_the_literal_and_the_table_name_the_same_methods_in_the_same_order() -> None:
    assert tuple(METHODS) == get_args(SpeculativeMethod) == METHOD_NAMES


def test_the_crd_enum_and_rules_follow_the_table() -> None:
    crd = build_crd()
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    speculative = schema["properties"]["spec"]["properties"]["speculative"]
    assert speculative["properties"]["method"]["enum"] == list(METHOD_NAMES)
    rules = " ".join(r["rule"] for r in speculative["x-kubernetes-validations"])
    for method, traits in METHODS.items():
        if traits.draft_model == "required":
            assert f"'{method}'" in rules.split("has(self.draftModel)")[0]
