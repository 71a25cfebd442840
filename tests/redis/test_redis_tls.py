"""``rediss://``: TLS with a private CA, and the two ways of getting TLS wrong.

A CA and a server certificate for IP 127.0.0.1 are made with ``openssl`` per
module; redis-server listens on TLS only (``--port 0 --tls-port P``).
"""

from __future__ import annotations

import asyncio

import pytest

import fencelock
from fencelock.fencing import RedisGuard
from fencelock.testing import RedisServer, ServerPool, TLSFiles, make_certificates
from tests.redis.conftest import Background

HANG_BOUND = 10.0  # "not a hang": generous, see RETRY_BUG in test_redis_errors.py


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    """A throwaway CA and a server certificate for 127.0.0.1 signed by it."""
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_redis(module_servers: ServerPool, certs: TLSFiles) -> RedisServer:
    """redis-server on a TLS port only (``--port 0 --tls-port P``); ``port`` is P."""
    return module_servers.redis(tls=certs, name="redis-tls")


def test_rediss_with_the_ca_locks(tls_redis: RedisServer, name: str) -> None:
    with fencelock.connect(tls_redis.url) as client:
        with client.lock(name, ttl=5) as first:
            info = client.inspect(name)
            assert info is not None
            assert info.owner == first.owner
            assert first.token > 0
        with client.lock(name, ttl=5) as second:
            assert second.token > first.token
        info = client.inspect(name)
        assert info is not None
        assert not info.held
        assert info.token == second.token


def test_rediss_asyncio_locks(tls_redis: RedisServer, name: str) -> None:
    async def twice() -> tuple[int, int]:
        async with fencelock.aconnect(tls_redis.url) as client:
            async with client.lock(name, ttl=5) as first:
                pass
            async with client.lock(name, ttl=5) as second:
                return first.token, second.token

    first, second = asyncio.run(twice())
    assert 0 < first < second


def test_redis_guard_over_tls(tls_redis: RedisServer, name: str) -> None:
    guard = RedisGuard(tls_redis.url)
    try:
        guard.write(name, 2, f"{{{name}}}:data", "two")
        with pytest.raises(fencelock.StaleToken):
            guard.write(name, 1, f"{{{name}}}:data", "one")
        assert guard.last(name) == 2
        assert guard.rejections == 1
    finally:
        guard.close()


def test_plain_redis_to_the_tls_port_fails_clearly(tls_redis: RedisServer) -> None:
    where = f"127.0.0.1:{tls_redis.port}"
    attempt = Background(lambda: fencelock.connect(f"redis://{where}/0?timeout=1"))
    assert attempt.wait(HANG_BOUND), f"plain client to a TLS port hangs\n{tls_redis.log()}"
    assert isinstance(attempt.error, fencelock.BackendUnavailable), attempt.outcome()
    assert f"Redis at {where}" in str(attempt.error), str(attempt.error)


def test_rediss_without_the_ca_fails_certificate_verification(tls_redis: RedisServer) -> None:
    where = f"127.0.0.1:{tls_redis.port}"
    attempt = Background(lambda: fencelock.connect(f"rediss://{where}/0?timeout=1"))
    assert attempt.wait(HANG_BOUND), f"TLS client without the CA hangs\n{tls_redis.log()}"
    error = attempt.error
    assert isinstance(error, fencelock.BackendUnavailable), attempt.outcome()
    assert f"Redis at {where}" in str(error), str(error)
    assert "certificate verify failed" in str(error), str(error)
