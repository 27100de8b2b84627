"""Every builder on every example: owner references, names, labels, and the decided fields."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.resource_cases import EXAMPLES, OPERATOR_IMAGE, SETTINGS, UID, Case, make_case, planned

from warmgate.api import GAUDI_RESOURCE
from warmgate.api.constants import (
    ANNOTATION_CACHE_KEY,
    ANNOTATION_PLAN_HASH,
    LABEL_PLAN_HASH,
    PREFIX,
    READINESS_GATE,
)
from warmgate.resources import desired_children, serving_name, serving_selector
from warmgate.resources.mounts import CACHE_DIR, PLAN_DIR, RECIPE_DIR, RUNNER_DIR
from warmgate.resources.names import DNS_1035_LABEL, MAX_NAME
from warmgate.resources.serving_children import startup_budget_s
from warmgate.resources.warmup_children import PERMANENT_EXIT_CODES


def _all(case: Case) -> list[dict[str, Any]]:
    children = case.children()
    built = [
        children.plan_configmap,
        children.warmup_configmap,
        children.warmup_job,
        children.serving_deployment,
        children.service,
        children.cache_claim,
    ]
    return [m for m in built if m is not None]


def _pod(manifest: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = manifest["spec"]["template"]["spec"]
    return spec


def _container(manifest: dict[str, Any], name: str, init: bool = False) -> dict[str, Any]:
    containers = _pod(manifest)["initContainers" if init else "containers"]
    return next(c for c in containers if c["name"] == name)


def test_every_child_is_owned_named_and_labelled(case: Case) -> None:
    for manifest in _all(case):
        meta = manifest["metadata"]
        assert meta["ownerReferences"][0]["uid"] == UID
        assert meta["namespace"] == "llm"
        assert len(meta["name"]) <= MAX_NAME
        assert DNS_1035_LABEL.match(meta["name"])
        assert meta["name"].startswith(case.sdd.metadata.name or "")
        assert all(k.startswith((PREFIX, "app.kubernetes.io/")) for k in meta["labels"])
        assert all(k.startswith(PREFIX) for k in meta.get("annotations", {}))


def test_builders_are_deterministic(case: Case) -> None:
    assert _all(case) == _all(case)


def test_plan_children_carry_the_plan_hash_and_cache_key(case: Case) -> None:
    children = case.children()
    key, job, configmap = children.cache_key, children.warmup_job, children.warmup_configmap
    for manifest in (job, configmap, children.plan_configmap):
        assert manifest["metadata"]["annotations"][ANNOTATION_PLAN_HASH] == case.plan.digest
        assert manifest["metadata"]["annotations"][ANNOTATION_CACHE_KEY] == key
        assert manifest["metadata"]["labels"][LABEL_PLAN_HASH] == case.plan.digest[:16]
    # The seed file goes by the cache key; the Job and its plan.json by their content.
    assert children.plan_configmap["metadata"]["name"].endswith(key.rsplit("-", 1)[1][:10])
    assert configmap["metadata"]["name"] == job["metadata"]["name"]
    assert _pod(job)["volumes"][0]["configMap"]["name"] == configmap["metadata"]["name"]
    assert list(configmap["data"]) == ["plan.json"]
    # with a drafter, the direct warmup's document every serving process warms from (issue 33)
    direct = children.runner_plan.get("drafter_warmup")
    files = children.plan_configmap["data"]
    assert list(files) == ["buckets.txt"] + (["drafter-warmup.json"] if direct else [])
    assert direct is None or json.loads(files["drafter-warmup.json"]) == direct
    command = children.serving_deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    served = "--drafter-warmup /etc/warmgate/drafter-warmup.json -- " in command[2]
    assert served == (direct is not None)


def test_plan_json_is_the_runner_plan_one_section_per_line(case: Case) -> None:
    children = case.children()
    text = children.warmup_configmap["data"]["plan.json"]
    assert json.loads(text) == children.runner_plan
    lines = text.splitlines()
    assert (lines[0], lines[-1]) == ("{", "}")
    keys = [json.loads("{" + line.rstrip(",") + "}") for line in lines[1:-1]]
    assert [next(iter(k)) for k in keys] == sorted(children.runner_plan)


def test_the_job_runs_the_runner_in_the_vllm_image_on_gaudi(case: Case) -> None:
    sdd, warmup = case.sdd, case.sdd.spec.warmup
    job = case.children().warmup_job
    pod, main = _pod(job), _container(job, "warmup")
    assert job["spec"]["backoffLimit"] == warmup.retries
    assert pod["activeDeadlineSeconds"] == warmup.timeout_seconds
    assert pod["restartPolicy"] == "Never"
    assert main["image"] == sdd.spec.image
    assert main["command"][:2] == ["/bin/sh", "-c"]
    assert f"exec python3 -m warmgate.warmup --plan {PLAN_DIR}/plan.json" in main["command"][2]
    assert f'PYTHONPATH="{RUNNER_DIR}$' in main["command"][2]
    assert all(e["name"] != "PYTHONPATH" for e in main["env"])  # the image's own value is kept
    limits = main["resources"]["limits"]
    assert int(limits[GAUDI_RESOURCE]) == sdd.spec.engine.tensor_parallel_size
    assert main["terminationMessagePath"] == "/dev/termination-log"
    assert main["terminationMessagePolicy"] == "File"
    assert main["securityContext"]["allowPrivilegeEscalation"] is False
    mounts = {m["mountPath"]: m for m in main["volumeMounts"]}
    assert mounts[CACHE_DIR]["readOnly"] is False
    assert mounts[RUNNER_DIR]["readOnly"] is True
    policy = job["spec"]["podFailurePolicy"]["rules"][0]
    assert policy["onExitCodes"]["values"] == list(PERMANENT_EXIT_CODES)


def test_the_init_container_copies_the_runner_from_the_operator_image(case: Case) -> None:
    job = case.children().warmup_job
    init = _container(job, "copy-runner", init=True)
    assert init["image"] == OPERATOR_IMAGE
    assert init["volumeMounts"] == [{"name": "runner", "mountPath": RUNNER_DIR}]
    assert init["securityContext"]["runAsNonRoot"] is True
    compile(init["command"][2], "<copy-runner>", "exec")  # the script is valid Python


def test_placement_follows_the_spec(case: Case) -> None:
    job = case.children().warmup_job
    deployment = case.children().serving_deployment
    for pod, placement in (
        (_pod(job), case.sdd.spec.warmup.placement),
        (_pod(deployment), case.sdd.spec.serving.placement),
    ):
        selector = placement.node_selector if placement else None
        assert pod.get("nodeSelector") == selector
        assert pod["enableServiceLinks"] is False


def test_the_cache_volume_is_the_claim_the_spec_names(case: Case) -> None:
    cache = case.sdd.spec.warmup.cache
    job = case.children().warmup_job
    volume = next(v for v in _pod(job)["volumes"] if v["name"] == "recipe-cache")
    pvc = case.children().cache_claim
    if cache.existing_claim:
        assert volume["persistentVolumeClaim"]["claimName"] == cache.existing_claim
        assert pvc is None
    elif cache.claim_template:
        assert pvc is not None
        assert volume["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]
        assert pvc["spec"]["accessModes"] == cache.claim_template.access_modes
        assert pvc["spec"]["resources"]["requests"]["storage"] == cache.claim_template.size
    else:
        assert volume == {"name": "recipe-cache", "emptyDir": {}}
        assert pvc is None


def test_serving_pods_are_gated_and_restore_the_cache(case: Case) -> None:
    sdd = case.sdd
    deployment = case.children().serving_deployment
    pod, vllm = _pod(deployment), _container(deployment, "vllm")
    assert deployment["spec"]["replicas"] == sdd.spec.serving.replicas
    assert pod["readinessGates"] == [{"conditionType": READINESS_GATE}]
    env = {e["name"]: e.get("value") for e in vllm["env"]}
    size = sdd.spec.warmup.cache.max_size_mb
    has_claim = bool(sdd.spec.warmup.cache.existing_claim or sdd.spec.warmup.cache.claim_template)
    assert (
        env["PT_HPU_RECIPE_CACHE_CONFIG"] == f"{RECIPE_DIR},{not has_claim},{size}"
    )  # DELETE=False reuses
    inits = [c["name"] for c in pod["initContainers"]]
    if has_claim:
        restore = _container(deployment, "restore-cache", init=True)
        key = case.children().cache_key
        assert restore["command"][-4:] == ["--restore-cache", CACHE_DIR, key, RECIPE_DIR]
        assert restore["image"] == OPERATOR_IMAGE
        assert inits == ["copy-runner", "restore-cache"]
    else:
        assert inits == ["copy-runner"]
    assert vllm["ports"][0]["containerPort"] == sdd.spec.serving.port


def test_serving_engines_run_under_the_runner_serve_mode(case: Case) -> None:
    deployment = case.children().serving_deployment
    pod, vllm = _pod(deployment), _container(deployment, "vllm")
    copy = _container(deployment, "copy-runner", init=True)
    assert copy["image"] == OPERATOR_IMAGE
    assert vllm["command"][:2] == ["/bin/sh", "-c"]
    script = vllm["command"][2]
    assert "exec python3 -m warmgate.warmup --serve --status-port 9464" in script
    assert script.endswith('-- "$@"')
    assert vllm["command"][3] == "sh"  # $0; the engine's argv follows as "$@"
    assert vllm["ports"][1] == {"name": "warmgate-status", "containerPort": 9464, "protocol": "TCP"}
    runner = {"name": "runner", "mountPath": "/warmgate/runner", "readOnly": True}
    assert runner in vllm["volumeMounts"]
    assert {"name": "runner", "emptyDir": {}} in pod["volumes"]


def test_the_warmup_runner_serves_its_progress(case: Case) -> None:
    job = case.children().warmup_job
    warmup = job["spec"]["template"]["spec"]["containers"][0]
    assert warmup["command"][-1].endswith("--status-port 9464")
    assert warmup["ports"] == [
        {"name": "warmgate-status", "containerPort": 9464, "protocol": "TCP"}
    ]


def test_the_selector_never_holds_the_plan_hash(case: Case) -> None:
    deployment = case.children().serving_deployment
    service = case.children().service
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert LABEL_PLAN_HASH not in selector
    assert service["spec"]["selector"] == selector
    template_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= template_labels.items()
    assert template_labels[LABEL_PLAN_HASH] == case.plan.digest[:16]
    for key, value in (case.sdd.spec.serving.pod_labels or {}).items():
        assert template_labels[key] == value


def test_the_status_selector_string_selects_the_serving_pods(case: Case) -> None:
    deployment = case.children().serving_deployment
    pairs = dict(item.split("=") for item in serving_selector(case.sdd).split(","))
    assert pairs == deployment["spec"]["selector"]["matchLabels"]
    assert serving_name(case.sdd) == deployment["metadata"]["name"]
    assert serving_name(case.sdd) == case.children().service["metadata"]["name"]


def test_the_service_follows_spec_serving(case: Case) -> None:
    service = case.children().service
    serving = case.sdd.spec.serving
    assert service["spec"]["type"] == serving.service_type
    assert service["spec"]["ports"][0]["port"] == serving.port
    assert service["spec"]["ports"][0]["targetPort"] == "http"


def test_the_startup_budget_covers_the_estimated_warmup(case: Case) -> None:
    deployment = case.children().serving_deployment
    probe = _container(deployment, "vllm")["startupProbe"]
    allowed = probe["periodSeconds"] * probe["failureThreshold"]
    budget = startup_budget_s(case.sdd, case.to_run)
    assert budget <= allowed < budget + probe["periodSeconds"]
    assert deployment["spec"]["progressDeadlineSeconds"] > budget


def test_the_budget_follows_the_planning_estimate_and_never_the_status(case: Case) -> None:
    """Pure: the estimate comes with the plan, so a lost or stale status changes nothing."""
    from warmgate.api import PlanSummary, SpecDecodeDeploymentStatus

    longer = replace(case.to_run, estimated_warmup_s=case.to_run.estimated_warmup_s + 1000)
    assert startup_budget_s(case.sdd, longer) == startup_budget_s(case.sdd, case.to_run) + 1500
    stale = SpecDecodeDeploymentStatus(
        plan=PlanSummary(hash=case.plan.digest, estimated_warmup_seconds=1)
    )
    with_status = case.sdd.model_copy(update={"status": stale})
    assert desired_children(with_status, case.to_run, SETTINGS) == case.children()


def test_a_measured_kv_block_count_is_pinned_only_when_the_plan_has_none(case: Case) -> None:
    deployment = case.children(kv_blocks=1234).serving_deployment
    argv = _container(deployment, "vllm")["command"]
    pinned = case.plan.config.num_gpu_blocks or 1234
    assert argv[argv.index("--num-gpu-blocks-override") + 1] == str(pinned)


def test_a_missing_name_or_uid_is_refused(case: Case) -> None:
    meta = case.sdd.metadata.model_copy(update={"uid": None})
    with pytest.raises(ValueError, match="uid"):
        desired_children(case.sdd.model_copy(update={"metadata": meta}), case.to_run, SETTINGS)


def test_the_copied_runner_imports_with_the_standard_library_alone(tmp_path: Path) -> None:
    """Run the init container's script (into tmp) and import the copy without site-packages,
    on PYTHONPATH as the Job's shell line puts it."""
    case = make_case(EXAMPLES[0])
    job = case.children().warmup_job
    script = _container(job, "copy-runner", init=True)["command"][2]
    subprocess.run([sys.executable, "-c", script.replace(RUNNER_DIR, str(tmp_path))], check=True)
    probe = "import warmgate.warmup.__main__ as m, warmgate; print(warmgate.__file__)"
    env = {"PYTHONPATH": str(tmp_path), "PATH": os.environ.get("PATH", "")}
    out = subprocess.run(
        [sys.executable, "-S", "-c", probe],
        env=env,
        cwd=tmp_path / "warmgate",  # not the repository, whose own package would win
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == str(tmp_path / "warmgate" / "__init__.py")


def test_a_plan_no_bucket_file_can_express_is_refused() -> None:
    """VLLM_PROMPT_QUERY_BUCKET_MIN=1 plans prompt buckets of query 1, which the engine's file
    format reads as decode (§2.6): the builders raise instead of warming other shapes."""
    case = make_case(next(p for p in EXAMPLES if p.stem == "minimal-ngram"))
    buckets = case.sdd.spec.buckets.model_validate({"prompt": {"query": {"min": 1}}})
    spec = case.sdd.spec.model_copy(update={"buckets": buckets})
    sdd = case.sdd.model_copy(update={"spec": spec})
    with pytest.raises(ValueError, match="query 1"):
        desired_children(sdd, planned(sdd), SETTINGS)
