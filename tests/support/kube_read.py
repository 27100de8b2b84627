"""`kubectl get ... -o json`, read in the test's own process: the same GET against the same API
server, without starting a kubectl.

The tests poll: a scenario waits for a condition, a Pod, a Job by reading them again and again,
and each `kubectl get` costs about 60 ms of CPU (a Go binary starting, reading its kubeconfig
and discovery cache, then the request), 63 ms measured against 1 ms for the same read through
the Python client; `make test` made 3,740 kubectl calls, 225 s of CPU on a 2-core machine
(docs/testing.md, "Where the CPU goes"). ``get`` reads what ``kubectl get`` reads: the resource
resolved from the API server's discovery as kubectl resolves it (plural, singular, short name or
kind, with an optional ``.group``), the namespace of ``-n`` (else ``default``, or all of them
with ``-A``) and the ``-l`` selector; a list comes back as kubectl prints it (``kind: List``, each
item with its ``apiVersion`` and ``kind``).

Anything else (another flag, several kinds, a name that discovery does not know) and any answer
but 200 (not found, forbidden) is left to kubectl itself: ``get`` returns None and the caller
runs kubectl, so its errors and exit codes are kubectl's own.
"""

from __future__ import annotations

import functools
import json
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

_NAMESPACE_FLAGS = ("-n", "--namespace")
_SELECTOR_FLAGS = ("-l", "--selector")
_ALL_NAMESPACES = ("-A", "--all-namespaces")
# kubectl waits without limit; a read that has no answer in this long goes to kubectl instead
# (a scenario that froze the API server gets kubectl's behaviour, as before)
_TIMEOUT_S = 30


@dataclass(frozen=True)
class _Resource:
    group_version: str  # "v1", "apps/v1"
    plural: str
    kind: str
    namespaced: bool

    @property
    def base(self) -> str:
        return "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"


@dataclass(frozen=True)
class _Query:
    resource: str
    name: str | None
    namespace: str | None
    all_namespaces: bool
    selector: str | None


def _parse(args: tuple[str, ...]) -> _Query | None:
    """The kubectl get arguments this reader handles, or None (kubectl handles them)."""
    positional: list[str] = []
    namespace = selector = None
    all_namespaces = False
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        flag, eq, value = arg.partition("=")
        if flag in _NAMESPACE_FLAGS + _SELECTOR_FLAGS:
            if not eq:
                if not rest:
                    return None
                value = rest.pop(0)
            if flag in _NAMESPACE_FLAGS:
                namespace = value
            else:
                selector = value
        elif arg in _ALL_NAMESPACES:
            all_namespaces = True
        elif arg.startswith("-"):
            return None
        else:
            positional.append(arg)
    if len(positional) == 1 and "/" in positional[0]:
        positional = positional[0].split("/", 1)
    if not 1 <= len(positional) <= 2 or "," in positional[0]:
        return None
    name = positional[1] if len(positional) == 2 else None
    return _Query(positional[0].lower(), name, namespace, all_namespaces, selector)


class Reader:
    """GETs through one kubeconfig's client, with the API server's discovery (read once, and
    again when a resource is not in it: a CRD installed since)."""

    def __init__(self, kubeconfig: Path) -> None:
        from kubernetes import config

        self._api = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
        self._names: dict[str, _Resource] | None = None
        self._lock = threading.Lock()

    def get(self, *args: str) -> dict[str, Any] | None:
        """What `kubectl get ARGS -o json` prints, parsed; None when kubectl should answer."""
        query = _parse(args)
        if query is None:
            return None
        resource = self._resolve(query.resource)
        named = query.name is not None
        if resource is None or (named and (query.all_namespaces or query.selector)):
            return None
        path = resource.base
        if resource.namespaced and not query.all_namespaces:
            path += f"/namespaces/{quote(query.namespace or 'default', safe='')}"
        path += f"/{resource.plural}"
        if query.name is not None:
            path += f"/{quote(query.name, safe='')}"
        selector = [("labelSelector", query.selector)] if query.selector else []
        status, body = self._request(path, selector)
        if status != 200:
            return None
        doc: dict[str, Any] = json.loads(body)
        if query.name is not None:
            return doc
        items = doc.get("items") or []
        for item in items:
            item.setdefault("apiVersion", resource.group_version)
            item.setdefault("kind", resource.kind)
        return as_list(items)

    def _request(self, path: str, query: list[tuple[str, str]] | None = None) -> tuple[int, bytes]:
        """The status and body of a GET; 0 when no answer came (kubectl then tries)."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            method, url, headers, body, post = self._api.param_serialize(
                "GET", path, query_params=query or [], auth_settings=["BearerToken"],
                header_params={"Accept": "application/json"},
            )  # fmt: skip
            resp = self._api.call_api(method, url, headers, body, post, _request_timeout=_TIMEOUT_S)
        except ApiException as exc:
            return int(exc.status or 0), b""
        except HTTPError:
            return 0, b""
        return int(resp.status), bytes(resp.read())

    def _resolve(self, name: str) -> _Resource | None:
        with self._lock:
            if self._names is None or name not in self._names:
                self._names = self._discover()
            return self._names.get(name)

    def _discover(self) -> dict[str, _Resource]:
        """Every name kubectl resolves a resource by, first found first kept, in the order
        kubectl searches: the core group, then the groups in the API server's order (each at
        its preferred version)."""
        versions = ["v1"]
        status, body = self._request("/apis")
        if status == 200:
            for group in json.loads(body).get("groups", []):
                preferred = group.get("preferredVersion") or group["versions"][0]
                versions.append(preferred["groupVersion"])
        names: dict[str, _Resource] = {}
        for gv in versions:
            status, body = self._request("/api/v1" if gv == "v1" else f"/apis/{gv}")
            if status != 200:
                continue
            group = gv.rpartition("/")[0]
            for res in json.loads(body).get("resources", []):
                if "/" in res["name"] or "get" not in res.get("verbs", []):
                    continue
                found = _Resource(gv, res["name"], res["kind"], bool(res.get("namespaced")))
                singular = res.get("singularName") or res["kind"].lower()
                for key in (res["name"], singular, res["kind"].lower(), *res.get("shortNames", [])):
                    names.setdefault(key, found)
                    if group:
                        names.setdefault(f"{key}.{group}", found)
        return names


@functools.cache
def reader(kubeconfig: Path) -> Reader:
    """One reader per kubeconfig, for the whole test run."""
    return Reader(kubeconfig)


# `kubectl(*args, check=...)` of a control plane or a cluster
Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def get(kubeconfig: Path, kubectl: Kubectl, *args: str) -> dict[str, Any]:
    """`kubectl get ARGS -o json`, read in-process where the reader can, else by ``kubectl``
    (whose error then raises)."""
    got = reader(kubeconfig).get(*args)
    if got is not None:
        return got
    return dict(json.loads(kubectl("get", *args, "-o", "json").stdout))


def get_or_none(kubeconfig: Path, kubectl: Kubectl, *args: str) -> dict[str, Any] | None:
    """``get``, or None where kubectl fails (the object is not there)."""
    got = reader(kubeconfig).get(*args)
    if got is not None:
        return got
    done = kubectl("get", *args, "-o", "json", check=False)
    return dict(json.loads(done.stdout)) if done.returncode == 0 else None


def as_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    """A list as `kubectl get -o json` prints it."""
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}
