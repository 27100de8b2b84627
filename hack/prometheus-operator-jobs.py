#!/usr/bin/env python3
"""Record the scrape jobs the real prometheus-operator generates for the chart's ServiceMonitor
and PodMonitor (tests/integration/monitoring/prometheus-operator-jobs.yaml).

The Go module proxy here does not serve github.com/prometheus-operator/prometheus-operator
(docs/testing.md, "prometheus-operator"), so nothing provisions the operator: build it from a
source checkout at a release tag (`go build ./cmd/operator`, its CRDs are the checkout's
example/prometheus-operator-crd/) and point this script at both. It starts a real
kube-apiserver (warmgate.devcluster.controlplane, the integration tier's), installs the CRDs, the
chart's
two monitors (real helm) and a Prometheus CR selecting every monitor, runs the operator against
it with KUBECONFIG, and writes the scrape_configs of the `prometheus-<name>` Secret
(prometheus.yaml.gz) to --out. No Pod runs: the StatefulSet is made, never scheduled.

  .venv/bin/python hack/prometheus-operator-jobs.py --operator /tmp/po/operator \\
    --crds /tmp/po/src/example/prometheus-operator-crd --version v0.93.0
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from warmgate.devcluster.controlplane import ControlPlane, find_assets  # noqa: E402

OUT = ROOT / "tests" / "integration" / "monitoring" / "prometheus-operator-jobs.yaml"
VALUES = ("metrics.serviceMonitor.enabled=true", "monitoring.podMonitor.enabled=true")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operator", type=Path, required=True)
    parser.add_argument("--crds", type=Path, required=True)
    parser.add_argument("--version", required=True, help="the tag it was built from")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    assets = find_assets(provision=False)
    with ControlPlane(assets) as cp:
        for crd in sorted(args.crds.glob("*.yaml")):
            cp.kubectl("apply", "--server-side", "-f", str(crd))
        cp.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        env = {**os.environ, "KUBECONFIG": str(cp.kubeconfig)}
        sets = [a for v in VALUES for a in ("--set", v)]
        helm = [str(assets / "helm"), "template", "warmgate", str(ROOT / "charts" / "warmgate")]
        helm += ["--namespace", "warmgate-system", "--api-versions", "monitoring.coreos.com/v1"]
        rendered = subprocess.run(
            [*helm, *sets], env=env, capture_output=True, text=True, check=True
        )
        docs = [d for d in yaml.safe_load_all(rendered.stdout) if d]
        monitors = [d for d in docs if d["kind"] in ("ServiceMonitor", "PodMonitor")]
        for ns in ("warmgate-system", "monitoring"):
            cp.kubectl("create", "namespace", ns)
        items = [*monitors, _prometheus()]
        cp.kubectl(
            "apply",
            "-f",
            "-",
            stdin=json.dumps({"kind": "List", "apiVersion": "v1", "items": items}),
        )
        log = args.out.with_suffix(".operator.log")
        with log.open("w") as out:
            operator = subprocess.Popen(
                [str(args.operator), "--web.listen-address=127.0.0.1:0"],
                env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
            try:
                secret = _secret(cp, time.monotonic() + 120)
            finally:
                operator.terminate()
                operator.wait(timeout=15)
        log.unlink()
    config = yaml.safe_load(gzip.decompress(base64.b64decode(secret["data"]["prometheus.yaml.gz"])))
    header = OUT.read_text().split("\n- ", 1)[0] if OUT.is_file() else ""
    header = "\n".join(line for line in header.splitlines() if line.startswith("#"))
    args.out.write_text(header + "\n" + yaml.safe_dump(config["scrape_configs"], sort_keys=False))
    jobs = len(config["scrape_configs"])
    print(f"prometheus-operator-jobs: {jobs} job(s) from {args.version} to {args.out}")
    return 0


def _prometheus() -> dict[str, object]:
    every: dict[str, object] = {}
    spec = {
        f"{kind}{part}": every
        for kind in ("serviceMonitor", "podMonitor")
        for part in ("Selector", "NamespaceSelector")
    }
    meta = {"name": "e2e", "namespace": "monitoring"}
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "Prometheus",
        "metadata": meta,
        "spec": spec,
    }


def _secret(cp: ControlPlane, deadline: float) -> dict[str, dict[str, str]]:
    while time.monotonic() < deadline:
        done = cp.kubectl(
            "get", "secret", "-n", "monitoring", "prometheus-e2e", "-o", "json", check=False
        )
        if done.returncode == 0:
            return dict(json.loads(done.stdout))
        time.sleep(1)
    raise SystemExit("prometheus-operator-jobs: no Secret prometheus-e2e after 120 s")


if __name__ == "__main__":
    sys.exit(main())
