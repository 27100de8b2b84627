"""GitOps health of a SpecDecodeDeployment in every phase, read by the real readers (issue 39).

The objects carry the status the operator's sync writes in each phase (gitops_phases, over
sync_world); `warmgate-health` reads them with kstatus (sigs.k8s.io/cli-utils), with the
shipped Flux healthCheckExprs through Flux's own CEL status reader, and with the shipped Argo
CD health.lua in gopher-lua (tests/support/gitops_health.py). The three readings must agree
with the documented meaning (docs/operator.md, "GitOps health"): Current / Healthy when Ready
is True for the current generation, Failed / Degraded when Stalled is True, in progress
otherwise, a new object included.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from gitops_phases import PHASES, STORED, phase_object
from support.gitops_health import (
    ARGO_CM,
    ARGO_CM_KEY,
    ARGO_DIR,
    FLUX_EXPRS,
    HEALTH_LUA,
    HEALTH_TESTS,
    MEANING,
    read,
    read_files,
    statuses,
)
from support.paths import REPO_ROOT

SERVED = [name for name in PHASES if name not in STORED]


@pytest.mark.parametrize("phase", SERVED)
def test_every_phase_reads_the_documented_health_to_kstatus_flux_and_argo_cd(
    phase: str, tmp_path: Path
) -> None:
    _, health = PHASES[phase]
    reading = read(phase_object(phase), tmp_path)
    assert statuses(reading) == MEANING[health], reading


def test_a_new_object_reads_in_progress_because_the_server_serves_observed_generation_0(
    tmp_path: Path,
) -> None:
    """Before the operator's first write the API server serves the CRD's status default;
    generation 1 against 0 is InProgress to kstatus's own generic rule, and Flux reads it so
    before it evaluates an expression."""
    obj = phase_object("progressing_new")
    assert obj["status"] == {"observedGeneration": 0}
    reading = read(obj, tmp_path)
    assert reading["kstatus"]["message"] == (
        "SpecDecodeDeployment generation is 1, but latest observed generation is 0"
    )
    assert statuses(reading) == MEANING["InProgress"]


def test_a_status_less_object_is_current_to_plain_kstatus_and_never_healthy_to_flux_or_argo(
    tmp_path: Path,
) -> None:
    """The object as etcd holds it before the operator's first write (a CRD without the status
    default served it so): kstatus' generic rules find nothing to wait for and read Current,
    "Resource is current" (what issue 39 saw); Flux's expressions cannot be evaluated without
    a status, which Flux's reader turns into Unknown (its health check waits, it does not
    pass); Argo CD's script reads Progressing."""
    reading = read(phase_object("progressing_nostatus"), tmp_path)
    assert reading["kstatus"] == {"status": "Current", "message": "Resource is current"}
    assert reading["flux"]["status"] == "Unknown"
    assert "no such attribute" in reading["flux"]["error"]
    assert reading["argo"]["status"] == "Progressing"


def test_argo_cds_health_tests_pass_as_its_resource_customizations_tests_run_them() -> None:
    """health_test.yaml in Argo CD's layout: each testdata object's health, status and message."""
    tests = yaml.safe_load(HEALTH_TESTS.read_text(encoding="utf-8"))["tests"]
    readings = read_files([ARGO_DIR / t["inputPath"] for t in tests])
    for test, reading in zip(tests, readings, strict=True):
        want = {
            "status": test["healthStatus"]["status"],
            "message": test["healthStatus"]["message"],
        }
        assert reading["argo"] == want, test["inputPath"]


def test_the_testdata_covers_every_phase_and_each_reads_as_its_name_says() -> None:
    """Every phase has an Argo CD testdata object and a health test; the three readers agree
    on each (the status-less one aside: the test above)."""
    tests = yaml.safe_load(HEALTH_TESTS.read_text(encoding="utf-8"))["tests"]
    files = sorted((ARGO_DIR / "testdata").glob("*.yaml"))
    assert {f.stem for f in files} == set(PHASES)
    assert sorted(ARGO_DIR / t["inputPath"] for t in tests) == files
    for path, reading in zip(files, read_files(files), strict=True):
        if path.stem in STORED:
            continue
        _, health = PHASES[path.stem]
        assert statuses(reading) == MEANING[health], path.name


def test_the_testdata_is_what_the_sync_writes_in_each_phase() -> None:
    """The committed objects are the phases' statuses (regenerate: python
    tests/unit/runtime/gitops_phases.py deploy/gitops/argocd/resource_customizations/
    warmgate.dev/SpecDecodeDeployment/testdata) in condition types, statuses and reasons."""
    for name in PHASES:
        committed = yaml.safe_load((ARGO_DIR / "testdata" / f"{name}.yaml").read_text())
        assert _conditions(committed) == _conditions(phase_object(name)), name


def _conditions(obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    status = obj.get("status") or {}
    return [(c["type"], c["status"], c["reason"]) for c in status.get("conditions") or []]


def test_the_argocd_cm_entry_is_the_health_script() -> None:
    cm = yaml.safe_load(ARGO_CM.read_text(encoding="utf-8"))
    assert (cm["kind"], cm["metadata"]["name"]) == ("ConfigMap", "argocd-cm")
    assert cm["data"][ARGO_CM_KEY] == HEALTH_LUA.read_text(encoding="utf-8")


def test_the_flux_entry_names_the_kind_and_the_two_expressions() -> None:
    (entry,) = yaml.safe_load(FLUX_EXPRS.read_text(encoding="utf-8"))
    assert (entry["apiVersion"], entry["kind"]) == ("warmgate.dev/v1alpha1", "SpecDecodeDeployment")
    assert set(entry) == {"apiVersion", "kind", "current", "failed"}


def test_the_chart_readme_shows_the_shipped_flux_entry() -> None:
    readme = (REPO_ROOT / "charts" / "warmgate" / "README.md").read_text(encoding="utf-8")
    block = readme.split("```yaml\n  healthCheckExprs:\n", 1)[1].split("```", 1)[0]
    shown = yaml.safe_load(textwrap.dedent(block))
    assert shown == yaml.safe_load(FLUX_EXPRS.read_text(encoding="utf-8"))
