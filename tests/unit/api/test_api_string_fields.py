"""Every string the spec accepts is constrained: a pattern, an enum or a CEL rule (issue 11).

A string that reaches a child object or an argv unchecked is the class of admission hole the
corpus found (`spec.image` with a space, `"--max-model-len 1024"` as one extraArgs element):
the server accepted the object and the operator failed later, or the engine ran with a flag
the operator owns. Free text is allowed only where any value is valid for Kubernetes and vLLM.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from warmgate.api import parse_manifest
from warmgate.api.crd import open_api_schema
from warmgate.api.resource import IMAGE_REFERENCE

Schema = dict[str, Any]
# Strings where any text is a valid value: an environment value, an annotation value, a status
# message, an opaque object's content.
FREE_TEXT = {".engine.env[].value", ".serving.podAnnotations{}"}
# Strings checked by a CEL rule of their parent (the rule's message names the field).
BY_RULE = {".image", ".engine.extraArgs[]"}


def _strings(node: Schema, path: str = "") -> Iterator[tuple[str, Schema, Schema | None]]:
    """(path, string node, the map that holds it as a key or None) for every string."""
    if node.get("type") == "string":
        yield path, node, None
    for name, prop in node.get("properties", {}).items():
        yield from _strings(prop, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _strings(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield f"{path}{{key}}", {"type": "string"}, node
        yield from _strings(node["additionalProperties"], f"{path}{{}}")


def _rules_about(parent: Schema, field: str) -> list[str]:
    return [r["rule"] for r in parent.get("x-kubernetes-validations", []) if field in r["rule"]]


def _parent_of(root: Schema, path: str) -> tuple[Schema, str]:
    """The schema object holding the last field of ``path``, and that field's name."""
    parts = path.lstrip(".").replace("[]", "").split(".")
    node = root
    for part in parts[:-1]:
        node = node["properties"][part]
        node = node.get("items", node) if node.get("type") == "array" else node
    return node, parts[-1].split("{", 1)[0]


def test_every_spec_string_is_constrained() -> None:
    spec = open_api_schema()["properties"]["spec"]
    loose = []
    for path, node, holder in _strings(spec):
        if path in FREE_TEXT or "pattern" in node or "enum" in node:
            continue
        if node.get("x-kubernetes-int-or-string"):
            continue
        parent, field = _parent_of(spec, path.removesuffix("{key}").removesuffix("[]"))
        by_rule = holder is not None or path in BY_RULE
        if by_rule and any(".matches(" in rule for rule in _rules_about(parent, field)):
            continue
        loose.append(path)
    assert loose == []


@pytest.mark.parametrize(
    "image",
    [
        "registry.example.com/ml/vllm-gaudi:v0.26.0",
        "localhost/warmgate-standin-engine:63d280d1dece80d4",
        "vault.habana.ai/gaudi-docker/1.22.0/ubuntu22.04/habanalabs/pytorch-installer-2.7.1:latest",
        "registry.example.com:5000/ml/vllm-gaudi@sha256:" + "a" * 64,
        "vllm-gaudi",
    ],
)
def test_real_image_references_pass(image: str) -> None:
    import re

    assert re.fullmatch(IMAGE_REFERENCE, image)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (("image",), "registry.example.com/ml/vllm-gaudi:v0.26.0 --privileged"),
        (("image",), "registry.example.com/ml/vllm-gaudi:v0.26.0\n"),
        (("model", "name"), "meta-llama/Llama-3.1-8B-Instruct\t"),
        (("model", "revision"), "main "),
        (("engine", "extraArgs"), ["--max-num-seqs\t8"]),
        (("engine", "extraArgs"), ["--speculative_config={}"]),
        (("engine", "extraArgs"), ["--spec={}"]),
        (("engine", "extraArgs"), ["-t", "4"]),
    ],
)
def test_a_hole_of_the_class_is_refused(field: tuple[str, ...], value: Any) -> None:
    from support.examples import example_doc

    doc = example_doc("minimal-ngram")
    target = doc["spec"]
    for part in field[:-1]:
        target = target.setdefault(part, {})
    target[field[-1]] = value
    with pytest.raises(ValueError, match=field[-1]):
        parse_manifest(doc)


def test_flag_values_with_spaces_stay_allowed() -> None:
    from support.examples import example_doc

    args = ["--chat-template", "{% for m in messages %}{{ m }} {% endfor %}", "--seed=1 "]
    doc = example_doc("minimal-ngram", engine={"maxModelLen": 4096, "extraArgs": args})
    assert parse_manifest(doc).spec.engine.extra_args == args
