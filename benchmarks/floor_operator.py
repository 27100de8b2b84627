"""The least a kopf operator can do per SpecDecodeDeployment: create one Job (benchmark peer).

`bench_creation_floor.py` runs it with `kopf run` in place of `warmgate operator` to measure
what creating N objects costs this machine before any of warmgate's work: kubectl, the
apiserver and etcd, kopf's own bookkeeping (its last-handled annotation), one Job create per
object. No planning, no status, no Events, no finalizer, no children watched.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf
from kubernetes import client, config

WORKERS = 16  # as warmgate's WARMGATE_SYNC_WORKERS default
_api: list[client.BatchV1Api] = []


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.posting.level = logging.WARNING
    settings.execution.max_workers = WORKERS
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="floor.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="floor.dev", key="last-handled-configuration"
    )
    config.load_kube_config()  # type: ignore[no-untyped-call]
    configuration = client.Configuration.get_default_copy()
    configuration.connection_pool_maxsize = WORKERS
    _api.append(client.BatchV1Api(client.ApiClient(configuration)))


@kopf.on.create("warmgate.dev", "v1alpha1", "specdecodedeployments")
def create(name: str, namespace: str, uid: str, **_: Any) -> None:
    owner = {
        "apiVersion": "warmgate.dev/v1alpha1",
        "kind": "SpecDecodeDeployment",
        "name": name,
        "uid": uid,
        "controller": True,
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{name}-warmup", "ownerReferences": [owner]},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "warmup", "image": "vllm-gaudi:test"}],
                }
            },
        },
    }
    _api[0].create_namespaced_job(namespace, job, _preload_content=False)
