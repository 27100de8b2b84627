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
PEERING_ENV: Final = "WARMGATE_PEERING"
PEERING_LIFETIME_ENV: Final = "WARMGATE_PEERING_LIFETIME"
DEFAULT_OPERATOR_IMAGE: Final = "ghcr.io/warmgate/warmgate:0.1.0"
# Children are watched (handlers/children.py): the resync is only a safety net.
DEFAULT_RESYNC_SECONDS: Final = 900.0
DEFAULT_SYNC_WORKERS: Final = 16
MAX_SYNC_WORKERS: Final = 256
DEFAULT_PLAN_CACHE_MB: Final = 64
MAX_PLAN_CACHE_MB: Final = 65536
DEFAULT_PEERING_LIFETIME: Final = 15
MAX_PEERING_LIFETIME: Final = 3600
# A peering object's name: a DNS-1123 subdomain, as every object name.
_DNS_SUBDOMAIN: Final = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class SettingsError(ValueError):
    """A setting the operator cannot use; the message names the variable or flag."""


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
    # The kopf peering object the operator's replicas share (one of them acts, the others
    # stand by); None runs standalone, which is safe with one replica only.
    peering: str | None = None
    # Seconds after its last keep-alive that a replica counts as dead to the others: the
    # failover time when the active replica dies without saying goodbye.
    peering_lifetime: int = DEFAULT_PEERING_LIFETIME

    @classmethod
    def from_environment(
        cls, environ: Mapping[str, str], *, metrics_port: int | None = None
    ) -> Settings:
        """The settings from `WARMGATE_*` variables (unset or empty: the default) and flags."""
        image = environ.get(OPERATOR_IMAGE_ENV, "").strip() or DEFAULT_OPERATOR_IMAGE
        resync = _positive_seconds(environ.get(RESYNC_ENV, ""), RESYNC_ENV)
        if metrics_port is not None and not 0 < metrics_port < 65536:
            raise SettingsError(f"--metrics-port: {metrics_port} is not a TCP port (1-65535)")
        return cls(
            operator_image=image,
            resync_seconds=resync,
            metrics_port=metrics_port or None,
            sync_workers=_count(environ, SYNC_WORKERS_ENV, DEFAULT_SYNC_WORKERS, MAX_SYNC_WORKERS),
            plan_cache_mb=_count(environ, PLAN_CACHE_ENV, DEFAULT_PLAN_CACHE_MB, MAX_PLAN_CACHE_MB),
            peering=_peering(environ),
            peering_lifetime=_count(
                environ, PEERING_LIFETIME_ENV, DEFAULT_PEERING_LIFETIME, MAX_PEERING_LIFETIME
            ),
        )


def _positive_seconds(text: str, name: str) -> float:
    if not text.strip():
        return DEFAULT_RESYNC_SECONDS
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


def _peering(environ: Mapping[str, str]) -> str | None:
    name = environ.get(PEERING_ENV, "").strip() or None
    if name is not None and not _DNS_SUBDOMAIN.match(name):
        raise SettingsError(f"{PEERING_ENV}: {name!r} is not a valid object name")
    return name
