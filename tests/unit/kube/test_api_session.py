"""kopf's login (kube/api_session.py): the client's credentials, a bounded connection pool."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from kubernetes import client
from kubernetes.config import kube_config

from warmgate.kube import api_session, children, controller_metrics
from warmgate.runtime.kopf_handlers import kopf_settings

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: secret-token}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: ns1}}]
current-context: x
"""


@pytest.fixture
def kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    # The client reads $KUBECONFIG once, at its import.
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)  # not in-cluster
    saved = client.Configuration.get_default_copy()
    yield
    client.Configuration.set_default(saved)  # login_via_client sets the client's default


def test_the_pool_holds_every_watch_stream_and_room_for_requests() -> None:
    kinds = len(children.WATCHED) + 1  # the children and the SpecDecodeDeployments
    for namespaces in (0, 1, 3):
        streams = kinds * max(1, namespaces) + 2  # + the CRD and namespace observers
        limit = api_session.connection_limit(kinds, namespaces)
        assert limit == streams + api_session.REQUEST_CONNECTIONS


@pytest.mark.usefixtures("kubeconfig")
def test_the_login_carries_the_clients_credentials_into_a_bounded_pool() -> None:
    login = api_session.bounded_login(limit=25, timeouts=(3.0, 7.0))

    async def log_in() -> tuple[str, int | None, str, tuple[float | None, float | None]]:
        info = await login(logger=logging.getLogger("test"), settings=kopf_settings())
        assert info is not None
        session = info.aiohttp_session
        limit = session.connector.limit if session.connector is not None else None
        await session.close()
        timeout = (session.timeout.sock_connect, session.timeout.sock_read)
        return info.server, limit, session.headers["Authorization"], timeout

    found = asyncio.run(log_in())
    assert found == ("https://127.0.0.1:6443", 25, "Bearer secret-token", (3.0, 7.0))


def _requests(code: str, method: str, host: str) -> float:
    return float(controller_metrics.REST_REQUESTS.labels(code, method, host)._value.get())


def test_kopfs_requests_are_counted_as_client_gos_with_code_method_and_host() -> None:
    # Issue 37: rest_client_requests_total{code,method,host} for kopf's session too.
    async def ok(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def main() -> tuple[str, str]:
        app = web.Application()
        app.router.add_get("/ok", ok)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))
        gone = closed.getsockname()[1]
        closed.close()  # nothing listens there: the request gets no answer
        async with aiohttp.ClientSession(trace_configs=[api_session.request_metrics()]) as s:
            async with s.get(f"http://127.0.0.1:{port}/ok") as answer:
                assert answer.status == 200
            with pytest.raises(aiohttp.ClientConnectionError):
                await s.get(f"http://127.0.0.1:{gone}/")
        await runner.cleanup()
        return f"127.0.0.1:{port}", f"127.0.0.1:{gone}"

    served, refused = asyncio.run(main())
    assert _requests("200", "GET", served) == 1
    assert _requests("<error>", "GET", refused) == 1
    latency = controller_metrics.REST_LATENCY.labels("GET", served)
    assert sum(bucket.get() for bucket in latency._buckets) == 1
