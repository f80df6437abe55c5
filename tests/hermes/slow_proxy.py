"""A tiny HTTP proxy that delays every POST before forwarding it to the real gateway.

Why: "the gateway is slow" must be reproducible without touching the gateway. Answers come
from the real gateway, only later; ``GET /health`` is forwarded at once so the gateway still
looks alive, exactly like a gateway that is up but overloaded.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx


class SlowProxy:
    def __init__(self, target: str, delay_s: float = 2.0) -> None:
        self.target = target.rstrip("/")
        self.delay_s = delay_s
        self._http = httpx.Client(timeout=60, trust_env=False)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _forward(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if method == "POST":
                    time.sleep(proxy.delay_s)
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() in ("content-type", "authorization")
                }
                try:
                    r = proxy._http.request(
                        method, proxy.target + self.path, content=body, headers=headers
                    )
                    status, data, ctype = (
                        r.status_code,
                        r.content,
                        r.headers.get("content-type", "application/json"),
                    )
                except httpx.HTTPError:
                    status, data, ctype = 502, b'{"error":"upstream down"}', "application/json"
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up waiting: that is the point of this proxy

            def do_GET(self) -> None:
                self._forward("GET")

            def do_POST(self) -> None:
                self._forward("POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> SlowProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._http.close()
