"""A TCP proxy in front of the S3 server (moto in server mode) that tests slow down or cut.

Modes: pass; throttle the bytes going to the server (uploads crawl, downloads do not); stopped
(requests in flight cut, new connections refused, as when the server process is gone); dropping
(every request taken and its connection closed unanswered). The server keeps its in-memory objects
throughout. The link notes every request with a body, so a test can act while an upload is in flight.
"""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass


@dataclass
class Upload:
    """One request with a body seen on the link: its request line and how far it got."""

    method: str
    path: str
    forwarded: int = 0  # request bytes passed on to the server so far
    answered: bool = False  # the server sent its (final) response


@dataclass
class _Exchange:
    current: Upload | None = None


class FaultyLink:
    """A TCP proxy to the S3 server that the caller can slow down, stop or make drop requests."""

    CHUNK = 64 * 1024
    REQUEST_LINE = re.compile(rb"(PUT|POST) (/\S+) HTTP/1\.[01]\r\n")
    # A final (not 100 Continue) status line, also where it arrives in one read behind a 100 Continue.
    FINAL_STATUS = re.compile(rb"(?:^|\r\n)HTTP/1\.[01] (?!100 )\d{3} ")

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self.mode = "pass"  # "pass", "stopped" or "dropping"
        self.bytes_per_s: float | None = None
        self.dropped = 0  # requests taken and left unanswered while dropping
        self.uploads: list[Upload] = []
        self._server: socket.socket | None = None
        self.port = 0
        self._listen()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def passthrough(self) -> None:
        self.mode, self.bytes_per_s = "pass", None
        if self._server is None:
            self._listen()

    def throttle(self, bytes_per_s: float) -> None:
        """Forward at most ``bytes_per_s`` towards the server: uploads crawl, downloads do not."""
        self.mode, self.bytes_per_s = "pass", bytes_per_s

    def stop(self) -> None:
        """The server is stopped: requests in flight are cut, new connections refused, until :meth:`passthrough`."""
        self.mode = "stopped"
        if self._server is not None:
            self._server.close()
            self._server = None
        self._cut_all()

    def drop(self) -> None:
        """The endpoint takes every request and closes the connection without an answer (a backend
        crashing behind a load balancer), until :meth:`passthrough`."""
        self.mode = "dropping"
        self._cut_all()

    def close(self) -> None:
        self.stop()

    def _listen(self) -> None:
        self._server = socket.create_server(("127.0.0.1", self.port))  # SO_REUSEADDR: the same port again
        self.port = int(self._server.getsockname()[1])
        threading.Thread(target=self._accept, args=(self._server,), name="faulty-link", daemon=True).start()

    def _cut_all(self) -> None:
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            if self.mode == "dropping":
                threading.Thread(target=self._leave_unanswered, args=(client,), daemon=True).start()
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _reset(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets |= {client, upstream}
            exchange = _Exchange()
            for src, dst, to_server in ((client, upstream, True), (upstream, client, False)):
                threading.Thread(target=self._pump, args=(src, dst, to_server, exchange), daemon=True).start()

    def _leave_unanswered(self, client: socket.socket) -> None:
        with contextlib.suppress(OSError):
            client.settimeout(5)
            client.recv(self.CHUNK)  # the request line and headers, at least
            self.dropped += 1
        with contextlib.suppress(OSError):
            client.shutdown(socket.SHUT_RDWR)
        client.close()

    def _pump(self, src: socket.socket, dst: socket.socket, to_server: bool, exchange: _Exchange) -> None:
        try:
            while data := src.recv(self.CHUNK):
                if to_server:
                    self._note_request(data, exchange)
                    self._send(dst, data)
                else:
                    if exchange.current and self.FINAL_STATUS.search(data):
                        exchange.current.answered = True
                    dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
                with self._lock:
                    self._sockets.discard(sock)

    def _note_request(self, data: bytes, exchange: _Exchange) -> None:
        match = self.REQUEST_LINE.search(data)
        if match:
            exchange.current = Upload(match.group(1).decode(), match.group(2).decode())
            self.uploads.append(exchange.current)
            data = data[match.start():]
        if exchange.current is not None:
            exchange.current.forwarded += len(data)

    def _send(self, dst: socket.socket, data: bytes) -> None:
        for start in range(0, len(data), 8192):
            piece = data[start:start + 8192]
            if self.mode != "pass":
                raise OSError(f"link {self.mode}")
            dst.sendall(piece)
            rate = self.bytes_per_s
            if rate:
                time.sleep(len(piece) / rate)


def _reset(sock: socket.socket) -> None:
    """Close with RST: the server behind the link cannot be reached."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
