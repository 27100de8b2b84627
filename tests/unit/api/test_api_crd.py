"""The generated CRD: committed file in sync, structural schema, rules, columns, subresources."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.api_models import all_models
from support.paths import CRD_PATH

from warmgate.api.constants import CRD_NAME
from warmgate.api.crd import build_crd, open_api_schema, render_crd
from warmgate.cli import main

Schema = dict[str, Any]


def _walk(node: Schema, path: str = "") -> Iterator[tuple[str, Schema]]:
    yield path, node
    for name, prop in node.get("properties", {}).items():
        yield from _walk(prop, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(node["additionalProperties"], f"{path}{{}}")


def _properties(node: Schema, path: str = "") -> Iterator[tuple[str, Schema]]:
    for where, schema in _walk(node, path):
        for name, prop in schema.get("properties", {}).items():
            yield f"{where}.{name}", prop


def test_committed_crd_is_up_to_date() -> None:
    committed = CRD_PATH.read_text(encoding="utf-8")
    assert committed == render_crd(), "stale CRD: run `warmgate crd --write` and commit it"


def test_schema_is_structural() -> None:
    text = yaml.safe_dump(open_api_schema())
    for keyword in ("$ref", "$defs", "title:", "nullable", "const:", "prefixItems"):
        assert keyword not in text
    for path, node in _walk(open_api_schema()):
        opaque = node.get("x-kubernetes-int-or-string") or node.get(
            "x-kubernetes-preserve-unknown-fields"
        )
        assert "type" in node or opaque, f"{path} has no type"
        assert not ("properties" in node and "additionalProperties" in node), path
        if "anyOf" in node:
            assert node.get("x-kubernetes-int-or-string"), f"{path}: anyOf only for int-or-string"


def test_every_property_has_a_description() -> None:
    missing = [path for path, prop in _properties(open_api_schema()) if not prop.get("description")]
    # The apiserver refuses anything but name/generateName under metadata, description included.
    assert missing == [".metadata"]


def test_lists_maps_and_rule_inputs_are_bounded_for_cel_cost() -> None:
    for path, node in _walk(open_api_schema()["properties"]["spec"], "spec"):
        if node.get("type") == "array":
            assert "maxItems" in node, f"{path} needs maxItems"
        if node.get("type") == "object" and "additionalProperties" in node:
            assert "maxProperties" in node, f"{path} needs maxProperties"
        if node.get("type") == "string" and "enum" not in node:
            assert "maxLength" in node, f"{path} needs maxLength"


def test_every_rule_is_published_with_its_message() -> None:
    from warmgate.api import SpecDecodeDeployment

    published = [
        (rule["rule"], rule["message"])
        for _, node in _walk(open_api_schema())
        for rule in node.get("x-kubernetes-validations", [])
    ]
    for model in all_models(SpecDecodeDeployment):
        for rule in model.cel_rules:
            assert (rule.cel, rule.message) in published, f"{model.__name__}: {rule.message}"


def test_names_subresources_and_columns() -> None:
    crd = build_crd()
    assert crd["metadata"]["name"] == CRD_NAME
    names = crd["spec"]["names"]
    assert (names["shortNames"], names["categories"]) == (["sdd"], ["warmgate"])
    version = crd["spec"]["versions"][0]
    scale = version["subresources"]["scale"]
    assert scale["specReplicasPath"] == ".spec.serving.replicas"
    spec = version["schema"]["openAPIV3Schema"]["properties"]
    assert spec["status"]["properties"]["serving"]["properties"]["selector"]["type"] == "string"
    columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
    assert {"Phase", "Ready", "Buckets", "Warmed", "Age", "Message"} <= set(columns)
    assert columns["Message"]["priority"] == 1
    assert columns["Ready"]["jsonPath"] == '.status.conditions[?(@.type=="Ready")].status'


def test_status_defaults_only_to_generation_0_and_conditions_are_a_map_keyed_by_type() -> None:
    """The one default: a status the operator has not written reads observedGeneration 0, so
    kstatus and Flux read a new object InProgress (issue 39); no field inside is defaulted."""
    status = open_api_schema()["properties"]["status"]
    assert status["default"] == {"observedGeneration": 0}
    inside = {k: v for k, v in status.items() if k != "default"}
    assert "default:" not in yaml.safe_dump(inside)
    conditions = status["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    required = ["type", "status", "lastTransitionTime", "reason", "message"]
    assert conditions["items"]["required"] == required


def test_nested_sections_default_to_empty_objects() -> None:
    spec = open_api_schema()["properties"]["spec"]["properties"]
    for section in ("buckets", "warmup", "serving"):
        assert spec[section]["default"] == {}
    assert spec["buckets"]["properties"]["coverage"]["default"] == {}


def test_cli_prints_and_writes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["crd"]) == 0
    assert capsys.readouterr().out == render_crd()
    target = tmp_path / "out" / "crd.yaml"
    assert main(["crd", "--write", "--output", str(target)]) == 0
    assert target.read_text(encoding="utf-8") == render_crd()
