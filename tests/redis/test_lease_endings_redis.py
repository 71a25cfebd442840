"""A lease whose server goes away: how it ends, what the caller is told."""

from __future__ import annotations

import asyncio
import logging

import pytest

import fencelock
from fencelock.testing import RedisServer, ServerPool, free_port


def test_release_after_the_server_died_raises_lease_lost_with_the_cause(
    servers: ServerPool, name: str
) -> None:
    server = servers.redis()
    with fencelock.connect(server.url + "?timeout=0.5") as client:
        lease = client.lock(name, ttl=1).acquire()
        server.kill()
        assert lease.wait_lost(10)
        assert "last renewal failed: cannot reach Redis" in (lease.lost_reason or "")
        with pytest.raises(fencelock.LeaseLost) as raised:
            lease.release()
        assert isinstance(raised.value.__cause__, fencelock.BackendUnavailable)
        lease.release()  # no-op


def test_leaving_with_after_the_server_died_raises_lease_lost(
    servers: ServerPool, name: str
) -> None:
    server = servers.redis()
    client = fencelock.connect(server.url + "?timeout=0.5")

    def hold_while_the_server_dies() -> None:
        with client.lock(name, ttl=1) as lease:
            server.kill()
            assert lease.wait_lost(10)

    with pytest.raises(fencelock.LeaseLost):  # leaving the block
        hold_while_the_server_dies()
    client.close()


def test_async_leaving_with_after_the_server_died_raises_lease_lost(
    servers: ServerPool, name: str
) -> None:
    server = servers.redis()

    async def main() -> None:
        async with fencelock.aconnect(server.url + "?timeout=0.5") as client:

            async def hold_while_the_server_dies() -> None:
                async with client.lock(name, ttl=1) as lease:
                    server.kill()
                    assert await lease.wait_lost(10)

            with pytest.raises(fencelock.LeaseLost):  # leaving the block
                await hold_while_the_server_dies()

    asyncio.run(main())


def test_a_safe_lease_whose_release_fails_is_logged_not_raised(
    servers: ServerPool, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The work finished under a valid lease: raising would make callers redo it."""
    server = servers.redis()
    with fencelock.connect(server.url + "?timeout=0.5") as client:
        lease = client.lock(name, ttl=30).acquire()
        server.pause()
        try:
            with caplog.at_level(logging.WARNING, logger="fencelock"):
                lease.release()
        finally:
            server.resume()
    assert any("expires by its TTL" in r.getMessage() for r in caplog.records)


def test_the_first_failed_renewal_is_logged_and_the_loss_names_its_cause(
    servers: ServerPool, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = servers.redis()
    with (
        caplog.at_level(logging.WARNING, logger="fencelock"),
        fencelock.connect(server.url + "?timeout=0.3") as client,
    ):
        lease = client.lock(name, ttl=1.5).acquire()
        server.kill()
        assert lease.wait_lost(10)
        with pytest.raises(fencelock.LeaseLost):
            lease.release()
    messages = [r.getMessage() for r in caplog.records]
    assert sum("renewal of" in m and "failed" in m for m in messages) == 1
    lost = [m for m in messages if "lost:" in m]
    assert lost, lost
    assert "last renewal failed" in lost[0], lost


def test_connect_takes_url_options_as_keywords(plain_redis: RedisServer, name: str) -> None:
    with fencelock.connect(plain_redis.url, timeout=2) as client, client.lock(name) as lease:
        assert lease.token > 0
    with pytest.raises(fencelock.ConfigError, match="given twice"):
        fencelock.connect(plain_redis.url + "?timeout=1", timeout=2)
    with pytest.raises(fencelock.ConfigError, match="unknown option 'colour'"):
        fencelock.connect(plain_redis.url, colour="blue")
    with pytest.raises(fencelock.ConfigError, match="memory://"):
        fencelock.connect("memory://", colour="blue")
    fencelock.connect("memory://", timeout=3).close()  # a common option: taken everywhere


def test_aconnect_to_an_unreachable_server_fails_on_entry() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0?timeout=0.5"

    async def main() -> None:
        client = fencelock.aconnect(url)
        with pytest.raises(fencelock.BackendUnavailable, match=r"127\.0\.0\.1"):
            async with client:
                pytest.fail("entered a client whose server is unreachable")

    asyncio.run(main())
