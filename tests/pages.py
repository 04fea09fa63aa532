"""A loopback web server for ``web_fetch`` tests: real pages, and the hostile ones.

    with PageServer() as pages:
        pages.url("/page")          # http://127.0.0.1:<port>/page
        pages.hits                  # the paths requested, in order (a refused fetch adds none)

Routes: ``/page`` (HTML with a title, a table, code, a script and a ``data:`` image),
``/text`` (plain text), ``/loop-a`` <-> ``/loop-b`` (a redirect loop), ``/to-metadata`` (a
redirect to ``169.254.169.254``), ``/to-other-host`` (a redirect to ``localhost``), ``/big``
(50 MB, with its Content-Length), ``/big-chunked`` (50 MB without one), ``/broken`` (bytes that
are not UTF-8, said to be), ``/unknown-charset``, ``/binary`` (a PNG), ``/missing`` (404).
"""

from __future__ import annotations

import http.server
import os
import threading
from types import TracebackType

__all__ = ["PAGE_HTML", "PageServer"]

PAGE_HTML = (
    "<!doctype html><html><head><title>Release notes</title>"
    "<script>document.write('no')</script><style>p{}</style></head><body>"
    "<h1>Release notes</h1><p>Version <b>2.0</b> is out. See <a href='/text'>the text</a>.</p>"
    "<table><tr><th>Name</th><th>Size</th></tr><tr><td>core</td><td>12</td></tr></table>"
    "<pre><code>pip install thing</code></pre>"
    "<img alt='logo' src='data:image/png;base64," + "A" * 5000 + "'>"
    "</body></html>"
)
_MB = 1024 * 1024


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: a test reads :attr:`PageServer.hits`."""

    def do_GET(self) -> None:
        self.server.hits.append(self.path)
        route = getattr(self, "_" + self.path.strip("/").replace("-", "_"), None)
        if route is None:
            self._send(404, "text/html", b"<h1>not here</h1>")
            return
        route()

    def _send(self, status: int, kind: str, body: bytes, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, where: str) -> None:
        self._send(302, "text/html", b"", Location=where)

    def _page(self) -> None:
        self._send(200, "text/html; charset=utf-8", PAGE_HTML.encode())

    def _text(self) -> None:
        self._send(200, "text/plain", b"plain words\n")

    def _loop_a(self) -> None:
        self._redirect("/loop-b")

    def _loop_b(self) -> None:
        self._redirect("/loop-a")

    def _to_metadata(self) -> None:
        self._redirect("http://169.254.169.254/latest/meta-data/iam/security-credentials/")

    def _to_other_host(self) -> None:
        self._redirect(f"http://localhost:{self.server.server_address[1]}/page")

    def _big(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(50 * _MB))
        self.end_headers()
        self._stream(50)

    def _big_chunked(self) -> None:
        self.protocol_version = "HTTP/1.0"  # no length: the body ends when the server closes
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self._stream(50)
        self.close_connection = True

    def _stream(self, megabytes: int) -> None:
        chunk = b"<p>" + b"x" * (_MB - 8) + b"</p>\n\n"
        try:
            for _ in range(megabytes):
                self.wfile.write(chunk)
        except (BrokenPipeError, ConnectionResetError):
            self.server.cut_short = True  # the client stopped reading: what a cap does

    def _broken(self) -> None:
        self._send(200, "text/html; charset=utf-8", os.urandom(4096) + b"\xff\xfe" * 2000)

    def _unknown_charset(self) -> None:
        self._send(200, "text/html; charset=x-no-such-encoding", b"<p>hello</p>")

    def _binary(self) -> None:
        self._send(200, "image/png", b"\x89PNG\r\n\x1a\n" + b"\0" * 100)

    def _missing(self) -> None:
        self._send(404, "text/html", b"<h1>Not Found</h1><p>no such page</p>")


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.hits: list[str] = []
        self.cut_short = False


class PageServer:
    """The routes above on 127.0.0.1, in a thread."""

    def __init__(self) -> None:
        self._server = _Server()
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def hits(self) -> list[str]:
        return list(self._server.hits)

    @property
    def cut_short(self) -> bool:
        """A download was stopped by the client before the page's end."""
        return self._server.cut_short

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def __enter__(self) -> PageServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
