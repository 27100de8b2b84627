"""The runner imports nothing outside the standard library (it runs in the user's vLLM image)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from runner_harness import REPO, stdlib_tree

RUNNER_DIR = REPO / "warmgate" / "warmup"
SOURCES = sorted(RUNNER_DIR.rglob("*.py"))
# Dotted names below warmgate.warmup: "cache", "runner.run", "runner" (a package), ...
MODULES = sorted(
    ".".join(p.relative_to(RUNNER_DIR).with_suffix("").parts).removesuffix(".__init__")
    for p in SOURCES
    if p.name != "__init__.py" or p.parent != RUNNER_DIR
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
            and not (name == "warmgate.warmup" or name.startswith("warmgate.warmup."))
        }
        if bad:
            offenders[str(path.relative_to(RUNNER_DIR))] = sorted(bad)
    assert offenders == {}
    assert len(MODULES) >= 20  # the check really looked at the package and its sub-packages


def test_modules_load_in_an_isolated_interpreter_without_site_packages(tmp_path: Path) -> None:
    tree = stdlib_tree(tmp_path / "tree")
    script = (
        "import sys, json, importlib\n"
        f"sys.path.insert(0, {str(tree)!r})\n"
        f"for name in {MODULES!r}:\n"
        "    importlib.import_module('warmgate.warmup.' + name)\n"
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
