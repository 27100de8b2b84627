"""What one sync reads: a pure function of the object and of what the sync has read so far.

`warmgate.runtime.gather` sends the reads and decides nothing: after each part it asks
`reads(sdd, result, seen)` what to read next (`Reads`), so every choice of what to read (the
claim of the spec or an earlier build's, the Pods and Events of the current plan's Jobs unless
the status already records this plan as verified, who uses the cache before the first Job of a
key, the ReplicaSets only when a Pod waits for its gate, the runners of the served plan, the
garbage once there can be some) is made here, beside the decisions that use what was read.
"""

from __future__ import annotations

from dataclasses import dataclass

from warmgate.api import Manifest, SpecDecodeDeployment
from warmgate.api.constants import ANNOTATION_PLAN_HASH, LABEL_PLAN_HASH
from warmgate.reconcile.planning.evaluate import PlanningResult
from warmgate.reconcile.sync.decide_collect import claims_to_list
from warmgate.reconcile.sync.decide_serving import gate_candidates
from warmgate.reconcile.sync.decide_warmup import (
    adoptable,
    claim_uid,
    kept_shards,
    key_of,
    recorded_verdict,
    warmup_jobs,
)
from warmgate.reconcile.sync.observed import Observed, Part, controlled_by, uid_of
from warmgate.reconcile.sync.pod_template import template_mismatch
from warmgate.reconcile.sync.progress import running_pod
from warmgate.reconcile.sync.shard_cards import wants_cards
from warmgate.reconcile.sync.subject import identity, warmup_target
from warmgate.reconcile.sync.warmup_state import owned_pods
from warmgate.resources.cache_claim import legacy_claim_name
from warmgate.resources.names import plan_label
from warmgate.resources.plan_bundle import PlanBundle
from warmgate.resources.pod import cache_claim_name
from warmgate.resources.served_record import served_record_name


@dataclass(frozen=True)
class Reads:
    """What to read next, given the snapshot ``seen`` read so far (each answer is for the part
    of the sync that reads it: ask again after each part)."""

    sdd: SpecDecodeDeployment
    result: PlanningResult | None  # None: a spec this operator cannot read, which warms nothing
    seen: Observed

    def _target(self) -> tuple[PlanBundle, str] | None:
        return None if self.result is None else warmup_target(self.sdd, self.result)

    def _jobs(self) -> list[Manifest]:
        return warmup_jobs(self.sdd.metadata.uid or "", self.seen)

    def _claim_uid(self) -> str | None:
        return claim_uid(identity(self.sdd), self.seen)

    @property
    def warmup(self) -> bool:
        """The warmup's part (claim, Jobs, their Pods): not for a spec the operator cannot read."""
        return self.result is not None

    @property
    def claim(self) -> str | None:
        """The recipe-cache claim of the spec's name, when a warmup may run (None: no read)."""
        return cache_claim_name(self.sdd) if self._target() is not None else None

    @property
    def legacy_claim(self) -> str | None:
        """Where the spec's claim is absent, for a template: the claim an earlier build made
        under `<parent>-recipe-cache` (kept only when `adopted`), so an upgrade keeps the cache."""
        if self.seen.claim is not None or self.sdd.spec.warmup.cache.claim_template is None:
            return None
        return legacy_claim_name(self.sdd)

    def adopted(self, claim: Manifest) -> bool:
        """An earlier build's claim is still this object's (`decide_warmup.adoptable`)."""
        return adoptable(self.sdd, claim)

    @property
    def jobs(self) -> list[Manifest]:
        """The Jobs of the current plan whose Pods (then a runner's board, or the Events) to
        read: none when nothing may warm or the status already records this plan as verified."""
        target = self._target()
        if target is None or recorded_verdict(self.sdd, target[1], self._claim_uid()):
            return []
        return [job for job in self._jobs() if key_of(job) == target[1]]

    @property
    def cache_users(self) -> bool:
        """Who uses the recipe cache, read before the first Job of a cache key is made."""
        target = self._target()
        if target is None or cache_claim_name(self.sdd) is None:
            return False
        if recorded_verdict(self.sdd, target[1], self._claim_uid()):
            return False
        return not any(key_of(job) == target[1] for job in self._jobs())

    @property
    def free_cards(self) -> bool:
        """The Nodes and Pods (free Gaudi cards), read before a sharded warmup's Job is made:
        more than one shard may run, the plan is not verified, no Job of it keeps its count."""
        target = self._target()
        if target is None or not wants_cards(self.sdd, target[0].buckets):
            return False
        if recorded_verdict(self.sdd, target[1], self._claim_uid()):
            return False
        return kept_shards(self.sdd, self._jobs(), target[1]) is None

    @property
    def collecting(self) -> bool:
        """The object has a status: there can be garbage (an object's first sync has none)."""
        return self.sdd.status is not None and bool(self.sdd.status.conditions)

    @property
    def serving_pods(self) -> Part | None:
        """The part the serving Pods are read for (None: not read): serving with a Deployment,
        the collection without one."""
        if self.seen.deployment is not None:
            return "serving"
        return "collect" if self.collecting else None

    @property
    def replica_sets(self) -> bool:
        """The serving ReplicaSets, when a Pod waits for its gate or one runs (its runner)."""
        deployment, pods = self.seen.deployment, self.seen.serving_pods
        if gate_candidates(deployment, pods):
            return True
        return deployment is not None and running_pod(list(pods)) is not None

    @property
    def runners(self) -> list[Manifest]:
        """The serving Pods whose runner to ask: running the served plan, in a ReplicaSet of
        the operator's Deployment, running its template (issue 34 case 3)."""
        deployment = self.seen.deployment or {}
        annotations = (deployment.get("metadata") or {}).get("annotations") or {}
        status = self.sdd.status
        old = status.serving.plan_hash if status and status.serving else None
        served = {plan_label(p) for p in (annotations.get(ANNOTATION_PLAN_HASH), old) if p}
        trusted = {
            uid_of(rs) for rs in self.seen.replica_sets if controlled_by(rs, uid_of(deployment))
        }
        template = (deployment.get("spec") or {}).get("template")
        return [
            pod
            for pod in self.seen.serving_pods
            if (pod["metadata"].get("labels") or {}).get(LABEL_PLAN_HASH) in served
            and any(controlled_by(pod, rs) for rs in trusted)
            and template_mismatch(pod, template) is None
            and running_pod([pod])
        ]

    @property
    def garbage(self) -> bool:
        """The ConfigMaps (and maybe the claims) for the collection: once there can be
        garbage, and only after every read so far succeeded."""
        return self.warmup and self.collecting and not self.seen.failed

    @property
    def served_record(self) -> str | None:
        """For a spec the operator cannot read, whose ConfigMaps are not listed: the served
        record of the object's own Deployment (the Pods' template without a spec to derive it)."""
        deployment = self.seen.deployment
        if self.result is not None or deployment is None:
            return None
        return (
            served_record_name(self.sdd)
            if controlled_by(deployment, self.sdd.metadata.uid or "")
            else None
        )

    @property
    def claims(self) -> bool:
        """The object's recipe-cache claims, where an old one can be (`claims_to_list`)."""
        return claims_to_list(self.sdd, self.seen)


def reads(sdd: SpecDecodeDeployment, result: PlanningResult | None, seen: Observed) -> Reads:
    """What the sync reads next after ``seen`` (see `Reads`)."""
    return Reads(sdd, result, seen)


def job_reads(job: Manifest, pods: tuple[Manifest, ...]) -> tuple[Manifest | None, bool]:
    """After a Job's Pods: the running Pod whose runner to ask (only one the Job controller
    tracks, `warmup_state.owned_pods`), else whether to read the Job's Events (no Pod runs)."""
    running = running_pod(owned_pods(job, list(pods)))
    if running is not None:
        return running, False
    return None, not any((p.get("status") or {}).get("phase") == "Running" for p in pods)
