"""What every step of one sync shares: the object, the adapter, the Events, the clock, errors.

The steps (`warm_stage`, `serve_stage`, `garbage`) take one `Stage`; a `ClusterError` a step
catches is recorded in ``errors``, so the sync knows to keep the last known state, skip the
garbage collection and retry with backoff instead of reporting a half-read cluster as truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from warmgate.api import Manifest, SpecDecodeDeployment, SpecDecodeDeploymentStatus
from warmgate.api.constants import LABEL_COMPONENT, LABEL_NAME
from warmgate.reconcile.cluster import Cluster, ClusterError, Events, Logger
from warmgate.reconcile.progress import NoEndpoints, RunnerEndpoints
from warmgate.reconcile.verdict import one_line
from warmgate.resources.names import label_value, parent_name
from warmgate.settings import Settings


@dataclass
class Stage:
    """One sync's shared context."""

    sdd: SpecDecodeDeployment
    cluster: Cluster
    events: Events
    log: Logger
    settings: Settings
    at: datetime
    errors: list[ClusterError] = field(default_factory=list)
    # Reads the runners' status endpoints (warmup progress); none in unit tests by default.
    endpoints: RunnerEndpoints = field(default_factory=NoEndpoints)

    @property
    def namespace(self) -> str:
        return self.sdd.metadata.namespace or "default"

    @property
    def uid(self) -> str:
        return self.sdd.metadata.uid or ""

    @property
    def old(self) -> SpecDecodeDeploymentStatus:
        """The status as the sync found it (empty when the object has none)."""
        return self.sdd.status or SpecDecodeDeploymentStatus()

    def selector(self, component: str | None = None) -> str:
        """The label selector of this object's children (of one component)."""
        name = f"{LABEL_NAME}={label_value(parent_name(self.sdd))}"
        return name if component is None else f"{name},{LABEL_COMPONENT}={component}"

    def failed(self, what: str, exc: ClusterError) -> str:
        """Record an API failure; the message the status and the log give for it."""
        self.errors.append(exc)
        message = f"{what}, retrying: {one_line(exc, 512)}"
        self.log.error(message)
        return message

    def create(self, manifests: tuple[Manifest, ...]) -> list[Manifest]:
        """Create the children that do not exist yet, with one `Created` Event naming them;
        returns them as created (the names that existed already are left out)."""
        created = [found for m in manifests if (found := self.cluster.create(m)) is not None]
        if created:
            names = ", ".join(f"{m['kind']} {m['metadata']['name']}" for m in created)
            self.events.post("Normal", "Created", f"Created {names}")
        return created


def controlled_by(obj: Manifest, uid: str) -> bool:
    """The object's controller owner reference points at ``uid``."""
    refs = obj["metadata"].get("ownerReferences") or []
    return any(ref.get("controller") and ref.get("uid") == uid for ref in refs)
