"""The runner's outcomes and their distinct process exit codes (docs/runner.md, "Exit codes")."""

from __future__ import annotations

import enum


class Outcome(enum.IntEnum):
    """Each outcome is the runner's exit code; the operator maps the code back to a condition."""

    VERIFIED = 0
    INTERNAL_ERROR = 1
    PLAN_INVALID = 2
    UNWARMED_SHAPES = 3
    PLAN_MISMATCH = 4
    ENGINE_FAILED = 5
    PROBE_FAILED = 6
    TIMED_OUT = 7
    DEVICE_REFUSED = 8
    CACHE_FAILED = 9
    # Every copy of a line the verdict needs was garbled by interleaved writes of the engine's
    # processes (tensor parallelism): nothing is known to be wrong, and a retry can tell.
    LOG_UNREADABLE = 10
    # The plan requires the compile hook (drafter_hook.required) and it did not attach, so the
    # drafter's graphs could not be verified; everything else was verified.
    DRAFTER_UNVERIFIED = 11
    # The plan accepts a CPU engine and got one: it started, answered and served the sweep and
    # probe, and has no Gaudi graphs to verify. Never "verified" (docs/runner.md, "A CPU engine").
    CPU_ENGINE = 12
    # A sharded warmup's merge (issue 38): a slice's recipe entry was not published in time, or
    # did not copy, so the merged cache would lack that slice's graphs.
    SHARD_MISSING = 13

    @property
    def label(self) -> str:
        """The outcome's name as written in reports, e.g. ``unwarmed_shapes``."""
        return self.name.lower()

    @property
    def exit_code(self) -> int:
        """The process's exit status: the outcome's code, but 0 for ``cpu_engine``, which the plan
        asked for (the Job completes; its summary says what was and was not verified)."""
        return 0 if self is Outcome.CPU_ENGINE else int(self)


class RunFailure(Exception):
    """Stops the run early with a definite outcome and a one-line reason."""

    def __init__(self, outcome: Outcome, reason: str) -> None:
        super().__init__(reason)
        self.outcome = outcome
        self.reason = reason
