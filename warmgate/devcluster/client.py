"""A completion request through a serving Service, sent from a Pod on the dev cluster.

The host cannot reach a ClusterIP (the harness blackholes the Service range there, so nothing
untranslated leaves the machine), and the cluster has no DNS. So a short-lived Pod of the
operator image (it has python3) posts to the Service's ClusterIP, which kube-proxy translates to
a ready serving Pod, and prints the engine's JSON answer; the caller reads it from the Pod's log.
"""

from __future__ import annotations

import json
import time
from typing import Any, Final, Protocol

POD_TIMEOUT_S: Final = 300.0
# Greedy, and `ignore_eos` (a vLLM extension) so the answer has exactly max_tokens tokens.
_POST: Final = """\
import json, sys, urllib.request
body = {"model": sys.argv[2], "prompt": sys.argv[3], "max_tokens": int(sys.argv[4]),
        "temperature": 0, "ignore_eos": True}
request = urllib.request.Request(sys.argv[1], data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
print(opener.open(request, timeout=120).read().decode())
"""


class Kubectl(Protocol):
    """`kubectl` bound to the cluster (DevCluster.kubectl)."""

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> Any: ...


def service_url(kubectl: Kubectl, namespace: str, service: str, path: str) -> str:
    """http://<ClusterIP>:<first port><path> of a Service."""
    found = json.loads(kubectl("get", "service", "-n", namespace, service, "-o", "json").stdout)
    spec = found["spec"]
    return f"http://{spec['clusterIP']}:{spec['ports'][0]['port']}{path}"


def client_pod(name: str, namespace: str, image: str, argv: list[str]) -> dict[str, Any]:
    """The client Pod: no token, never restarted, the image already on the node."""
    container = {"name": "client", "image": image, "imagePullPolicy": "Never", "command": argv}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "containers": [container],
        },
    }


def complete(
    kubectl: Kubectl,
    namespace: str,
    service: str,
    *,
    image: str,
    model: str,
    prompt: str,
    max_tokens: int,
    name: str = "completion-client",
) -> dict[str, Any]:
    """POST /v1/completions through ``service``; the engine's answer as a dict."""
    url = service_url(kubectl, namespace, service, "/v1/completions")
    argv = ["python3", "-c", _POST, url, model, prompt, str(max_tokens)]
    kubectl("apply", "-f", "-", stdin=json.dumps(client_pod(name, namespace, image, argv)))
    phase = _finished(kubectl, namespace, name)
    out = str(kubectl("logs", "-n", namespace, name, check=False).stdout)
    kubectl("delete", "pod", "-n", namespace, name, "--wait=false", check=False)
    if phase != "Succeeded":
        raise RuntimeError(f"the completion client ended {phase}: {out.strip()[-2000:]}")
    return dict(json.loads(out.strip().splitlines()[-1]))


def _finished(kubectl: Kubectl, namespace: str, name: str) -> str:
    deadline = time.monotonic() + POD_TIMEOUT_S
    phase = "Pending"
    while time.monotonic() < deadline:
        got = kubectl("get", "pod", "-n", namespace, name, "-o", "json", check=False)
        if got.returncode == 0:
            phase = json.loads(got.stdout).get("status", {}).get("phase") or phase
            if phase in ("Succeeded", "Failed"):
                return str(phase)
        time.sleep(1)
    return f"{phase} after {POD_TIMEOUT_S:.0f} s"
