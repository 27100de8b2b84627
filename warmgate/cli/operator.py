"""`warmgate operator`: run the kopf operator against the cluster of the kubeconfig or the pod."""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import sys

from warmgate.settings import Settings, SettingsError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "operator",
        help="Run the operator (kopf) for SpecDecodeDeployments",
        description=(
            "Logs in with the in-cluster service account or $KUBECONFIG. Reads its settings "
            "once at start-up: WARMGATE_OPERATOR_IMAGE, WARMGATE_RESYNC_SECONDS, "
            "WARMGATE_SYNC_WORKERS, WARMGATE_PLAN_CACHE_MB, WARMGATE_API_CONNECT_TIMEOUT, "
            "WARMGATE_API_READ_TIMEOUT, WARMGATE_STALL_SECONDS, and WARMGATE_LEADER_LEASE with "
            "WARMGATE_LEASE_NAMESPACE, WARMGATE_LEASE_DURATION, WARMGATE_LEASE_RENEW_DEADLINE "
            "and WARMGATE_LEASE_RETRY_PERIOD (leader election on a Lease: several replicas, "
            "one of which acts; unset runs standalone, for one replica). See docs/operator.md."
        ),
    )
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespace", "-n", action="append", default=[], help="watch this namespace (repeatable)"
    )
    scope.add_argument("--all-namespaces", "-A", action="store_true", help="watch every namespace")
    parser.add_argument(
        "--liveness",
        default=None,
        help="serve the liveness probe here, e.g. http://0.0.0.0:8081/healthz",
    )
    parser.add_argument(
        "--metrics-port", type=int, default=None, help="serve /metrics on this port"
    )
    parser.add_argument("--verbose", action="store_true")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the settings once, then run kopf with them; 2 for settings it cannot use."""
    try:
        settings = Settings.from_environment(os.environ, metrics_port=args.metrics_port)
    except SettingsError as exc:
        print(f"warmgate operator: {exc}", file=sys.stderr)
        return 2
    limit_malloc_arenas()
    # Imported here: the other commands must not pay kopf's import time.
    from warmgate.runtime import kopf_handlers  # noqa: PLC0415

    namespaces = () if args.all_namespaces else tuple(args.namespace)
    kopf_handlers.run(
        settings, namespaces=namespaces, liveness_endpoint=args.liveness, verbose=args.verbose
    )
    return 0


# glibc's mallopt parameter M_ARENA_MAX (malloc.h).
M_ARENA_MAX = -8
MALLOC_ARENAS = 2


def limit_malloc_arenas() -> bool:
    """At most two glibc malloc arenas, before any thread starts (like MALLOC_ARENA_MAX=2).

    glibc gives each thread that allocates under contention an arena of its own; with the sync
    threads, freed memory stays spread over many of them and the operator's resident memory
    only grows. False where the C library is not glibc (nothing to do there).
    """
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_ARENA_MAX, MALLOC_ARENAS))
    except (OSError, AttributeError):
        return False
