"""``rediss://``: TLS with a private CA, and the two ways of getting TLS wrong.

A CA and a server certificate for IP 127.0.0.1 are made with ``openssl`` per
module; redis-server listens on TLS only (``--port 0 --tls-port P``).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

import fencelock
from fencelock.fencing import RedisGuard
from tests.redis.conftest import Background, ServerPool
from tests.servers import RedisServer, free_port, require

HANG_BOUND = 10.0  # "not a hang": generous, see RETRY_BUG in test_redis_errors.py


@dataclass(frozen=True)
class Certs:
    ca: Path
    cert: Path
    key: Path


def _openssl(workdir: Path, *args: str) -> None:
    done = subprocess.run(
        [require("openssl"), *args], cwd=workdir, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed:\n{done.stderr}")


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """A throwaway CA and a server certificate for 127.0.0.1 signed by it."""
    d = tmp_path_factory.mktemp("tls")
    (d / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl(
        d,
        *("req", "-x509", "-new", "-nodes", "-newkey", "rsa:2048", "-days", "2"),
        *("-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=fencelock test CA"),
    )
    _openssl(
        d,
        *("req", "-new", "-nodes", "-newkey", "rsa:2048"),
        *("-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1"),
    )
    _openssl(
        d,
        *("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key"),
        *("-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "san.cnf"),
    )
    return Certs(ca=d / "ca.crt", cert=d / "server.crt", key=d / "server.key")


class TLSRedisServer(RedisServer):
    """redis-server on a TLS port only; ``port`` is the TLS port."""

    def __init__(self, workdir: Path, certs: Certs) -> None:
        tls_port = free_port()
        super().__init__(
            workdir,
            *("--port", "0", "--tls-port", str(tls_port)),  # the later --port 0 wins
            *("--tls-cert-file", str(certs.cert), "--tls-key-file", str(certs.key)),
            *("--tls-ca-cert-file", str(certs.ca), "--tls-auth-clients", "no"),
            port=tls_port,
            name="redis-tls",
        )
        self.certs = certs

    @property
    def url(self) -> str:
        return f"rediss://127.0.0.1:{self.port}/0?ssl_ca_certs={self.certs.ca}"

    def ready(self) -> bool:
        """A PING over TLS, verified against the test CA."""
        context = ssl.create_default_context(cafile=str(self.certs.ca))
        try:
            with (
                socket.create_connection(("127.0.0.1", self.port), timeout=2) as raw,
                context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
            ):
                tls.sendall(b"PING\r\n")
                return tls.recv(64).startswith(b"+PONG")
        except (OSError, ssl.SSLError):
            return False


@pytest.fixture(scope="module")
def tls_redis(module_servers: ServerPool, certs: Certs) -> TLSRedisServer:
    return module_servers.add(TLSRedisServer(module_servers.workdir("tls-redis"), certs))


def test_rediss_with_the_ca_locks(tls_redis: TLSRedisServer, name: str) -> None:
    with fencelock.connect(tls_redis.url) as client:
        with client.lock(name, ttl=5) as first:
            info = client.inspect(name)
            assert info is not None and info.owner == first.owner and first.token > 0
        with client.lock(name, ttl=5) as second:
            assert second.token > first.token
        info = client.inspect(name)
        assert info is not None and not info.held and info.token == second.token


def test_rediss_asyncio_locks(tls_redis: TLSRedisServer, name: str) -> None:
    async def twice() -> tuple[int, int]:
        async with fencelock.aconnect(tls_redis.url) as client:
            async with client.lock(name, ttl=5) as first:
                pass
            async with client.lock(name, ttl=5) as second:
                return first.token, second.token

    first, second = asyncio.run(twice())
    assert 0 < first < second


def test_redis_guard_over_tls(tls_redis: TLSRedisServer, name: str) -> None:
    guard = RedisGuard(tls_redis.url)
    try:
        guard.write(name, 2, f"{{{name}}}:data", "two")
        with pytest.raises(fencelock.StaleToken):
            guard.write(name, 1, f"{{{name}}}:data", "one")
        assert guard.last(name) == 2 and guard.rejections == 1
    finally:
        guard.close()


def test_plain_redis_to_the_tls_port_fails_clearly(tls_redis: TLSRedisServer) -> None:
    where = f"127.0.0.1:{tls_redis.port}"
    attempt = Background(lambda: fencelock.connect(f"redis://{where}/0?timeout=1"))
    assert attempt.wait(HANG_BOUND), f"plain client to a TLS port hangs\n{tls_redis.log()}"
    assert isinstance(attempt.error, fencelock.BackendUnavailable), attempt.outcome()
    assert f"Redis at {where}" in str(attempt.error), str(attempt.error)


def test_rediss_without_the_ca_fails_certificate_verification(tls_redis: TLSRedisServer) -> None:
    where = f"127.0.0.1:{tls_redis.port}"
    attempt = Background(lambda: fencelock.connect(f"rediss://{where}/0?timeout=1"))
    assert attempt.wait(HANG_BOUND), f"TLS client without the CA hangs\n{tls_redis.log()}"
    error = attempt.error
    assert isinstance(error, fencelock.BackendUnavailable), attempt.outcome()
    assert f"Redis at {where}" in str(error), str(error)
    assert "certificate verify failed" in str(error), str(error)
