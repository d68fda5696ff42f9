"""An HTTP server on 127.0.0.1 (a free port) in a daemon thread: the accounting endpoint's, and
any local OpenAI-style stand-in's."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackServer:
    """Serves `handler` on 127.0.0.1 until `close`; `base_url` is its OpenAI-style root."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], name: str = "tmem-http") -> None:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, name=name, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
