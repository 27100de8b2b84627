"""The runner imports nothing outside the standard library (it runs in the user's vLLM image):
its own package and the shared contract (warmgate/contract/) only."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from runner_harness import REPO, stdlib_tree

PACKAGE = REPO / "warmgate"
# The runner and the documents it shares with the operator: what the init container copies.
SHIPPED = ("warmup", "contract")
SOURCES = sorted(p for top in SHIPPED for p in (PACKAGE / top).rglob("*.py"))
# Dotted names: "warmgate.warmup.cache", "warmgate.warmup.runner" (a package), "warmgate.contract"
MODULES = sorted(
    ".".join(("warmgate", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
    for p in SOURCES
)


def imported_modules(path: Path) -> set[str]:
    """Every absolute module named by an import statement anywhere in the file."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import"
            names.add(str(node.module))
    return names


def test_every_import_statement_is_stdlib_or_the_runner_itself() -> None:
    offenders = {}
    for path in SOURCES:
        bad = {
            name
            for name in imported_modules(path)
            if name.split(".")[0] not in sys.stdlib_module_names
            and name.split(".")[:2] not in (["warmgate", top] for top in SHIPPED)
        }
        if bad:
            offenders[str(path.relative_to(PACKAGE))] = sorted(bad)
    assert offenders == {}
    # the check really looked at both packages and the runner's sub-packages
    assert len(MODULES) >= 30
    assert "warmgate.contract.order" in MODULES


def test_modules_load_in_an_isolated_interpreter_without_site_packages(tmp_path: Path) -> None:
    tree = stdlib_tree(tmp_path / "tree")
    script = (
        "import sys, json, importlib\n"
        f"sys.path.insert(0, {str(tree)!r})\n"
        f"for name in {MODULES!r}:\n"
        "    importlib.import_module(name)\n"
        "tops = {m.split('.')[0] for m in sys.modules}\n"
        "extra = tops - set(sys.stdlib_module_names) - {'__main__'}\n"
        "print(json.dumps(sorted(extra)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["warmgate"]


def test_isolated_interpreter_really_lacks_site_packages(tmp_path: Path) -> None:
    # Guards the test above: under -I -S a third-party package must not be importable.
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", "import pydantic"],
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert done.returncode != 0
