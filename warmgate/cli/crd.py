"""`warmgate crd`: print the CustomResourceDefinition generated from the models, or write it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from warmgate.api.constants import CRD_FILE
from warmgate.api.crd import render_crd
from warmgate.api.reference import render_reference

REPO_ROOT = Path(__file__).resolve().parents[2]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `crd` sub-command."""
    parser = subparsers.add_parser(
        "crd",
        help="print (or --write) the SpecDecodeDeployment CRD generated from the models",
        description="Generate the SpecDecodeDeployment CRD from the pydantic models.",
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help=f"write the committed file ({CRD_FILE}) instead of printing",
    )
    parser.add_argument(
        "--output",
        type=Path,
        action="append",
        default=None,
        help="with --write: file(s) to write instead of the committed one (repeatable)",
    )
    parser.add_argument(
        "--reference",
        action="store_true",
        help="print the generated field reference of docs/api.md instead of the CRD",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print or write the CRD; return the exit code."""
    if args.reference:
        sys.stdout.write(render_reference())
        return 0
    text = render_crd()
    if not args.write:
        sys.stdout.write(text)
        return 0
    for path in args.output or [REPO_ROOT / CRD_FILE]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"Wrote {path}")
    return 0
