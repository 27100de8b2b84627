"""The Helm chart with the real helm against the real apiserver, and the operator as its SA.

helm installs into namespaces of the harness' kube-apiserver. There is no kubelet, so the
operator Deployment never gets pods; instead the operator runs as a local process that logs in
with a token of the chart's ServiceAccount, which proves that the chart's RBAC is sufficient.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.api_controllers import seeds_example
from support.paths import CRD_PATH, REPO_ROOT

from warmgate.devcluster.controlplane import ControlPlane, OperatorProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]
CHART = REPO_ROOT / "charts" / "warmgate"
CRD_NAME = "specdecodedeployments.warmgate.dev"
SDD = "specdecodedeployments.warmgate.dev"


class Helm:
    """The real helm binary, with its caches in a temporary folder and the harness' kubeconfig."""

    def __init__(self, binary: Path, kubeconfig: Path, home: Path) -> None:
        self.binary, self.kubeconfig = binary, kubeconfig
        self.env = {
            **os.environ,
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.binary), f"--kubeconfig={self.kubeconfig}", *args]
        done = subprocess.run(cmd, capture_output=True, text=True, env=self.env, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done

    def template(self, namespace: str, *args: str) -> list[dict[str, Any]]:
        out = self("template", "wg", str(CHART), f"--namespace={namespace}", *args).stdout
        return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.fixture(scope="module")
def helm(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    binary = control_plane.assets / "helm"
    if not binary.is_file():
        reason = f"no helm binary at {binary}: run `hack/provision-envtest.sh helm`"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"the chart tests need helm under CI: {reason}")
        print(reason)
        pytest.skip(reason)
    return Helm(binary, control_plane.kubeconfig, tmp_path_factory.mktemp("helm"))


@pytest.fixture(scope="module")
def crd(warmgate_crd: ControlPlane) -> None:
    """The CRD exists, so releases can run with crds.install=false."""


def kinds(docs: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in docs}


def dry_run(cp: ControlPlane, docs: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    """Server-side dry-run apply: the real apiserver validates every object, nothing is stored."""
    stream = "\n---\n".join(json.dumps(d) for d in docs)
    args = ("apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", "-")
    done = cp.kubectl(*args, stdin=stream, check=False)
    assert done.returncode == 0, done.stderr
    return done


def can_i(cp: ControlPlane, sa: str, *args: str) -> bool:
    done = cp.kubectl("auth", "can-i", f"--as={sa}", *args, check=False)
    assert done.stdout.strip() in {"yes", "no"}, done.stderr
    return done.stdout.strip() == "yes"


def sa_kubeconfig(cp: ControlPlane, namespace: str, sa: str, path: Path) -> Path:
    """A kubeconfig that logs in as the ServiceAccount (same server and CA as the admin's)."""
    token = cp.kubectl("create", "token", sa, "-n", namespace, "--duration=1h").stdout.strip()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "local",
                "cluster": {"server": cp.server, "certificate-authority": str(cp.ca_file)},
            }
        ],
        "users": [{"name": sa, "user": {"token": token}}],
        "contexts": [
            {"name": sa, "context": {"cluster": "local", "user": sa, "namespace": namespace}}
        ],
        "current-context": sa,
    }
    path.write_text(yaml.safe_dump(config))
    return path


def example_in(namespace: str, name: str) -> str:
    return json.dumps(seeds_example(namespace, name))


def denials(log: str) -> list[str]:
    """Log lines where the API server refused the operator, or kopf ran short of permissions
    (a bare "403" would match the milliseconds of a log timestamp).

    A cluster-wide operator also meets objects that earlier tests left in namespaces that never
    finish terminating (no controller-manager here); the server refuses new Events there with a
    403 that is about the namespace's lifecycle, not RBAC, so those lines are not denials.
    """
    return [
        line
        for line in log.splitlines()
        if re.search(r"forbidden|\(403\)|Not enough permissions", line, re.IGNORECASE)
        and "NamespaceTerminating" not in line
        and "unable to create new content in namespace" not in line
    ]


def wait_for_names(cp: ControlPlane, namespace: str, kind: str, log: Path) -> list[str]:
    """The names of `kind` in the namespace, waiting up to 30 s for the first to appear."""
    deadline = time.monotonic() + 30
    while True:
        names = cp.kubectl("get", kind, "-n", namespace, "-o", "name").stdout.split()
        if names or time.monotonic() > deadline:
            assert names, f"no {kind} in {namespace}; operator log:\n{log.read_text()[-4000:]}"
            return names
        time.sleep(0.5)


def wait_rbac(cp: ControlPlane, sa: str, namespace: str) -> None:
    """Wait until the authorizer's cache has the release's bindings (it lags a new binding)."""
    checks = (
        ("list", "customresourcedefinitions"),
        ("create", "jobs.batch", "-n", namespace),
        ("patch", SDD, "--subresource=status", "-n", namespace),
    )
    deadline = time.monotonic() + 30
    while not all(can_i(cp, sa, *args) for args in checks):
        assert time.monotonic() < deadline, f"{sa} never got its rights"
        time.sleep(0.2)


def install_release(helm: Helm, cp: ControlPlane, namespace: str, release: str, *sets: str) -> str:
    """`helm install` of the chart as ``release`` in ``namespace`` with ``sets``, the CRD left to
    the session (crds.install=false); returns its ServiceAccount's user once the authorizer
    knows the release's bindings."""
    helm(
        "install",
        release,
        str(CHART),
        f"--namespace={namespace}",
        "--set=crds.install=false",
        *sets,
    )
    sa = f"system:serviceaccount:{namespace}:{release}-warmgate"
    wait_rbac(cp, sa, namespace)
    return sa


def wait_proven(cp: ControlPlane, namespace: str, name: str, log: Path) -> None:
    """Wait for CoverageProven; on a timeout, show the operator's log (RBAC errors land there)."""
    done = cp.kubectl(
        "wait",
        "-n",
        namespace,
        f"sdd/{name}",
        "--for=condition=CoverageProven",
        "--timeout=120s",
        check=False,
    )
    assert done.returncode == 0, f"{done.stderr}\noperator log:\n{log.read_text()[-4000:]}"


@pytest.fixture
def other_namespace(control_plane: ControlPlane) -> Iterator[str]:
    name = f"chart-other-{uuid.uuid4().hex[:6]}"
    control_plane.kubectl("create", "namespace", name)
    yield name
    control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


# --- helm lint and template ---------------------------------------------------------------


NON_DEFAULT = [
    "--set=fullnameOverride=gate",
    "--set=image.repository=registry.example.com/ml/warmgate-operator",
    "--set=image.tag=0.1.0-test",
    "--set=image.pullPolicy=Always",
    "--set=imagePullSecrets[0].name=regcred",
    "--set=verbose=true",
    "--set=crds.keep=false",
    "--set=serviceAccount.annotations.example\\.com/role=operator",
    "--set=metrics.port=9090",
    "--set=metrics.service.port=9091",
    "--set=metrics.serviceMonitor.enabled=true",
    "--set=metrics.serviceMonitor.labels.release=prometheus",
    "--set=metrics.serviceMonitor.scrapeTimeout=10s",
    "--set=liveness.port=9092",
    "--set=env[0].name=WARMGATE_EXTRA",
    "--set-string=env[0].value=1",
    "--set=resources.limits.cpu=1",
    "--set=nodeSelector.kubernetes\\.io/os=linux",
    "--set=tolerations[0].key=dedicated",
    "--set=tolerations[0].operator=Exists",
    "--set=tolerations[0].effect=NoSchedule",
    "--set=affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    ".nodeSelectorTerms[0].matchExpressions[0].key=kubernetes.io/arch",
    "--set=affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    ".nodeSelectorTerms[0].matchExpressions[0].operator=In",
    "--set=affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    ".nodeSelectorTerms[0].matchExpressions[0].values[0]=amd64",
    "--set=priorityClassName=system-cluster-critical",
    "--set=podAnnotations.example\\.com/team=ml",
    "--set=podLabels.team=ml",
    "--set=tmpSizeLimit=128Mi",
]


def test_lint_strict_with_default_and_non_default_values(helm: Helm) -> None:
    helm("lint", "--strict", str(CHART))
    helm("lint", "--strict", str(CHART), "--set=watchNamespaces={a,b}", *NON_DEFAULT)
    helm(
        "lint",
        "--strict",
        str(CHART),
        "--set=clusterWide=true",
        "--set=networkPolicy.enabled=false",
    )
    helm("lint", "--strict", str(CHART), "--set=highAvailability.enabled=true")


def test_default_render_is_valid_for_the_apiserver(
    control_plane: ControlPlane, helm: Helm, namespace: str
) -> None:
    """Issue 23 item 13: by default the release's own namespace, a Role there, no write
    anywhere else; the read-only observer ClusterRole is the only cluster-scoped rule."""
    docs = helm.template(namespace)
    objs = kinds(docs)
    assert set(objs) == {
        ("CustomResourceDefinition", "", CRD_NAME),
        ("ServiceAccount", namespace, "wg-warmgate"),
        ("ClusterRole", "", "wg-warmgate-observer"),
        ("ClusterRoleBinding", "", "wg-warmgate-observer"),
        ("Role", namespace, "wg-warmgate"),
        ("RoleBinding", namespace, "wg-warmgate"),
        ("NetworkPolicy", namespace, "wg-warmgate-runner-status"),
        ("Deployment", namespace, "wg-warmgate"),
        ("Service", namespace, "wg-warmgate-metrics"),
    }
    observer = objs[("ClusterRole", "", "wg-warmgate-observer")]
    verbs = {verb for rule in observer["rules"] for verb in rule["verbs"]}
    assert verbs == {"list", "watch"}  # read-only: CRDs and namespace names
    crd = objs[("CustomResourceDefinition", "", CRD_NAME)]
    assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert crd["spec"] == yaml.safe_load(CRD_PATH.read_text())["spec"]
    deployment = objs[("Deployment", namespace, "wg-warmgate")]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["args"] == [
        f"--namespace={namespace}",
        "--liveness=http://0.0.0.0:8081/healthz",
        "--metrics-port=8080",
    ]
    # Pod Security admission warns about any workload that breaks the "restricted" profile.
    control_plane.kubectl(
        "label", "namespace", namespace, "pod-security.kubernetes.io/warn=restricted"
    )
    done = dry_run(control_plane, docs)
    assert "PodSecurity" not in done.stderr, done.stderr


def test_non_default_render_is_valid_for_the_apiserver(
    control_plane: ControlPlane, helm: Helm, namespace: str, other_namespace: str
) -> None:
    watched = f"--set=watchNamespaces={{{namespace},{other_namespace}}}"
    docs = helm.template(
        namespace, watched, *NON_DEFAULT, "--api-versions=monitoring.coreos.com/v1"
    )
    objs = kinds(docs)
    for ns in (namespace, other_namespace):
        assert ("Role", ns, "gate") in objs
        assert ("RoleBinding", ns, "gate") in objs
        assert ("NetworkPolicy", ns, "gate-runner-status") in objs
    assert ("ClusterRole", "", "gate-observer") in objs
    assert ("ClusterRole", "", "gate") not in objs
    crd = objs[("CustomResourceDefinition", "", CRD_NAME)]
    assert "annotations" not in crd["metadata"]
    monitor = objs.pop(("ServiceMonitor", namespace, "gate"))
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    endpoint = monitor["spec"]["endpoints"][0]
    assert endpoint == {
        "port": "metrics",
        "path": "/metrics",
        "honorLabels": True,  # the per-object series' namespace is the object's
        "interval": "30s",
        "scrapeTimeout": "10s",
    }
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [namespace]}
    pod = objs[("Deployment", namespace, "gate")]["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert container["image"] == "registry.example.com/ml/warmgate-operator:0.1.0-test"
    assert container["args"] == [
        f"--namespace={namespace}",
        f"--namespace={other_namespace}",
        "--liveness=http://0.0.0.0:9092/healthz",
        "--metrics-port=9090",
        "--verbose",
    ]
    assert {"name": "WARMGATE_EXTRA", "value": "1"} in container["env"]
    assert pod["metadata"]["labels"]["team"] == "ml"
    assert pod["spec"]["priorityClassName"] == "system-cluster-critical"
    service = objs[("Service", namespace, "gate-metrics")]
    assert service["spec"]["ports"][0]["port"] == 9091
    # No ServiceMonitor CRD in the harness: the rest goes through the server's validation.
    dry_run(control_plane, list(objs.values()))


def test_service_monitor_needs_the_prometheus_operator_api(helm: Helm) -> None:
    docs = helm.template("wg", "--set=metrics.serviceMonitor.enabled=true")
    assert "ServiceMonitor" not in {d["kind"] for d in docs}


def test_bring_your_own_service_account_and_rbac(helm: Helm) -> None:
    done = helm("template", "wg", str(CHART), "--set=serviceAccount.create=false", check=False)
    assert done.returncode != 0
    assert "serviceAccount.name is required when serviceAccount.create is false" in done.stderr
    docs = helm.template(
        "wg",
        "--set=serviceAccount.create=false",
        "--set=serviceAccount.name=ops",
        "--set=rbac.create=false",
    )
    expected = {"CustomResourceDefinition", "Deployment", "Service", "NetworkPolicy"}
    assert {d["kind"] for d in docs} == expected
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "ops"


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (["--set=replicas=2"], "additional properties 'replicas' not allowed"),
        (["--set=metrics.serviceMonitor.intervall=1m"], "additional properties 'intervall'"),
        (["--set=image.pullPolicy=Sometimes"], "/image/pullPolicy"),
        (["--set=watchNamespaces={Not_A_Namespace}"], "/watchNamespaces/0"),
        (["--set=env[0].name=N", "--set=env[0].value=1"], "/env/0/value"),
    ],
)
def test_schema_rejects_bad_values(helm: Helm, flags: list[str], error: str) -> None:
    done = helm("template", "wg", str(CHART), *flags, check=False)
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr
    assert error in done.stderr


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (["--set=clusterWide=true", "--set=watchNamespaces={a}"], "leave watchNamespaces empty"),
        (
            [
                "--set=highAvailability.enabled=true",
                "--set=highAvailability.leaseDurationSeconds=7",
            ],
            "leaseDurationSeconds must be greater than renewDeadlineSeconds",
        ),
        (
            ["--set=highAvailability.enabled=true", "--set=highAvailability.retryPeriodSeconds=9"],
            "renewDeadlineSeconds must be greater than 1.2 x retryPeriodSeconds",
        ),
    ],
)
def test_contradicting_values_fail_the_render(helm: Helm, flags: list[str], error: str) -> None:
    done = helm("template", "wg", str(CHART), *flags, check=False)
    assert done.returncode != 0
    assert error in done.stderr


# --- install, upgrade, uninstall ----------------------------------------------------------


def adopt_crd(cp: ControlPlane, release: str, namespace: str) -> None:
    """Let the release own the CRD that other test modules applied (helm's adoption rule)."""
    cp.kubectl("label", "--overwrite", "crd", CRD_NAME, "app.kubernetes.io/managed-by=Helm")
    cp.kubectl(
        "annotate",
        "--overwrite",
        "crd",
        CRD_NAME,
        f"meta.helm.sh/release-name={release}",
        f"meta.helm.sh/release-namespace={namespace}",
    )


def test_install_upgrade_and_uninstall_keeps_the_crd(
    control_plane: ControlPlane, helm: Helm, crd: None, namespace: str
) -> None:
    adopt_crd(control_plane, "wg", namespace)
    helm("install", "wg", str(CHART), f"--namespace={namespace}")
    get = control_plane.kubectl("get", "-n", namespace, "deploy/wg-warmgate", "-o", "json")
    pod = json.loads(get.stdout)["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["serviceAccountName"] == "wg-warmgate"
    container = pod["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["livenessProbe"]["httpGet"] == {
        "path": "/healthz",
        "port": "liveness",
        "scheme": "HTTP",
    }
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    control_plane.kubectl("get", "-n", namespace, "sa/wg-warmgate", "svc/wg-warmgate-metrics")
    control_plane.kubectl("get", "-n", namespace, "role/wg-warmgate", "rolebinding/wg-warmgate")
    control_plane.kubectl("get", "-n", namespace, "networkpolicy/wg-warmgate-runner-status")
    control_plane.kubectl("get", "clusterrole/wg-warmgate-observer")
    crd_meta = json.loads(control_plane.kubectl("get", "crd", CRD_NAME, "-o", "json").stdout)
    assert crd_meta["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"

    helm(
        "upgrade",
        "wg",
        str(CHART),
        f"--namespace={namespace}",
        "--reuse-values",
        "--set=verbose=true",
    )
    get = control_plane.kubectl("get", "-n", namespace, "deploy/wg-warmgate", "-o", "json")
    args = json.loads(get.stdout)["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--verbose" in args

    done = helm("uninstall", "wg", f"--namespace={namespace}")
    assert "kept due to the resource policy" in done.stdout + done.stderr
    control_plane.kubectl("get", "crd", CRD_NAME)
    gone = control_plane.kubectl("get", "-n", namespace, "deploy/wg-warmgate", check=False)
    assert gone.returncode != 0
    assert "NotFound" in gone.stderr
    gone = control_plane.kubectl("get", "clusterrole/wg-warmgate-observer", check=False)
    assert gone.returncode != 0
    assert "NotFound" in gone.stderr


# --- acting as the chart's ServiceAccount ------------------------------------------------


def test_operator_runs_as_the_namespaced_service_account(
    *,
    control_plane: ControlPlane,
    helm: Helm,
    crd: None,
    namespace: str,
    other_namespace: str,
    tmp_path: Path,
) -> None:
    sa = install_release(
        helm, control_plane, namespace, "wg-ns", f"--set=watchNamespaces={{{namespace}}}"
    )
    kubeconfig = sa_kubeconfig(control_plane, namespace, "wg-ns-warmgate", tmp_path / "sa.yaml")
    operator = OperatorProcess(kubeconfig, namespace, tmp_path / "operator.log")
    try:
        operator.wait_alive()
        control_plane.kubectl("apply", "-f", "-", stdin=example_in(namespace, "seeds"))
        wait_proven(control_plane, namespace, "seeds", operator.log)
        # The warmup stage created the plan's children as the ServiceAccount.
        assert wait_for_names(control_plane, namespace, "jobs.batch", operator.log)
        assert wait_for_names(control_plane, namespace, "configmaps", operator.log)
        events = control_plane.kubectl(
            "get",
            "events",
            "-n",
            namespace,
            "--field-selector=involvedObject.name=seeds",
            "-o",
            "json",
        )
        assert json.loads(events.stdout)["items"], "the operator posted no Event"
        assert "warmgate_coverage_proven" in operator.get("/metrics")
    finally:
        operator.stop()
    assert denials(operator.log.read_text()) == []

    # What it may do, and only where it may do it.
    for args in (
        ("patch", SDD, "-n", namespace),
        ("patch", SDD, "--subresource=status", "-n", namespace),
        ("update", SDD, "--subresource=finalizers", "-n", namespace),
        ("create", "events", "-n", namespace),
        ("get", "jobs.batch", "-n", namespace),
        ("list", "jobs.batch", "-n", namespace),
        ("create", "jobs.batch", "-n", namespace),
        ("patch", "jobs.batch", "-n", namespace),
        ("delete", "jobs.batch", "-n", namespace),
        ("get", "configmaps", "-n", namespace),
        ("list", "configmaps", "-n", namespace),
        ("create", "configmaps", "-n", namespace),
        ("update", "configmaps", "-n", namespace),
        ("delete", "configmaps", "-n", namespace),
        ("get", "persistentvolumeclaims", "-n", namespace),
        ("list", "persistentvolumeclaims", "-n", namespace),
        ("create", "persistentvolumeclaims", "-n", namespace),
        ("delete", "persistentvolumeclaims", "-n", namespace),
        ("list", "events", "-n", namespace),
        ("list", "pods", "-n", namespace),
        ("get", "deployments.apps", "-n", namespace),
        ("create", "deployments.apps", "-n", namespace),
        ("update", "deployments.apps", "-n", namespace),
        ("patch", "deployments.apps", "--subresource=scale", "-n", namespace),
        ("list", "replicasets.apps", "-n", namespace),
        ("get", "services", "-n", namespace),
        ("create", "services", "-n", namespace),
        ("patch", "services", "-n", namespace),
        ("patch", "pods", "--subresource=status", "-n", namespace),
        ("watch", "customresourcedefinitions"),
        ("list", "namespaces"),
    ):
        assert can_i(control_plane, sa, *args), args
    for args in (
        ("delete", "nodes"),
        ("get", "secrets", "-n", namespace),
        ("list", "secrets", "-A"),
        ("get", "pods", "-n", namespace),
        ("get", "pods", "--subresource=log", "-n", namespace),
        ("create", "pods", "-n", namespace),
        ("delete", "pods", "-n", namespace),
        ("patch", "configmaps", "-n", namespace),
        ("patch", "persistentvolumeclaims", "-n", namespace),
        ("delete", "persistentvolumeclaims", "-n", other_namespace),
        ("delete", "services", "-n", namespace),
        ("delete", "deployments.apps", "-n", namespace),
        ("delete", "jobs.batch", "-n", other_namespace),
        ("patch", "pods", "-n", namespace),
        ("create", "deployments.apps", "-n", other_namespace),
        ("delete", SDD, "-n", namespace),
        ("create", SDD, "-n", namespace),
        ("patch", SDD, "-n", other_namespace),
        ("create", "events", "-n", other_namespace),
        ("create", "jobs.batch", "-n", other_namespace),
        ("patch", "customresourcedefinitions"),
        ("create", "rolebindings.rbac.authorization.k8s.io", "-n", namespace),
    ):
        assert not can_i(control_plane, sa, *args), args
    helm("uninstall", "wg-ns", f"--namespace={namespace}")


def test_the_default_install_cannot_write_outside_its_namespace(
    control_plane: ControlPlane, helm: Helm, crd: None, namespace: str, other_namespace: str
) -> None:
    """Issue 23 item 13: a default install can run nothing in kube-system or elsewhere."""
    sa = install_release(helm, control_plane, namespace, "wg-def")
    for ns in (other_namespace, "kube-system"):
        for args in (
            ("create", "jobs.batch"),
            ("create", "deployments.apps"),
            ("update", "deployments.apps"),
            ("patch", "pods", "--subresource=status"),
            ("list", "pods"),
            ("list", "configmaps"),
            ("create", "configmaps"),
        ):
            assert not can_i(control_plane, sa, *args, "-n", ns), (ns, args)
    assert can_i(control_plane, sa, "create", "jobs.batch", "-n", namespace)
    # gaudiCards is off by default: no Node, no Pod of another namespace (issue 38).
    assert not can_i(control_plane, sa, "list", "nodes")
    assert not can_i(control_plane, sa, "list", "pods", "-A")
    helm("uninstall", "wg-def", f"--namespace={namespace}")


def test_gaudi_cards_grants_reading_nodes_and_pods_only(
    control_plane: ControlPlane, helm: Helm, crd: None, namespace: str, other_namespace: str
) -> None:
    """gaudiCards=true (issue 38, a sharded warmup's free cards): list Nodes and the Pods of
    every namespace, read-only; nothing else anywhere else."""
    sa = install_release(helm, control_plane, namespace, "wg-cards", "--set=gaudiCards=true")
    assert can_i(control_plane, sa, "list", "nodes")
    assert can_i(control_plane, sa, "list", "pods", "-A")
    for args in (
        ("get", "nodes"),
        ("watch", "nodes"),
        ("patch", "nodes"),
        ("delete", "nodes"),
        ("get", "pods", "-n", other_namespace),
        ("get", "pods", "--subresource=log", "-n", other_namespace),
        ("create", "pods", "-n", other_namespace),
        ("create", "jobs.batch", "-n", other_namespace),
        ("list", "secrets", "-A"),
    ):
        assert not can_i(control_plane, sa, *args), args
    helm("uninstall", "wg-cards", f"--namespace={namespace}")


def test_cluster_wide_service_account_rights(
    control_plane: ControlPlane, helm: Helm, crd: None, namespace: str, other_namespace: str
) -> None:
    sa = install_release(helm, control_plane, namespace, "wg-all", "--set=clusterWide=true")
    for ns in (namespace, other_namespace):
        assert can_i(control_plane, sa, "patch", SDD, "-n", ns)
        assert can_i(control_plane, sa, "patch", SDD, "--subresource=status", "-n", ns)
        assert can_i(control_plane, sa, "create", "events", "-n", ns)
        assert can_i(control_plane, sa, "create", "jobs.batch", "-n", ns)
        assert can_i(control_plane, sa, "delete", "jobs.batch", "-n", ns)
        assert not can_i(control_plane, sa, "delete", "deployments.apps", "-n", ns)
        assert not can_i(control_plane, sa, "get", "secrets", "-n", ns)
        assert not can_i(control_plane, sa, "delete", SDD, "-n", ns)
    # kopf observes namespaces only when it serves a namespace list.
    assert not can_i(control_plane, sa, "list", "namespaces")
    assert not can_i(control_plane, sa, "delete", "nodes")
    helm("uninstall", "wg-all", f"--namespace={namespace}")


def test_operator_runs_cluster_wide_as_the_service_account(
    control_plane: ControlPlane, helm: Helm, crd: None, namespace: str, tmp_path: Path
) -> None:
    """`--all-namespaces` as the cluster-wide ServiceAccount: the ClusterRole suffices."""
    install_release(helm, control_plane, namespace, "wg-cw", "--set=clusterWide=true")
    kubeconfig = sa_kubeconfig(control_plane, namespace, "wg-cw-warmgate", tmp_path / "sa.yaml")
    log = tmp_path / "operator.log"
    operator = OperatorProcess(kubeconfig, None, log)  # --all-namespaces
    try:
        operator.wait_alive()
        control_plane.kubectl("apply", "-f", "-", stdin=example_in(namespace, "seeds-cw"))
        wait_proven(control_plane, namespace, "seeds-cw", log)
    finally:
        operator.stop()
    assert denials(log.read_text()) == []
    helm("uninstall", "wg-cw", f"--namespace={namespace}")


def test_operator_elects_a_leader_as_the_service_account(
    control_plane: ControlPlane, helm: Helm, crd: None, namespace: str, tmp_path: Path
) -> None:
    """Issue 23 item 9: with highAvailability the chart's Role suffices for the Lease: the
    operator creates it, holds and renews it, a second one watches it, without a denial."""
    sa = install_release(
        helm, control_plane, namespace, "wg-ha", "--set=highAvailability.enabled=true"
    )
    deployment = json.loads(
        control_plane.kubectl("get", "-n", namespace, "deploy/wg-ha-warmgate", "-o", "json").stdout
    )
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    lease_env = {k: v for k, v in env.items() if "LEASE" in k}
    assert lease_env["WARMGATE_LEADER_LEASE"] == "wg-ha-warmgate"
    kubeconfig = sa_kubeconfig(control_plane, namespace, "wg-ha-warmgate", tmp_path / "sa.yaml")
    first = OperatorProcess(kubeconfig, namespace, tmp_path / "first.log", env=lease_env)
    second: OperatorProcess | None = None
    try:
        first.wait_alive()
        control_plane.kubectl("apply", "-f", "-", stdin=example_in(namespace, "seeds-ha"))
        wait_proven(control_plane, namespace, "seeds-ha", first.log)
        second = OperatorProcess(kubeconfig, namespace, tmp_path / "second.log", env=lease_env)
        second.wait_alive()
        time.sleep(5)  # two renewals by the first, two watches by the second
        lease = json.loads(
            control_plane.kubectl(
                "get", "lease", "-n", namespace, "wg-ha-warmgate", "-o", "json"
            ).stdout
        )["spec"]
        assert lease["holderIdentity"]
    finally:
        for op in (first, second):
            if op is not None:
                op.stop()
    for op in (first, second):
        if op is not None:
            assert denials(op.log.read_text()) == [], op.log.read_text()[-3000:]
    assert "Acquired the leader Lease" in first.log.read_text()
    assert second is not None
    assert "Standing by for the leader Lease" in second.log.read_text()
    assert can_i(
        control_plane, sa, "update", "leases.coordination.k8s.io/wg-ha-warmgate", "-n", namespace
    )
    assert not can_i(
        control_plane, sa, "update", "leases.coordination.k8s.io/other", "-n", namespace
    )
    assert not can_i(control_plane, sa, "create", "leases.coordination.k8s.io", "-n", "kube-system")
    helm("uninstall", "wg-ha", f"--namespace={namespace}")


def test_the_built_in_edit_role_can_write_no_status_and_no_sdd_but_a_lease(
    control_plane: ControlPlane, crd: None, namespace: str
) -> None:
    """docs/operator.md "Who may do what": a namespace user bound to the built-in `edit`
    ClusterRole (as the issue's attacker is) may create Pods and Jobs, but not write a
    SpecDecodeDeployment's status (a forged Ready=True), nor the objects. It may write Leases:
    in the operator's namespace that is the leader election (docs: keep the operator in a
    namespace of its own).

    `edit` is an aggregated role: kube-controller-manager fills it from the bootstrap roles
    labelled aggregate-to-edit and aggregate-to-view, and no controller-manager runs here; so
    the user is bound to those two, which is what `edit` holds on a cluster where nothing else
    aggregates into it (warmgate's chart adds nothing)."""
    control_plane.kubectl("create", "serviceaccount", "user", "-n", namespace)
    for role in ("system:aggregate-to-edit", "system:aggregate-to-view"):
        control_plane.kubectl(
            "create", "rolebinding", f"user-{role.rsplit('-', 1)[-1]}", f"--clusterrole={role}",
            f"--serviceaccount={namespace}:user", "-n", namespace,
        )  # fmt: skip
    user = f"system:serviceaccount:{namespace}:user"
    deadline = time.monotonic() + 30
    while not can_i(control_plane, user, "create", "pods", "-n", namespace):
        assert time.monotonic() < deadline, "the binding never took effect"
        time.sleep(0.2)
    assert can_i(control_plane, user, "create", "jobs.batch", "-n", namespace)
    for args in (
        ("patch", SDD, "--subresource=status"),
        ("update", SDD, "--subresource=status"),
        ("create", SDD),
        ("patch", SDD),
    ):
        assert not can_i(control_plane, user, *args, "-n", namespace), args
    assert can_i(control_plane, user, "update", "leases.coordination.k8s.io", "-n", namespace)


def test_high_availability_renders_replicas_with_a_lease(
    control_plane: ControlPlane, helm: Helm, namespace: str
) -> None:
    """Issue 23 item 9: two replicas, leader election on a Lease, its rights only; valid for
    the server. No kopf peering CRDs any more."""
    docs = helm.template(namespace, "--set=highAvailability.enabled=true")
    objs = kinds(docs)
    deployment = objs[("Deployment", namespace, "wg-warmgate")]
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    for name, value in (
        ("WARMGATE_LEADER_LEASE", "wg-warmgate"),
        ("WARMGATE_LEASE_NAMESPACE", namespace),
        ("WARMGATE_LEASE_DURATION", "10"),
        ("WARMGATE_LEASE_RENEW_DEADLINE", "7"),
        ("WARMGATE_LEASE_RETRY_PERIOD", "2"),
    ):
        assert {"name": name, "value": value} in env
    assert not any("PEERING" in e["name"] for e in env)
    assert not [d for d in docs if d["kind"] == "CustomResourceDefinition" and "kopf" in str(d)]
    role = objs[("Role", namespace, "wg-warmgate-leader-election")]
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["wg-warmgate"],
            "verbs": ["get", "watch", "update"],
        },
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    ]
    binding = objs[("RoleBinding", namespace, "wg-warmgate-leader-election")]
    assert binding["subjects"][0]["name"] == "wg-warmgate"
    single = kinds(helm.template(namespace))
    assert single[("Deployment", namespace, "wg-warmgate")]["spec"]["replicas"] == 1
    assert single[("Deployment", namespace, "wg-warmgate")]["spec"]["strategy"] == {
        "type": "Recreate"
    }
    assert ("Role", namespace, "wg-warmgate-leader-election") not in single
    dry_run(control_plane, docs)


def test_the_network_policy_admits_only_the_operator_to_the_status_port(
    helm: Helm, namespace: str
) -> None:
    """Issue 23 item 14: its selectors match the Pods the operator builds and its own Pod."""
    from support.paths import EXAMPLES
    from support.resource_cases import make_case

    objs = kinds(helm.template(namespace))
    policy = objs[("NetworkPolicy", namespace, "wg-warmgate-runner-status")]["spec"]
    operator_pod = objs[("Deployment", namespace, "wg-warmgate")]["spec"]["template"]
    seeds = next(p for p in EXAMPLES if p.stem == "llama31-8b-seeds")
    children = make_case(seeds, namespace=namespace).children(4096)
    warmup = children.warmup_job["spec"]["template"]
    serving = children.serving_deployment["spec"]["template"]
    selector = policy["podSelector"]["matchExpressions"][0]
    for pod in (warmup, serving):
        assert pod["metadata"]["labels"][selector["key"]] in selector["values"]
        ports = {p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
        assert "warmgate-status" in ports
    status_rule, engine_rule = policy["ingress"]
    assert status_rule["ports"] == [{"port": "warmgate-status", "protocol": "TCP"}]
    (peer,) = status_rule["from"]
    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": namespace}
    wanted = peer["podSelector"]["matchLabels"]
    assert wanted.items() <= operator_pod["metadata"]["labels"].items()
    assert "from" not in engine_rule  # the engine's API stays open, as without the policy
    engine_ports = {p["name"] for c in serving["spec"]["containers"] for p in c.get("ports", [])}
    assert engine_rule["ports"] == [{"port": "http", "protocol": "TCP"}]
    assert "http" in engine_ports
    cluster_wide = kinds(helm.template(namespace, "--set=clusterWide=true"))
    assert not [k for k in cluster_wide if k[0] == "NetworkPolicy"]
