"""Why a warmup Job's runner is not running yet, as Kubernetes says it (pure).

The scheduler (PodScheduled=False, reason Unschedulable), the kubelet (a container waiting in
ErrImagePull, ImagePullBackOff, CreateContainerConfigError, ...) and the Job controller (a
FailedCreate Event when quota or Pod Security refuses the Pod) each say why in their own
place; `why_pending` reads all three and returns the reason and message the Warmed condition
shows, and since when the Pod has waited (the pending deadline counts from there). An Event's
text is anyone's with `edit`: only its cause, recognised, is told, in the operator's words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from warmgate.api import Manifest
from warmgate.api.constants import Reason

# Container waiting reasons that mean the Pod cannot start as it is (kubelet: images.go,
# kuberuntime_container.go); others (ContainerCreating, PodInitializing) are progress.
STUCK_WAITING: Final = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "CrashLoopBackOff",
    }
)


@dataclass(frozen=True)
class Pending:
    """Why the runner does not run: a CamelCase reason, a message, and since when."""

    reason: str
    message: str
    since: datetime | None
    stuck: bool  # a reason Kubernetes gives for a Pod that cannot start as it is


def time_of(value: Any) -> datetime | None:
    """A metav1.Time string as a datetime (None when absent)."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) else None


def _condition(obj: Manifest, type_: str) -> Manifest:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == type_), {})


def _waiting(pod: Manifest) -> tuple[str, Manifest] | None:
    """The first container (init containers first) waiting for a stuck reason."""
    status = pod.get("status") or {}
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in status.get(key) or []:
            waiting = (container.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in STUCK_WAITING:
                return str(container.get("name")), waiting
    return None


def _failed_create(events: list[Manifest]) -> Manifest | None:
    """The newest FailedCreate Event of the Job controller."""
    failed = [e for e in events if e.get("reason") == Reason.FAILED_CREATE]
    stamp = lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or "")  # noqa: E731
    return max(failed, key=stamp, default=None)


# What refused a Pod, recognised in a FailedCreate Event's message and told in the
# operator's own words: anyone with `edit` may create an Event (issue 34), so its free text
# never reaches a condition; a Pod Security level is kept only in its own narrow form.
_POD_SECURITY = re.compile(r'violates PodSecurity "([a-z]{1,16}:[a-z0-9.]{1,16})"')


def _refused_by(event: Manifest) -> str:
    """The cause of a FailedCreate Event, in the operator's words."""
    text = str(event.get("message") or "")[:4096]
    where = "the Job's Events (kubectl describe job) say more"
    found = _POD_SECURITY.search(text)
    if found is not None:
        return f'it violates PodSecurity "{found.group(1)}" (Pod Security admission; {where})'
    if "exceeded quota" in text:
        return f"it exceeded quota (a ResourceQuota of the namespace; {where})"
    return f"the Job controller reports FailedCreate ({where})"


def why_pending(job: Manifest, pod: Manifest | None, events: list[Manifest]) -> Pending:
    """Why the runner of ``job`` does not run; ``pod`` is its newest Pod (None: none exists)."""
    name = job["metadata"]["name"]
    if pod is None:
        since = time_of(job["metadata"].get("creationTimestamp"))
        event = _failed_create(events)
        if event is not None:
            message = f"Job {name} cannot create its Pod: {_refused_by(event)}"
            return Pending(Reason.FAILED_CREATE, message, since, stuck=True)
        return Pending(
            Reason.WARMUP_PENDING, f"Job {name} has not created its Pod yet", since, False
        )
    pod_name = pod["metadata"]["name"]
    since = time_of(pod["metadata"].get("creationTimestamp"))
    scheduled = _condition(pod, "PodScheduled")
    if scheduled.get("status") == "False" and scheduled.get("reason") == Reason.UNSCHEDULABLE:
        message = f"Job {name}: Pod {pod_name} is not scheduled: {scheduled.get('message', '')}"
        return Pending(Reason.UNSCHEDULABLE, message, since, stuck=True)
    waiting = _waiting(pod)
    if waiting is not None:
        container, state = waiting
        reason = str(state["reason"])
        detail = state.get("message") or reason
        message = f"Job {name}: Pod {pod_name}, container {container}: {reason}: {detail}"
        return Pending(reason, message, since, stuck=True)
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    message = f"Job {name}: Pod {pod_name} is starting ({phase}); the runner has not started"
    return Pending(Reason.WARMUP_PENDING, message, since, stuck=False)
