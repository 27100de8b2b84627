"""The `warmgate` console script: one argparse sub-command per module in this package."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Protocol, cast

# Each module named here defines `register(subparsers)`, which adds its sub-command and sets
# `func(args) -> int` as the parser default. Add a line to plug in a new command.
COMMANDS: tuple[str, ...] = ("buckets", "crd", "demo", "operator", "plan")


class _CommandModule(Protocol):
    def register(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None: ...


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with every registered sub-command."""
    parser = argparse.ArgumentParser(
        prog="warmgate",
        description="Prove, warm and gate vLLM spec-decode shapes on Intel Gaudi.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = cast(_CommandModule, importlib.import_module(f"warmgate.cli.{name}"))
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    return int(func(args))


if __name__ == "__main__":
    sys.exit(main())
