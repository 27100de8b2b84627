"""The verdict of one reconcile stage: the status, reason and message of the condition it sets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from warmgate.api.constants import Reason

# A condition message stays readable in `kubectl describe` and well under the object limit.
MESSAGE_LIMIT: Final = 1024


@dataclass(frozen=True)
class Verdict:
    """One condition to set: status ("True", "False" or "Unknown"), reason and message."""

    status: str
    reason: str
    message: str

    @property
    def holds(self) -> bool:
        """The condition is True."""
        return self.status == "True"


def one_line(exc: Exception, limit: int = MESSAGE_LIMIT) -> str:
    """The exception's text on one line, cut to ``limit`` characters (condition messages)."""
    return " ".join(str(exc).split())[:limit]


def not_owned(kind: str, name: str, holder: str | None = None) -> Verdict:
    """A child's name held by an object this SpecDecodeDeployment does not control: the
    operator neither adopts, reads, mounts nor changes it (Stalled, reason NotOwned)."""
    who = holder or "not controlled by this SpecDecodeDeployment"
    return Verdict(
        "False", Reason.NOT_OWNED, f"{kind} {name} exists and is {who}; delete or rename it"
    )
