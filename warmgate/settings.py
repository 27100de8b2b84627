"""The operator's settings: built once at start-up from its flags and environment, then frozen."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

OPERATOR_IMAGE_ENV: Final = "WARMGATE_OPERATOR_IMAGE"
RESYNC_ENV: Final = "WARMGATE_RESYNC_SECONDS"
SYNC_WORKERS_ENV: Final = "WARMGATE_SYNC_WORKERS"
PLAN_CACHE_ENV: Final = "WARMGATE_PLAN_CACHE_MB"
RUNNER_POLL_ENV: Final = "WARMGATE_RUNNER_POLL_SECONDS"
# The serving runners are asked for new unwarmed shapes this often between syncs.
DEFAULT_RUNNER_POLL_SECONDS: Final = 30.0
API_CONNECT_TIMEOUT_ENV: Final = "WARMGATE_API_CONNECT_TIMEOUT"
API_READ_TIMEOUT_ENV: Final = "WARMGATE_API_READ_TIMEOUT"
STALL_ENV: Final = "WARMGATE_STALL_SECONDS"
LEASE_ENV: Final = "WARMGATE_LEADER_LEASE"
# The operator's own namespace (the chart sets it from the downward API) and the opt-in to
# serve SpecDecodeDeployments there anyway (issue 34 case 9).
OPERATOR_NAMESPACE_ENV: Final = "WARMGATE_OPERATOR_NAMESPACE"
ALLOW_OPERATOR_NAMESPACE_ENV: Final = "WARMGATE_ALLOW_OPERATOR_NAMESPACE"
LEASE_NAMESPACE_ENV: Final = "WARMGATE_LEASE_NAMESPACE"
LEASE_DURATION_ENV: Final = "WARMGATE_LEASE_DURATION"
LEASE_RENEW_DEADLINE_ENV: Final = "WARMGATE_LEASE_RENEW_DEADLINE"
LEASE_RETRY_PERIOD_ENV: Final = "WARMGATE_LEASE_RETRY_PERIOD"
# Replaced by the Lease (issue 23 item 9): named in the error, so an old setting is not ignored.
OLD_PEERING_ENVS: Final = ("WARMGATE_PEERING", "WARMGATE_PEERING_LIFETIME")
DEFAULT_OPERATOR_IMAGE: Final = "ghcr.io/warmgate/warmgate:0.1.0"
# Children are watched (kube/children.py): the resync is only a safety net.
DEFAULT_RESYNC_SECONDS: Final = 900.0
DEFAULT_SYNC_WORKERS: Final = 16
MAX_SYNC_WORKERS: Final = 256
DEFAULT_PLAN_CACHE_MB: Final = 64
MAX_PLAN_CACHE_MB: Final = 65536
# A request's connect (TCP and TLS) and read (between two reads of the answer) timeouts.
DEFAULT_API_CONNECT_TIMEOUT: Final = 5.0
DEFAULT_API_READ_TIMEOUT: Final = 30.0
# The liveness endpoint fails when syncs wait and none finished for this long.
DEFAULT_STALL_SECONDS: Final = 300.0
# Leader election: client-go's semantics; shorter than its defaults (15, 10, 2 s) so that a
# standby takes over a crashed leader within about 10 s, as fast as kopf peering's 15 s lifetime
# did on average (docs/benchmarks.md, "Operator failover"); the leader still gets three tries at
# renewing (each request at most 3.5 s) before it gives up, 3 s before a standby may take over.
DEFAULT_LEASE_DURATION: Final = 10.0
DEFAULT_LEASE_RENEW_DEADLINE: Final = 7.0
DEFAULT_LEASE_RETRY_PERIOD: Final = 2.0
# client-go's JitterFactor: the renew deadline must exceed the retry period by this factor.
LEASE_JITTER: Final = 1.2
# A Lease's name: a DNS-1123 subdomain, as every object name.
_DNS_SUBDOMAIN: Final = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class SettingsError(ValueError):
    """A setting the operator cannot use; the message names the variable or flag."""


@dataclass(frozen=True)
class LeaseSettings:
    """Leader election on one Lease, with client-go's semantics (`runtime/leader.py`)."""

    name: str
    # The Lease's namespace; None: the operator Pod's own, else the first watched one.
    namespace: str | None = None
    # A standby takes over once the Lease's record has not changed for this long, measured
    # on its own monotonic clock from when it saw the record change.
    duration: float = DEFAULT_LEASE_DURATION
    # The leader stops (exits) when it could not renew for this long, on its own clock.
    renew_deadline: float = DEFAULT_LEASE_RENEW_DEADLINE
    # Seconds between two attempts to acquire or renew.
    retry_period: float = DEFAULT_LEASE_RETRY_PERIOD


@dataclass(frozen=True)
class Settings:
    """What the operator is configured with, read once and passed to whoever needs it."""

    # The image whose runner files the warmup Job's init container copies into the vLLM image;
    # the chart sets it to the operator's own image.
    operator_image: str = DEFAULT_OPERATOR_IMAGE
    # The mean interval of the safety resync of every object (jittered by +-20%); a change of
    # the object or of a watched child triggers a sync at once.
    resync_seconds: float = DEFAULT_RESYNC_SECONDS
    # Where /metrics is served; None serves no metrics.
    metrics_port: int | None = None
    # Threads that run syncs (kopf's executor); the one API client's connection pool holds as
    # many connections, so no call waits for one or opens a throw-away connection.
    sync_workers: int = DEFAULT_SYNC_WORKERS
    # The memory bound (MiB) of the planning results shared by objects with the same inputs.
    plan_cache_mb: int = DEFAULT_PLAN_CACHE_MB
    # How often the serving Pods' runners are asked, between syncs, whether they ran a new
    # unwarmed shape (through their Pod IP, no API request): the bound of drift detection.
    runner_poll_seconds: float = DEFAULT_RUNNER_POLL_SECONDS
    # Every request of the operator's API clients (its own and kopf's): seconds to connect
    # (TCP and TLS) and to wait for the answer's next bytes; then it fails as transient.
    api_connect_timeout: float = DEFAULT_API_CONNECT_TIMEOUT
    api_read_timeout: float = DEFAULT_API_READ_TIMEOUT
    # The liveness endpoint fails when syncs wait and none finished for this many seconds.
    stall_seconds: float = DEFAULT_STALL_SECONDS
    # Leader election on a coordination.k8s.io Lease (several replicas, one acts); None runs
    # standalone, which is safe with one replica only.
    lease: LeaseSettings | None = None
    # The namespace the operator runs in (None: unknown, e.g. a process outside the cluster):
    # a SpecDecodeDeployment there is refused (Stalled, OperatorNamespace) unless allowed, so
    # the users of SpecDecodeDeployments need no rights where `edit` reaches the operator's Pod
    # (`pods/exec`: its token) and Lease.
    operator_namespace: str | None = None
    allow_operator_namespace: bool = False

    @classmethod
    def from_environment(
        cls, environ: Mapping[str, str], *, metrics_port: int | None = None
    ) -> Settings:
        """The settings from `WARMGATE_*` variables (unset or empty: the default) and flags."""
        image = environ.get(OPERATOR_IMAGE_ENV, "").strip() or DEFAULT_OPERATOR_IMAGE
        resync = _seconds(environ, RESYNC_ENV, DEFAULT_RESYNC_SECONDS)
        if metrics_port is not None and not 0 < metrics_port < 65536:
            raise SettingsError(f"--metrics-port: {metrics_port} is not a TCP port (1-65535)")
        return cls(
            operator_image=image,
            resync_seconds=resync,
            metrics_port=metrics_port or None,
            sync_workers=_count(environ, SYNC_WORKERS_ENV, DEFAULT_SYNC_WORKERS, MAX_SYNC_WORKERS),
            plan_cache_mb=_count(environ, PLAN_CACHE_ENV, DEFAULT_PLAN_CACHE_MB, MAX_PLAN_CACHE_MB),
            runner_poll_seconds=_seconds(environ, RUNNER_POLL_ENV, DEFAULT_RUNNER_POLL_SECONDS),
            api_connect_timeout=_seconds(
                environ, API_CONNECT_TIMEOUT_ENV, DEFAULT_API_CONNECT_TIMEOUT
            ),
            api_read_timeout=_seconds(environ, API_READ_TIMEOUT_ENV, DEFAULT_API_READ_TIMEOUT),
            stall_seconds=_seconds(environ, STALL_ENV, DEFAULT_STALL_SECONDS),
            lease=_lease(environ),
            operator_namespace=_object_name(environ, OPERATOR_NAMESPACE_ENV),
            allow_operator_namespace=_flag(environ, ALLOW_OPERATOR_NAMESPACE_ENV),
        )


def _flag(environ: Mapping[str, str], name: str) -> bool:
    """true or false (unset or empty: false)."""
    text = environ.get(name, "").strip().lower()
    if text in ("", "false", "0", "no"):
        return False
    if text in ("true", "1", "yes"):
        return True
    raise SettingsError(f"{name}: {text!r} is neither true nor false")


def _seconds(environ: Mapping[str, str], name: str, default: float) -> float:
    """A positive, finite number of seconds; unset or empty: ``default``."""
    text = environ.get(name, "")
    if not text.strip():
        return default
    try:
        seconds = float(text)
    except ValueError:
        raise SettingsError(f"{name}: {text!r} is not a number of seconds") from None
    if not (math.isfinite(seconds) and seconds > 0):
        raise SettingsError(f"{name}: {text!r} must be a positive number of seconds")
    return seconds


def _count(environ: Mapping[str, str], name: str, default: int, most: int) -> int:
    """A whole number from 1 to ``most``; unset or empty: ``default``."""
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise SettingsError(f"{name}: {text!r} is not a whole number") from None
    if not 1 <= value <= most:
        raise SettingsError(f"{name}: {text!r} must be from 1 to {most}")
    return value


def _lease(environ: Mapping[str, str]) -> LeaseSettings | None:
    """The leader election's settings; None (standalone) without a Lease name."""
    for old in OLD_PEERING_ENVS:
        if environ.get(old, "").strip():
            raise SettingsError(
                f"{old}: kopf peering was replaced by leader election on a Lease; "
                f"set {LEASE_ENV} (and {LEASE_DURATION_ENV}) instead"
            )
    name = _object_name(environ, LEASE_ENV)
    if name is None:
        return None
    lease = LeaseSettings(
        name=name,
        namespace=_object_name(environ, LEASE_NAMESPACE_ENV),
        duration=_seconds(environ, LEASE_DURATION_ENV, DEFAULT_LEASE_DURATION),
        renew_deadline=_seconds(environ, LEASE_RENEW_DEADLINE_ENV, DEFAULT_LEASE_RENEW_DEADLINE),
        retry_period=_seconds(environ, LEASE_RETRY_PERIOD_ENV, DEFAULT_LEASE_RETRY_PERIOD),
    )
    # client-go's own checks (leaderelection.NewLeaderElector): a leader must give up before
    # a standby may take over, and must get a few tries at renewing before it gives up.
    if lease.duration <= lease.renew_deadline:
        raise SettingsError(
            f"{LEASE_DURATION_ENV} ({lease.duration:g}) must be greater than "
            f"{LEASE_RENEW_DEADLINE_ENV} ({lease.renew_deadline:g})"
        )
    if lease.renew_deadline <= LEASE_JITTER * lease.retry_period:
        raise SettingsError(
            f"{LEASE_RENEW_DEADLINE_ENV} ({lease.renew_deadline:g}) must be greater than "
            f"{LEASE_JITTER} x {LEASE_RETRY_PERIOD_ENV} ({lease.retry_period:g})"
        )
    return lease


def _object_name(environ: Mapping[str, str], variable: str) -> str | None:
    name = environ.get(variable, "").strip() or None
    if name is not None and not _DNS_SUBDOMAIN.match(name):
        raise SettingsError(f"{variable}: {name!r} is not a valid object name")
    return name
