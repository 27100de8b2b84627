"""A SpecDecodeDeployment in every phase, with the status the operator's sync writes in it.

The GitOps health tests (test_gitops_health.py) read these objects with kstatus, Flux's
health expressions and Argo CD's health script. Each is built by driving the real sync against
the fake cluster (sync_world: the test plays the Job, Deployment and ReplicaSet controllers and
the kubelet, as the e2e tier's real ones do), then dressed as the API server serves it.

    python tests/unit/runtime/gitops_phases.py DIR   # writes DIR/<phase>.yaml (Argo CD testdata)
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: the tests' import paths
    ROOT = Path(__file__).resolve().parents[3]
    sys.path[:0] = [
        str(ROOT / "tests"),
        str(ROOT / "tests" / "doubles"),
        str(Path(__file__).parent),
    ]

import yaml
from support.examples import example_doc
from sync_world import NAME, NEW_PLAN, NS, T0, UID, World, verified

from warmgate.api.crd import open_api_schema

# An engine limit the planner refuses (a bucket plan with no prompt room): Stalled PlanFailed.
UNPLANNABLE = {"buckets": {"seeds": {"prompt": [[1, 128, 0]], "decode": [[16, 1, 8]]}}}


def stored(world: World) -> dict[str, Any]:
    """The object as etcd holds it: apiVersion, kind, the server's metadata, the status the
    operator wrote (none before its first write)."""
    body = world.sdd.to_dict()
    meta = body["metadata"]
    meta.update(namespace=NS, name=NAME, uid=UID, resourceVersion="4711")
    meta["creationTimestamp"] = T0.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"apiVersion": "warmgate.dev/v1alpha1", "kind": "SpecDecodeDeployment", **body}


def served(world: World) -> dict[str, Any]:
    """The object as the API server serves it: a status the operator has not written yet is
    the CRD's default (tests/integration/test_api_gitops_health.py reads it from the server)."""
    obj, default = stored(world), open_api_schema()["properties"]["status"].get("default")
    if "status" not in obj and default is not None:
        obj["status"] = copy.deepcopy(default)
    return obj


def no_status() -> World:
    """Applied a moment ago: the operator has not written a status."""
    return World()


def pending() -> World:
    """Planned and proven; the warmup Job has not started its Pod."""
    world = World()
    world.sync()
    return world


def warming() -> World:
    """The warmup Pod runs the runner."""
    world = pending()
    pod = world.pod_of(world.job())
    pod["status"] = {
        "phase": "Running",
        "podIP": "10.0.0.7",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {
                "name": "warmup",
                "ready": True,
                "state": {"running": {"startedAt": "2026-11-29T12:00:05Z"}},
            }
        ],
    }
    world.later(30)
    world.sync()
    return world


def starting() -> World:
    """The plan is verified; serving rolls out."""
    world = World()
    verified(world)
    return world


def ready() -> World:
    """Every replica runs the verified plan."""
    world = starting()
    world.roll()
    world.sync()
    return world


def ready_generation_bumped() -> World:
    """Ready, then a spec edit the operator has not observed yet (metadata.generation 2)."""
    world = ready()
    world.edit(**NEW_PLAN)
    return world


def ready_new_plan_warming() -> World:
    """The edit observed: the new plan warms while the last verified one serves (Ready True at
    generation 1, Reconciling)."""
    world = ready_generation_bumped()
    world.sync()
    return world


def stalled() -> World:
    """A spec the planner refuses: Stalled, nothing created."""
    world = World(**UNPLANNABLE)
    world.sync()
    return world


def stalled_generation_bumped() -> World:
    """Stalled, then the fix applied: the operator has not observed generation 2 yet."""
    world = stalled()
    world.edit(buckets=example_doc(world.stem)["spec"]["buckets"])
    return world


def rollout_stalled() -> World:
    """Serving past the Deployment's progress deadline."""
    world = starting()
    world.rollout_past_deadline()
    world.sync()
    return world


def warmup_failed() -> World:
    """The runner found a shape the engine ran unwarmed: the warmup failed."""
    world = pending()
    shape = "('decode', 24, 1, 768)"
    world.finish("unwarmed_shapes", ok=False, unwarmed=[shape], reason="1 shape not warmed")
    world.sync()
    return world


# phase -> (how to build it, the health it has: Current, Failed or InProgress). Each is the
# object as the API server serves it, except progressing_nostatus: the status-less object as
# etcd holds it before the operator's first write (what a CRD without the status default
# served; docs/operator.md, "GitOps health", says what each reader makes of it).
PHASES: dict[str, tuple[Callable[[], World], str]] = {
    "progressing_nostatus": (no_status, "InProgress"),
    "progressing_new": (no_status, "InProgress"),
    "progressing_pending": (pending, "InProgress"),
    "progressing_warming": (warming, "InProgress"),
    "progressing_starting": (starting, "InProgress"),
    "healthy": (ready, "Current"),
    "progressing_generation_bumped": (ready_generation_bumped, "InProgress"),
    "progressing_new_plan_warming": (ready_new_plan_warming, "InProgress"),
    "progressing_stalled_generation_bumped": (stalled_generation_bumped, "InProgress"),
    "degraded_stalled": (stalled, "Failed"),
    "degraded_rollout_stalled": (rollout_stalled, "Failed"),
    "degraded_warmup_failed": (warmup_failed, "Failed"),
}
STORED = ("progressing_nostatus",)


def phase_object(name: str) -> dict[str, Any]:
    build, _ = PHASES[name]
    world = build()
    return stored(world) if name in STORED else served(world)


def main(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in PHASES:
        text = yaml.safe_dump(phase_object(name), sort_keys=False, width=100)
        (folder / f"{name}.yaml").write_text(text, encoding="utf-8")
        print(folder / f"{name}.yaml")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
