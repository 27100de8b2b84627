"""A loopback TCP proxy in front of the real apiserver that a test can break (issue 23 item 8).

The operator or an adapter connects to the proxy instead of the apiserver (same TLS: the proxy
relays bytes, and the apiserver's certificate names 127.0.0.1). The test then:

- `stall()`: every connection, open or new, stops relaying in both directions: the client's
  requests are accepted by the kernel and never answered, as when the apiserver is frozen or a
  NAT or load balancer dropped the flow;
- `heal()`: new connections relay again; the stalled ones stay stalled for good (half-open:
  nobody will ever answer or close them, which only a client's read timeout ends);
- `reset()`: every connection, open or new, is closed with a TCP RST (a restarting apiserver);
  `heal()` ends it.
"""

from __future__ import annotations

import gc
import select
import socket
import struct
import threading
import warnings
from pathlib import Path
from typing import Literal

import pytest

Mode = Literal["pass", "stall", "reset"]
# A connection the proxy resets before the client's TLS handshake leaves CPython's SSLSocket
# unclosed (ssl.SSLSocket._create raises from getpeername() after it took the socket's file
# descriptor); the garbage collector closes it, with a ResourceWarning that pytest would turn
# into an error of whichever test is running then. Only the tests that reset connections wear
# this mark, and their modules use `collect_reset_sockets` at their end.
RESET_LEAVES_SOCKETS_TO_GC = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnraisableExceptionWarning"
)
CHUNK = 65536


class FaultProxy:
    """Relays 127.0.0.1:<port> to ``target``; `stall`, `heal` and `reset` break it."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.mode: Mode = "pass"
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._stalled: set[socket.socket] = set()  # never relayed again, never closed
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.connections = 0
        threading.Thread(target=self._accept, name="fault-proxy", daemon=True).start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def kubeconfig(self, original: Path, path: Path) -> Path:
        """A copy of ``original`` whose server is this proxy."""
        text = original.read_text()
        server = f"https://{self.target[0]}:{self.target[1]}"
        assert server in text, f"{server} not in {original}"
        path.write_text(text.replace(server, self.url))
        return path

    def stall(self) -> None:
        with self._lock:
            self.mode = "stall"
            self._stalled |= self._open

    def heal(self) -> None:
        with self._lock:
            self.mode = "pass"

    def reset(self) -> None:
        with self._lock:
            self.mode = "reset"
            for sock in list(self._open):
                _rst(sock)
            self._open.clear()

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        with self._lock:
            for sock in self._open | self._stalled:
                sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            with self._lock:
                if self.mode == "reset":
                    _rst(client)
                    continue
                stalled = self.mode == "stall"
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                _rst(client)
                continue
            with self._lock:
                self._open |= {client, upstream}
                if stalled:
                    self._stalled |= {client, upstream}
            threading.Thread(target=self._relay, args=(client, upstream), daemon=True).start()

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        pair = {client: upstream, upstream: client}
        while not self._closed.is_set():
            with self._lock:
                if client in self._stalled or client not in self._open:
                    break
            try:
                readable, _, _ = select.select(list(pair), [], [], 0.1)
                for sock in readable:
                    data = sock.recv(CHUNK)
                    if not data:
                        raise ConnectionResetError
                    with self._lock:
                        if client in self._stalled:
                            break  # stalled meanwhile: these bytes are never delivered
                    pair[sock].sendall(data)
            except (OSError, ValueError):  # ValueError: a socket `reset` closed meanwhile
                with self._lock:
                    self._open -= {client, upstream}
                for sock in pair:
                    sock.close()
                return
        # Stalled: keep both sockets open and silent for good (or until the proxy closes).


def _rst(sock: socket.socket) -> None:
    """Close with a TCP RST instead of a FIN (SO_LINGER with a zero timeout)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    except OSError:
        pass


def collect_reset_sockets() -> None:
    """Close now the sockets that resets left behind (held until then by a pool, a frame or a
    finished thread's result), their ResourceWarning expected: called at the end of a module
    that resets connections, so the collector does not find them in the next module's first
    test (seen: test_api_parity after test_api_faults, test_monitoring_alerts after
    test_leader_lease)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        for _ in range(3):
            gc.collect()
