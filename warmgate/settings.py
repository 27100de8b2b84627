"""The operator's settings: built once at start-up from its flags and environment, then frozen."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

OPERATOR_IMAGE_ENV: Final = "WARMGATE_OPERATOR_IMAGE"
RESYNC_ENV: Final = "WARMGATE_RESYNC_SECONDS"
DEFAULT_OPERATOR_IMAGE: Final = "ghcr.io/warmgate/warmgate:0.1.0"
DEFAULT_RESYNC_SECONDS: Final = 15.0


class SettingsError(ValueError):
    """A setting the operator cannot use; the message names the variable or flag."""


@dataclass(frozen=True)
class Settings:
    """What the operator is configured with, read once and passed to whoever needs it."""

    # The image whose runner files the warmup Job's init container copies into the vLLM image;
    # the chart sets it to the operator's own image.
    operator_image: str = DEFAULT_OPERATOR_IMAGE
    # The interval of the resync timer that follows the children of every object.
    resync_seconds: float = DEFAULT_RESYNC_SECONDS
    # Where /metrics is served; None serves no metrics.
    metrics_port: int | None = None

    @classmethod
    def from_environment(
        cls, environ: Mapping[str, str], *, metrics_port: int | None = None
    ) -> Settings:
        """The settings from `WARMGATE_*` variables (unset or empty: the default) and flags."""
        image = environ.get(OPERATOR_IMAGE_ENV, "").strip() or DEFAULT_OPERATOR_IMAGE
        resync = _positive_seconds(environ.get(RESYNC_ENV, ""), RESYNC_ENV)
        if metrics_port is not None and not 0 < metrics_port < 65536:
            raise SettingsError(f"--metrics-port: {metrics_port} is not a TCP port (1-65535)")
        return cls(operator_image=image, resync_seconds=resync, metrics_port=metrics_port or None)


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
