"""A redis-py client or pool handed to connect(): its settings, fencelock's connections."""

from __future__ import annotations

import asyncio
from pathlib import Path

import redis
import redis.asyncio

import fencelock
from fencelock.backends.redis.from_client import url_from_redis
from fencelock.testing import ServerPool

PASSWORD = "p#ss/w:rd@1"  # characters a URL must escape


def test_connect_takes_a_redis_client_with_its_password(servers: ServerPool, name: str) -> None:
    server = servers.redis("--requirepass", PASSWORD)
    app = redis.Redis(host="127.0.0.1", port=server.port, db=3, password=PASSWORD)
    with fencelock.connect(app) as client, client.lock(name) as lease:
        assert lease.token > 0
        assert app.exists(f"fencelock:{{{name}}}") == 1  # db 3, as the client said
    app.close()


def test_connect_takes_a_connection_pool_and_url_options(servers: ServerPool, name: str) -> None:
    server = servers.redis("--requirepass", PASSWORD)
    pool = redis.ConnectionPool(
        host="127.0.0.1", port=server.port, password=PASSWORD, socket_timeout=1.5
    )
    with fencelock.connect(pool, wait_replicas=0) as client:
        assert client.lock(name).try_acquire() is not None
    pool.disconnect()


def test_aconnect_takes_an_asyncio_client(servers: ServerPool, name: str) -> None:
    server = servers.redis("--requirepass", PASSWORD)

    async def main() -> int:
        app = redis.asyncio.Redis(host="127.0.0.1", port=server.port, password=PASSWORD)
        async with fencelock.aconnect(app) as client, client.lock(name) as lease:
            token = lease.token
        await app.aclose()
        return token

    assert asyncio.run(main()) > 0


def test_the_derived_url_keeps_settings_and_hides_nothing_it_needs() -> None:
    app = redis.Redis(
        host="::1",
        port=7000,
        db=2,
        username="app",
        password=PASSWORD,
        socket_timeout=0.5,
        socket_connect_timeout=1,
    )
    assert url_from_redis(app) == (
        "redis://app:p%23ss%2Fw%3Ard%401@[::1]:7000/2?timeout=0.5&connect_timeout=1.0"
    )
    tls = redis.Redis(host="h", ssl=True, ssl_ca_certs="/ca.pem", ssl_cert_reqs="required")
    assert url_from_redis(tls).startswith("rediss://h:6379/0?")
    assert "ssl_ca_certs=%2Fca.pem" in url_from_redis(tls)
    assert "ssl_cert_reqs=required" in url_from_redis(tls)


def test_connect_takes_a_unix_socket_client(servers: ServerPool, name: str, tmp_path: Path) -> None:
    socket = tmp_path / "redis.sock"
    servers.redis("--unixsocket", str(socket), "--requirepass", PASSWORD, name="unix")
    app = redis.Redis(unix_socket_path=str(socket), db=2, password=PASSWORD, socket_timeout=1.5)
    assert url_from_redis(app) == (f"redis+unix://:p%23ss%2Fw%3Ard%401@{socket}?db=2&timeout=1.5")
    with fencelock.connect(app) as client, client.lock(name) as lease:
        assert lease.token > 0
        assert app.exists(f"fencelock:{{{name}}}") == 1  # db 2, as the client said
    app.close()
