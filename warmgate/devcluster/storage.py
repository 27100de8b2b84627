"""A default StorageClass whose claims really bind: a small local-path provisioner.

The PersistentVolume controller hands claims of an external provisioner to whoever watches
them. This one creates a hostPath volume in the cluster's state folder for each pending claim
of ``warmgate-local`` (any access mode: every Pod runs on the one node) and deletes the folder
and the volume once the claim is gone (reclaim policy Delete).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from warmgate.devcluster.layout import PROVISIONER, STORAGE_CLASS

STORAGE_CLASS_MANIFEST: dict[str, Any] = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {
        "name": STORAGE_CLASS,
        "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
    },
    "provisioner": PROVISIONER,
    "reclaimPolicy": "Delete",
    "volumeBindingMode": "Immediate",
}
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"


def _items(call: Callable[..., Any]) -> list[dict[str, Any]]:
    """A list call's items as plain JSON dicts (no model conversion)."""
    return list(json.loads(call(_preload_content=False).data).get("items") or [])


class LocalPathProvisioner:
    """Polls claims and volumes once a second in a daemon thread."""

    def __init__(self, api: Any, root: Path) -> None:
        self.core = client.CoreV1Api(api)
        self.root = root
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="local-path", daemon=True)
        self.errors: list[str] = []

    def start(self) -> LocalPathProvisioner:
        self.root.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self.sync()
            except (ApiException, OSError) as exc:  # the apiserver may be going away
                self.errors.append(str(exc)[:300])

    def sync(self) -> None:
        """Provision pending claims, delete released volumes."""
        for pvc in _items(self.core.list_persistent_volume_claim_for_all_namespaces):
            spec, phase = pvc["spec"], pvc.get("status", {}).get("phase")
            mine = spec.get("storageClassName") == STORAGE_CLASS and not spec.get("volumeName")
            if mine and phase == "Pending":
                self._provision(pvc)
        for pv in _items(self.core.list_persistent_volume):
            meta = pv["metadata"]
            ours = (meta.get("annotations") or {}).get(PROVISIONED_BY) == PROVISIONER
            if ours and pv.get("status", {}).get("phase") in ("Released", "Failed"):
                shutil.rmtree(self.root / meta["name"], ignore_errors=True)
                with contextlib.suppress(ApiException):
                    self.core.delete_persistent_volume(meta["name"])

    def _provision(self, pvc: dict[str, Any]) -> None:
        meta, spec = pvc["metadata"], pvc["spec"]
        name = f"pvc-{meta['uid']}"
        folder = self.root / name
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o777)  # any uid of any image may write the cache
        volume: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {PROVISIONED_BY: PROVISIONER}},
            "spec": {
                "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                "accessModes": list(spec["accessModes"]),
                "hostPath": {"path": str(folder), "type": "Directory"},
                "claimRef": {
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
                "storageClassName": STORAGE_CLASS,
                "persistentVolumeReclaimPolicy": "Delete",
                "volumeMode": "Filesystem",
            },
        }
        try:
            create: Callable[..., Any] = self.core.create_persistent_volume
            create(volume)
        except ApiException as exc:
            if exc.status != 409:
                raise
