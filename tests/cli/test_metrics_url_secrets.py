"""``fencelock stats URL`` and ``top --metrics URL``: a metrics address's password never
reaches a line they print (shown as ``***``, as every backend URL is), and it is sent
as HTTP basic auth, to that host only."""

from __future__ import annotations

import base64
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from .conftest import fencelock_cmd

SECRET = "TopS3cretPW"


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _commands(url: str) -> list[list[str]]:
    return [["stats", url], ["stats", "--json", url], ["top", "--once", "--metrics", url]]


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("http://u:{S}@127.0.0.1:{port}/metrics", 69),
        ("https://u:{S}@127.0.0.1:{port}/metrics", 69),
        ("http://u:{S}@127.0.0.1:{port}/a b", 69),  # urllib quotes the path in its error
        ("http://u:{S}@127.0.0.1:notaport/", 69),
        ("http://u:{S}@[::1/", 69),
        ("http://u:%40{S}@127.0.0.1:{port}/", 69),  # percent-encoded
        ("http://u:x@{S}@127.0.0.1:{port}/", 69),  # a raw '@' in it
        ("u:{S}@127.0.0.1:{port}/metrics", 64),  # no scheme
    ],
)
def test_an_unreachable_address_is_shown_without_its_password(
    env: dict[str, str], url: str, code: int
) -> None:
    address = url.format(S=SECRET, port=_closed_port())
    for args in _commands(address):
        done = fencelock_cmd(env, *args)
        assert done.returncode == code, (args, done.stderr)
        assert SECRET not in done.stdout + done.stderr, done.stderr
        assert "***" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


class _Guarded(BaseHTTPRequestHandler):
    """Metrics (none yet) for ``scraper:SECRET`` only."""

    def do_GET(self) -> None:
        wanted = "Basic " + base64.b64encode(f"scraper:{SECRET}".encode()).decode()
        if self.headers.get("Authorization") != wanted:
            self.send_response(401)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"# no fencelock metrics yet\n")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def guarded() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Guarded)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_the_password_goes_as_basic_auth(env: dict[str, str], guarded: int) -> None:
    good = f"http://scraper:{SECRET}@127.0.0.1:{guarded}/metrics"
    for args in _commands(good):
        done = fencelock_cmd(env, *args)
        assert done.returncode == 0, (args, done.stderr)
        assert SECRET not in done.stdout + done.stderr
    bad = f"http://scraper:wrong{SECRET}@127.0.0.1:{guarded}/metrics"
    for args in _commands(bad):
        refused = fencelock_cmd(env, *args)
        assert refused.returncode == 69, refused.stderr
        assert "Unauthorized" in refused.stderr, refused.stderr
        assert SECRET not in refused.stdout + refused.stderr
