"""The HTTP endpoint Prometheus scrapes (imported only when :func:`fencelock.metrics.serve`
is called: ``http.server`` is a tenth of ``import fencelock`` otherwise)."""

from __future__ import annotations

import http.server
import threading

from fencelock.errors import ConfigError
from fencelock.metrics.exposition import render
from fencelock.metrics.registry import Registry


class _Scrapes(http.server.BaseHTTPRequestHandler):
    registry: Registry

    def do_GET(self) -> None:
        body = render(self.registry.snapshot().values()).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # a scrape every few seconds is no news


def serve(registry: Registry, port: int, host: str = "127.0.0.1") -> http.server.HTTPServer:
    """Answer scrapes of ``registry`` at ``http://host:port/metrics`` on a daemon thread;
    the server returned (``shutdown()`` stops it; its ``server_port`` says the port)."""
    handler = type("Scrapes", (_Scrapes,), {"registry": registry})
    try:
        server = http.server.ThreadingHTTPServer((host, port), handler)
    except (OSError, OverflowError, TypeError) as exc:
        raise ConfigError(f"metrics: cannot serve scrapes on {host}:{port}: {exc}") from exc
    thread = threading.Thread(target=server.serve_forever, name="fencelock-metrics", daemon=True)
    thread.start()
    return server
