"""`warmgate operator`: run the kopf operator against the cluster of the kubeconfig or the pod."""

from __future__ import annotations

import argparse
import os


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "operator",
        help="Run the operator (kopf) for SpecDecodeDeployments",
        description=(
            "Logs in with the in-cluster service account or $KUBECONFIG. Runs standalone "
            "(one replica, no kopf peering)."
        ),
    )
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespace", "-n", action="append", default=[], help="watch this namespace (repeatable)"
    )
    scope.add_argument("--all-namespaces", "-A", action="store_true", help="watch every namespace")
    parser.add_argument(
        "--liveness", default=None, help="kopf liveness endpoint, e.g. http://0.0.0.0:8081/healthz"
    )
    parser.add_argument(
        "--metrics-port", type=int, default=None, help="serve /metrics on this port"
    )
    parser.add_argument("--verbose", action="store_true")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import kopf  # noqa: PLC0415 - the other commands must not pay kopf's import time

    from warmgate.handlers import kopf_handlers as operator  # noqa: PLC0415 - registers them

    if args.metrics_port:
        os.environ[operator.METRICS_PORT_ENV] = str(args.metrics_port)
    kopf.configure(verbose=args.verbose)
    namespaces = args.namespace or None
    kopf.run(
        standalone=True,
        clusterwide=args.all_namespaces or not namespaces,
        namespaces=namespaces or (),
        liveness_endpoint=args.liveness,
    )
    return 0
