"""Render the field reference of docs/api.md from the generated CRD schema (so it cannot drift)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from warmgate.api.crd import open_api_schema

Schema = dict[str, Any]
BEGIN = "<!-- BEGIN GENERATED FIELD REFERENCE (warmgate crd --reference) -->"
END = "<!-- END GENERATED FIELD REFERENCE -->"


def _type(node: Schema) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "quantity" if "maxLength" in node else "integer or string"
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return "object (opaque)"
    kind = str(node.get("type", "?"))
    if kind == "array":
        return f"[]{_type(node.get('items', {}))}"
    if kind == "object" and "additionalProperties" in node:
        return f"map[string]{_type(node['additionalProperties'])}"
    return kind


def _constraints(node: Schema) -> str:
    parts = []
    if "enum" in node:
        parts.append(" \\| ".join(f"`{value}`" for value in node["enum"]))
    if "minimum" in node or "maximum" in node:
        parts.append(f"{node.get('minimum', '')}..{node.get('maximum', '')}")
    for key, label in (
        ("maxLength", "len ≤"),
        ("maxItems", "items ≤"),
        ("maxProperties", "keys ≤"),
    ):
        if key in node:
            parts.append(f"{label} {node[key]}")
    return "; ".join(parts)


def _default(node: Schema) -> str:
    return f"`{json.dumps(node['default'])}`" if "default" in node else ""


def _rows(node: Schema, path: str, required: bool) -> Iterator[str]:
    description = " ".join(str(node.get("description", "")).split()).replace("|", "\\|")
    mark = " **(required)**" if required else ""
    cells = [f"`{path}`{mark}", _type(node), _default(node), _constraints(node), description]
    yield "| " + " | ".join(cells) + " |"
    child = node.get("items", {}) if node.get("type") == "array" else node
    needed = set(child.get("required", []))
    for name, prop in child.get("properties", {}).items():
        suffix = "[]" if child is not node else ""
        yield from _rows(prop, f"{path}{suffix}.{name}", name in needed)


def _rules(node: Schema, path: str) -> Iterator[str]:
    for rule in node.get("x-kubernetes-validations", []):
        field = path + rule.get("fieldPath", "")
        message = rule["message"].replace("|", "\\|")
        yield f"| `{field}` | {message} |"
    if node.get("type") == "array":
        yield from _rules(node.get("items", {}), f"{path}[]")
    for name, prop in node.get("properties", {}).items():
        yield from _rules(prop, f"{path}.{name}")


def render_reference() -> str:
    """The generated part of docs/api.md: every field, then every cross-field rule."""
    root = open_api_schema()["properties"]
    header = "| field | type | default | allowed | description |\n|---|---|---|---|---|"
    lines = [BEGIN, "", "### spec", "", header, *_rows(root["spec"], "spec", True)]
    lines += ["", "### status", "", header, *_rows(root["status"], "status", False)]
    lines += ["", "### Cross-field rules (CEL)", "", "| field | message |", "|---|---|"]
    lines += [*_rules(root["spec"], "spec"), "", END]
    return "\n".join(lines) + "\n"
