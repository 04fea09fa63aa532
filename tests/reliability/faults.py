"""Small purpose-built fault servers on 127.0.0.1, for what :class:`StubServer` cannot do.

The stub speaks correct HTTP and fails inside it (statuses, cut streams, bad events). The faults
here sit below or around HTTP: a proxy that refuses to forward, a TCP peer that never answers,
a plain-HTTP port where TLS was expected, a TLS server with a certificate nobody trusts, chunked
framing that is not chunked framing. Each runs a blocking handler per connection in a daemon
thread; ``stop()`` wakes the handlers that wait forever and closes every socket::

    with FaultServer(answer_407) as proxy:
        env["HTTP_PROXY"] = proxy.url
        ...
        assert proxy.connections == 5  # one try and four retries
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

__all__ = [
    "FaultServer",
    "Handler",
    "answer_407",
    "bad_chunk_after_text",
    "hang",
    "not_tls",
    "read_request",
    "self_signed_context",
    "short_content_length",
    "sse_event",
]

Handler = Callable[[socket.socket, "FaultServer"], None]
"""Serves one accepted connection; returns when it is done with it (the socket is then closed)."""

_HEAD_LIMIT = 1 << 16


class FaultServer:
    """A TCP listener on 127.0.0.1:0 handing each connection to ``handler`` in its own thread.

    With ``tls``, each connection is wrapped server-side first; a handshake the client abandons
    (it refused our certificate) just ends that connection.
    """

    def __init__(self, handler: Handler, *, tls: ssl.SSLContext | None = None) -> None:
        self._handler = handler
        self._tls = tls
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.stopping = threading.Event()
        """Set by :meth:`stop`; handlers that hang wait on it."""
        self._lock = threading.Lock()
        self._connections = 0
        self._open: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, name="fault-accept", daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (use it as a base URL or a proxy URL)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def connections(self) -> int:
        """TCP connections accepted so far."""
        with self._lock:
            return self._connections

    def start(self) -> None:
        self._acceptor.start()

    def stop(self) -> None:
        self.stopping.set()
        # shutdown() wakes a thread blocked in accept(); close() alone does not, on Linux.
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            open_sockets = list(self._open)
        for conn in open_sockets:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._acceptor.join(timeout=5)
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> FaultServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # the listener was closed: we are stopping
            with self._lock:
                self._connections += 1
                self._open.add(conn)
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self._tls is not None:
                wrapped = self._tls.wrap_socket(conn, server_side=True)
                with self._lock:
                    self._open.add(wrapped)
                self._handler(wrapped, self)
            else:
                self._handler(conn, self)
        except (OSError, ssl.SSLError):
            pass  # the client went away or refused the handshake: that is the fault we serve
        finally:
            with self._lock:
                self._open.discard(conn)
            with contextlib.suppress(OSError):
                conn.close()


def read_request(conn: socket.socket) -> bytes:
    """Read one request head, and its body when it has a Content-Length; return the head."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = conn.recv(65536)
        if not piece:
            return data
        data += piece
        if len(data) > _HEAD_LIMIT:
            return data
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        piece = conn.recv(65536)
        if not piece:
            break
        body += piece
    return head


def sse_event(content: str, finish_reason: str | None = None) -> bytes:
    """One DeepSeek-shaped ``data:`` event carrying ``content``."""
    chunk = {
        "id": "chatcmpl-fault",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish_reason}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


_STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\n"
    b"Content-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\n"
    b"x-request-id: fault-1\r\n\r\n"
)


def answer_407(conn: socket.socket, server: FaultServer) -> None:
    """A proxy that wants credentials we do not have."""
    read_request(conn)
    conn.sendall(
        b"HTTP/1.1 407 Proxy Authentication Required\r\n"
        b'Proxy-Authenticate: Basic realm="faults"\r\n'
        b"Content-Length: 0\r\n\r\n"
    )


def hang(conn: socket.socket, server: FaultServer) -> None:
    """Accept, read the request, and never answer (until the server stops)."""
    read_request(conn)
    server.stopping.wait()


def not_tls(conn: socket.socket, server: FaultServer) -> None:
    """A plain-HTTP server meeting a TLS ClientHello: it answers 400 in clear text."""
    conn.recv(65536)
    conn.sendall(
        b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 38\r\n"
        b"Connection: close\r\n\r\nThis port speaks plain HTTP, not TLS.\n"
    )


def bad_chunk_after_text(conn: socket.socket, server: FaultServer) -> None:
    """An event stream whose chunked framing turns to garbage after some text was sent."""
    read_request(conn)
    event = sse_event("Some text, then ")
    conn.sendall(_STREAM_HEAD + b"%x\r\n%s\r\n" % (len(event), event))
    server.stopping.wait(0.2)  # let the text reach the client as its own read
    conn.sendall(b"zz-not-a-chunk-size\r\n\r\n")
    server.stopping.wait(1.0)  # let the client see the garbage before the close


def short_content_length(conn: socket.socket, server: FaultServer) -> None:
    """An event stream with a Content-Length it does not keep: closed after some text."""
    read_request(conn)
    event = sse_event("Half an answer")
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(event) + 1000, event)
    )
    server.stopping.wait(0.2)


def self_signed_context(directory: Path) -> ssl.SSLContext | None:
    """A server context with a fresh self-signed certificate for 127.0.0.1; None without openssl."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context
