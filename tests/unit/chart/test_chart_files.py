"""The Helm chart's static files: CRD copy in sync, every value typed, documented and listed."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from support.paths import REPO_ROOT

import warmgate
from warmgate.api.constants import CRD_FILE
from warmgate.api.crd import render_crd

CHART = REPO_ROOT / "charts" / "warmgate"
CHART_CRD = CHART / "files" / "crds" / Path(CRD_FILE).name
REGENERATE = (
    "stale chart CRD copy: run `warmgate crd --write --output crds/warmgate.dev_"
    "specdecodedeployments.yaml --output charts/warmgate/files/crds/warmgate.dev_"
    "specdecodedeployments.yaml` and commit both"
)
Schema = dict[str, Any]


def _schema() -> Schema:
    return dict(json.loads((CHART / "values.schema.json").read_text(encoding="utf-8")))


def _values() -> dict[str, Any]:
    return dict(yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8")))


def _resolve(node: Schema, root: Schema) -> Schema:
    ref = node.get("$ref")
    if ref:
        return dict(root["definitions"][ref.rsplit("/", 1)[1]])
    return node


def _leaves(node: Schema, root: Schema, path: str = "") -> Iterator[tuple[str, Schema]]:
    """Every value path of the schema: an object with named properties is a group, not a value."""
    node = _resolve(node, root)
    props = node.get("properties")
    if node.get("type") == "object" and props:
        for name, child in props.items():
            if path == "" and name == "global":
                continue  # helm's own, for subcharts
            yield from _leaves(child, root, f"{path}.{name}" if path else name)
    else:
        yield path, node


def _objects(node: Schema, root: Schema, path: str = "") -> Iterator[tuple[str, Schema]]:
    node = _resolve(node, root)
    if node.get("properties"):
        yield path, node
        for name, child in node["properties"].items():
            yield from _objects(child, root, f"{path}.{name}")


def _lookup(values: dict[str, Any], path: str) -> Any:
    node: Any = values
    for part in path.split("."):
        assert isinstance(node, dict), f"values.yaml has no {path}"
        assert part in node, f"values.yaml has no {path}"
        node = node[part]
    return node


def test_chart_crd_copy_matches_the_generated_crd() -> None:
    copy = CHART_CRD.read_text(encoding="utf-8")
    assert copy == render_crd(), REGENERATE
    assert copy == (REPO_ROOT / CRD_FILE).read_text(encoding="utf-8"), REGENERATE


def test_chart_has_no_crds_folder() -> None:
    # helm would install a crds/ folder itself, never upgrade it, and clash with the template.
    assert not (CHART / "crds").exists()


def test_schema_rejects_unknown_keys_at_every_level() -> None:
    schema = _schema()
    for path, node in _objects(schema, schema):
        assert node.get("additionalProperties") is False, f"{path or '<root>'} accepts unknown keys"


def test_every_value_has_a_schema_and_every_schema_entry_a_default() -> None:
    schema, values = _schema(), _values()
    paths = {path for path, _ in _leaves(schema, schema)}
    for path in paths:
        _lookup(values, path)

    def flat(node: dict[str, Any], prefix: str = "") -> Iterator[str]:
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else key
            if path in paths:
                yield path
            elif isinstance(value, dict) and value:
                yield from flat(value, path)
            else:
                yield path

    assert sorted(set(flat(values)) - paths) == [], "values.yaml keys missing from the schema"


def test_every_value_is_documented_in_values_yaml() -> None:
    """Each value's key line has a `# --` comment block right above it (helm-docs style)."""
    schema = _schema()
    paths = {path for path, _ in _leaves(schema, schema)}
    lines = (CHART / "values.yaml").read_text(encoding="utf-8").splitlines()
    stack: list[tuple[int, str]] = []
    documented: set[str] = set()
    for number, line in enumerate(lines):
        match = re.match(r"^( *)([A-Za-z][A-Za-z0-9]*):", line)
        if not match:
            continue
        indent, key = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([*(k for _, k in stack), key])
        stack.append((indent, key))
        above = number - 1
        while above >= 0 and lines[above].strip().startswith("#"):
            if lines[above].strip().startswith("# --"):
                documented.add(path)
                break
            above -= 1
    assert sorted(paths - documented) == []


def test_chart_readme_lists_every_value() -> None:
    schema = _schema()
    readme = (CHART / "README.md").read_text(encoding="utf-8")
    missing = [p for p, _ in _leaves(schema, schema) if f"| `{p}` |" not in readme]
    assert missing == []


def test_security_defaults() -> None:
    values = _values()
    pod, container = values["podSecurityContext"], values["securityContext"]
    assert pod["runAsNonRoot"] is True
    assert pod["runAsUser"] > 0
    assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["readOnlyRootFilesystem"] is True
    assert container["allowPrivilegeEscalation"] is False
    assert container["capabilities"] == {"drop": ["ALL"]}
    assert values["crds"] == {"install": True, "keep": True}


def test_app_version_follows_the_package() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert chart["appVersion"] == warmgate.__version__ == project["version"]


def test_dockerfile_is_lean_and_non_root() -> None:
    text = (REPO_ROOT / "Dockerfile").read_text(encoding="utf-8")
    instructions = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    body = "\n".join(instructions)
    assert "python:3.11-slim" in body
    assert "pip install ." in body
    assert "[dev]" not in body
    assert not re.search(r"torch|vllm", body, re.IGNORECASE)
    users = re.findall(r"^USER (\d+):(\d+)$", body, re.MULTILINE)
    assert users
    assert all(int(uid) > 0 for uid, _ in users)
    values = _values()
    assert users[-1] == (str(values["podSecurityContext"]["runAsUser"]),) * 2
    assert 'ENTRYPOINT ["warmgate", "operator"]' in body
