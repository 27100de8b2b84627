"""kopf's login: the client's credentials in an aiohttp session with a bounded connection pool.

kopf's own session (`kopf.login_via_client`) has an unbounded pool (aiohttp `limit=0`): every
request sent while the others are in flight opens another TLS connection, and the pool keeps
it. Each one holds asyncio's 256 KiB read buffer (`asyncio/sslproto.py`, `max_size`) and
OpenSSL's buffers, so the burst of patches after a `kubectl apply` of hundreds of objects
left about 90 connections and 25 MB resident at 300 objects (docs/benchmarks.md, "Memory").
This login reads the same credentials and bounds the pool: each watch stream holds a
connection while it lasts, so the bound is the streams plus `REQUEST_CONNECTIONS`; more
requests at once wait for a free connection instead of opening one.

The session also bounds the time to connect and between two reads (`timeouts`), as the
operator's own client does (`kube_cluster`); kopf passes its own per-request timeouts too,
from `kopf_handlers.kopf_settings` (issue 23 item 8).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any, Final

import aiohttp
import kopf

from warmgate.kube.controller_metrics import observe_request

# Connections for kopf's short requests (patches, Events, keep-alives), beside the streams.
REQUEST_CONNECTIONS: Final = 16
# Streams besides the operator's kinds, once for the operator: kopf's CRD and namespace
# observers (a bound, not an exact count: a namespaced operator runs neither).
STREAMS_PER_OPERATOR: Final = 2

Login = Callable[..., Awaitable[kopf.AiohttpSession | None]]


def connection_limit(kinds: int, namespaces: int, requests: int = REQUEST_CONNECTIONS) -> int:
    """Connections for a watch of ``kinds`` kinds in each namespace (0: cluster-wide)."""
    scopes = max(1, namespaces)
    return kinds * scopes + STREAMS_PER_OPERATOR + requests


def bounded_login(limit: int, timeouts: tuple[float, float] = (5.0, 30.0)) -> Login:
    """A kopf login handler: `kopf.login_via_client`'s credentials, at most ``limit``
    connections, (connect, read) ``timeouts`` in seconds."""
    connect, read = timeouts

    async def login_with_bounded_pool(
        logger: kopf.Logger, settings: kopf.OperatorSettings, **kwargs: Any
    ) -> kopf.AiohttpSession | None:
        info = kopf.login_via_client(logger=logger, settings=settings, **kwargs)
        if info is None:
            return None
        with warnings.catch_warnings():  # as kopf does: its basic-auth helper is deprecated
            warnings.filterwarnings("ignore", category=DeprecationWarning, module="kopf")
            auth = info.as_aiohttp_basic_auth()
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=limit, ssl=info.as_ssl_context()),
            timeout=aiohttp.ClientTimeout(sock_connect=connect, sock_read=read),
            headers=info.as_http_headers(),
            auth=auth,
            proxy=info.proxy_url,
            trust_env=info.trust_env,
            trace_configs=[request_metrics()],
        )
        return kopf.AiohttpSession(
            server=info.server,
            priority=info.priority,
            default_namespace=info.default_namespace,
            expiration=info.expiration,
            aiohttp_session=session,
        )

    return login_with_bounded_pool


def _host(url: Any) -> str:
    """Host and port as the server URL writes them (the operator's client's `host` label)."""
    host = str(url.raw_host or "")
    return f"{host}:{url.port}" if url.explicit_port is not None else host


def request_metrics() -> aiohttp.TraceConfig:
    """kopf's requests in `rest_client_requests_total` and
    `rest_client_request_duration_seconds` (`controller_metrics`): the status of the answer,
    or `<error>` without one; the time until its headers (a watch stream: until it started)."""
    trace = aiohttp.TraceConfig()

    async def start(_: Any, context: SimpleNamespace, __: Any) -> None:
        context.started = time.perf_counter()

    async def end(_: Any, context: SimpleNamespace, params: aiohttp.TraceRequestEndParams) -> None:
        seconds = time.perf_counter() - context.started
        observe_request(params.method, _host(params.url), params.response.status, seconds)

    async def failed(
        _: Any, context: SimpleNamespace, params: aiohttp.TraceRequestExceptionParams
    ) -> None:
        seconds = time.perf_counter() - context.started
        observe_request(params.method, _host(params.url), None, seconds)

    trace.on_request_start.append(start)
    trace.on_request_end.append(end)
    trace.on_request_exception.append(failed)
    return trace


__all__ = ["REQUEST_CONNECTIONS", "bounded_login", "connection_limit", "request_metrics"]
