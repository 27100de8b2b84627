"""A namespace user bound to the built-in `edit` role, acting with its own token (issue 34).

`edit` is an aggregated ClusterRole: kube-controller-manager fills it from the bootstrap roles
labelled aggregate-to-edit and aggregate-to-view, and no controller-manager runs in the
integration tier. So the user is bound to those two, which is what `edit` holds on a cluster
where nothing else aggregates into it (warmgate's chart adds nothing); the way
tests/integration/test_chart.py models it.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import yaml

from warmgate.devcluster.controlplane import ControlPlane

EDIT_ROLES = ("system:aggregate-to-edit", "system:aggregate-to-view")


class EditUser:
    """kubectl as ServiceAccount ``name`` of the namespace, bound to `edit`'s rules there."""

    def __init__(self, cp: ControlPlane, namespace: str, folder: Path, name: str = "user") -> None:
        self.cp, self.namespace, self.name = cp, namespace, name
        cp.kubectl("create", "serviceaccount", name, "-n", namespace)
        for role in EDIT_ROLES:
            cp.kubectl(
                "create", "rolebinding", f"{name}-{role.rsplit('-', 1)[-1]}",
                f"--clusterrole={role}", f"--serviceaccount={namespace}:{name}", "-n", namespace,
            )  # fmt: skip
        self.kubeconfig = self._kubeconfig(folder / f"{name}.kubeconfig")
        self._wait_bound()

    @property
    def subject(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"

    def _kubeconfig(self, path: Path) -> Path:
        token = self.cp.kubectl(
            "create", "token", self.name, "-n", self.namespace, "--duration=2h"
        ).stdout.strip()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {
                        "server": self.cp.server,
                        "certificate-authority": str(self.cp.ca_file),
                    },
                }
            ],
            "users": [{"name": self.name, "user": {"token": token}}],
            "contexts": [
                {
                    "name": self.name,
                    "context": {"cluster": "local", "user": self.name, "namespace": self.namespace},
                }
            ],
            "current-context": self.name,
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def _wait_bound(self) -> None:
        deadline = time.monotonic() + 30
        while self.kubectl("auth", "can-i", "create", "pods", check=False).stdout.strip() != "yes":
            assert time.monotonic() < deadline, "the edit binding never took effect"
            time.sleep(0.2)

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """kubectl with the user's token (never the admin's), in its namespace."""
        cmd = [str(self.cp.assets / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args]
        done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"as {self.subject}: kubectl {' '.join(args)}: {done.stderr}")
        return done

    def who(self) -> str:
        """`kubectl auth whoami`: the user the server sees."""
        return self.kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}").stdout
