"""Child names fit the 63-character limit, are deterministic and never collide when truncated."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.resource_cases import EXAMPLES, UID, make_case

from warmgate.api.constants import LABEL_COMPONENT, LABEL_NAME, LABEL_PLAN_HASH
from warmgate.resources.names import (
    DNS_1035_LABEL,
    LABEL_VALUE,
    MAX_NAME,
    child_name,
    label_value,
    labels,
    owner_reference,
    selector_labels,
)

# SpecDecodeDeployment names are DNS-1123 subdomains (the apiserver's rule for custom objects).
_LABEL = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)
PARENTS = st.lists(_LABEL, min_size=1, max_size=12).map(".".join).filter(lambda s: len(s) <= 253)
COMPONENTS = st.sampled_from(["warmup", "plan", "serving", "recipe-cache"])
HASHES = st.one_of(st.none(), st.text("0123456789abcdef", min_size=10, max_size=64))


def test_the_limit_is_the_dns_label_limit() -> None:
    assert MAX_NAME == 63


def test_short_names_read_as_parent_component_hash() -> None:
    assert child_name("llama", "warmup", "3f2a9c0d41e7aa") == "llama-warmup-3f2a9c0d41"
    assert child_name("llama", "serving") == "llama-serving"
    assert child_name("llama", "plan", "sha256:3f2a9c0d41e7") == "llama-plan-3f2a9c0d41"


def test_a_long_parent_is_cut_and_tagged() -> None:
    name = child_name("a" * 70, "warmup", "3f2a9c0d41")
    assert len(name) == MAX_NAME
    assert name.endswith("-warmup-3f2a9c0d41")
    assert name.startswith("a" * 30)


def test_dots_and_leading_digits_become_a_dns_1035_label() -> None:
    assert DNS_1035_LABEL.match(child_name("llama.v1", "serving"))
    assert DNS_1035_LABEL.match(child_name("70b", "serving"))
    assert child_name("llama.v1", "serving") != child_name("llama-v1", "serving")


@given(PARENTS, COMPONENTS, HASHES)
def test_every_name_is_a_deterministic_dns_label(
    parent: str, component: str, h: str | None
) -> None:
    name = child_name(parent, component, h)
    assert len(name) <= MAX_NAME
    assert DNS_1035_LABEL.match(name), name
    assert name == child_name(parent, component, h)


@given(st.lists(PARENTS, min_size=2, max_size=20, unique=True), COMPONENTS, HASHES)
def test_distinct_parents_never_share_a_child(
    parents: list[str], component: str, h: str | None
) -> None:
    names = {child_name(p, component, h) for p in parents}
    assert len(names) == len(parents)


@given(
    st.text("abcdefghij", min_size=40, max_size=60),
    st.lists(
        st.text("0123456789abcdef", min_size=10, max_size=10), min_size=2, max_size=5, unique=True
    ),
)
def test_a_shared_long_prefix_keeps_plans_apart(prefix: str, hashes: list[str]) -> None:
    parents = [prefix + "x" * 20, prefix + "y" * 20]
    names = {child_name(p, "warmup", h) for p in parents for h in hashes}
    assert len(names) == len(parents) * len(hashes)


@given(st.text(min_size=0, max_size=300))
def test_label_values_are_valid(value: str) -> None:
    out = label_value(value)
    assert len(out) <= MAX_NAME
    assert LABEL_VALUE.match(out), out


def test_labels_carry_the_prefixed_keys_and_the_selector_omits_the_plan_hash() -> None:
    sdd = make_case(EXAMPLES[0]).sdd
    full = labels(sdd, "serving", "ab" * 32)
    assert full["app.kubernetes.io/managed-by"] == "warmgate"
    assert full[LABEL_NAME] == sdd.metadata.name
    assert full[LABEL_COMPONENT] == "serving"
    assert full[LABEL_PLAN_HASH] == "ab" * 8
    assert LABEL_PLAN_HASH not in selector_labels(sdd, "serving")
    assert selector_labels(sdd, "serving").items() <= full.items()


def test_owner_reference_is_the_controller_and_needs_a_uid() -> None:
    sdd = make_case(EXAMPLES[0]).sdd
    ref = owner_reference(sdd)
    assert ref["uid"] == UID
    assert ref["controller"] is True
    assert ref["blockOwnerDeletion"] is True
    assert ref["apiVersion"] == "warmgate.dev/v1alpha1"
    assert ref["kind"] == "SpecDecodeDeployment"
    no_uid = sdd.model_copy(update={"metadata": sdd.metadata.model_copy(update={"uid": None})})
    with pytest.raises(ValueError, match="uid"):
        owner_reference(no_uid)
