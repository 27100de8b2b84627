"""A runner's status port on loopback that answers one byte at a time (issue 34 case 4): each
byte well within a socket timeout, the whole answer as slow as the test likes."""

from __future__ import annotations

import socket
import threading

HEAD = b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n"


class DrippingBoard:
    """Serves ``body`` (a runner's status document) after an HTTP head, one byte every
    ``pause`` seconds, to every connection, until `close`."""

    def __init__(self, body: bytes, pause: float) -> None:
        self.answer = HEAD + body
        self.pause = pause
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(4096)
            for byte in self.answer:
                if self.stop.wait(self.pause):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

    def close(self) -> None:
        self.stop.set()
        self.listener.close()
