"""``redis://`` waiting when things go wrong: ACL limits, reconnects, forks, cancellation."""

from __future__ import annotations

import asyncio
import os

import pytest

import fencelock
from fencelock import clock
from fencelock.backends.redis.scripts import LockKeys
from fencelock.engine import barging
from fencelock.testing import RedisServer, ServerPool
from tests.polling import wait_until
from tests.redis.conftest import Background, redis_cli, unread_bytes


def queued(server: RedisServer, name: str) -> int:
    return int(redis_cli(server.port, "zcard", LockKeys.of(name).queue) or 0)


# The least an ACL user needs, as docs/backends.md gives it.
DOCUMENTED_ACL = (
    "~fencelock:*",
    "&fencelock:wake:*",
    "+@read",
    "+@write",
    "+@scripting",
    "+@pubsub",
    "+@connection",
    "+time",
    "+wait",
)


@pytest.fixture(scope="module")
def no_channels_redis(module_servers: ServerPool) -> RedisServer:
    """``carol`` may run every command on every key, but may not use any channel;
    ``app`` has exactly the documented permissions."""
    return module_servers.redis(
        *("--user", "carol", "on", ">pw", "~*", "resetchannels", "+@all"),
        *("--user", "app", "on", ">secret", "resetchannels", *DOCUMENTED_ACL),
        name="nochannels",
    )


def test_the_documented_acl_is_enough(
    no_channels_redis: RedisServer, name: str, slow_refresh: None
) -> None:
    url = f"redis://app:secret@127.0.0.1:{no_channels_redis.port}/0"
    with fencelock.connect(url) as holder, fencelock.connect(url) as waiter:
        lease = holder.lock(name, ttl=30).acquire(timeout=0)
        woken = Background(lambda: waiter.lock(name, ttl=30).acquire(timeout=5))
        wait_until(
            lambda: queued(no_channels_redis, name) == 1, timeout=5, what="the waiter queued"
        )
        lease.release()
        assert woken.wait(5), woken.error  # woken, not at its 10 s refresh
        assert woken.value is not None, woken.error
        assert woken.value.token > lease.token, woken.error
        woken.value.extend()
        info = holder.inspect(name)
        assert info is not None
        assert info.owner == woken.value.owner
        assert [i.name for i in holder.list(name)] == [name]
        woken.value.release()


def test_a_waiter_that_cannot_subscribe_gets_a_clear_error_within_its_timeout(
    no_channels_redis: RedisServer, name: str
) -> None:
    """SUBSCRIBE denied (ACL): neither a raw redis error nor a silent stall per acquire
    (for the client's timeout, 10 s here)."""
    where = f"127.0.0.1:{no_channels_redis.port}"
    with (
        fencelock.connect(no_channels_redis.url) as holder,
        fencelock.connect(f"redis://carol:pw@{where}/0?timeout=10") as carol,
    ):
        lease = holder.lock(name, ttl=30).acquire(timeout=0)
        for _ in range(2):
            started = clock.now()
            with pytest.raises(fencelock.BackendUnavailable) as caught:
                carol.lock(name, ttl=30).acquire(timeout=0.3)
            assert clock.now() - started < 5  # not the 10 s its confirmation may take
            message = str(caught.value)
            assert where in message, message
            assert "ACL" in message, message
            assert "&fencelock:wake:*" in message, message  # says how to fix it
        assert queued(no_channels_redis, name) == 0, "the failed waiter stayed in the queue"
        lease.release()


def test_asyncio_waiter_that_cannot_subscribe_gets_a_clear_error(
    no_channels_redis: RedisServer, name: str
) -> None:
    where = f"127.0.0.1:{no_channels_redis.port}"

    async def main() -> list[float]:
        holder = fencelock.aconnect(no_channels_redis.url)
        carol = fencelock.aconnect(f"redis://carol:pw@{where}/0?timeout=10")
        took = []
        try:
            lease = await holder.lock(name, ttl=30).acquire(timeout=0)
            for _ in range(2):
                started = clock.now()
                with pytest.raises(fencelock.BackendUnavailable) as caught:
                    await carol.lock(name, ttl=30).acquire(timeout=0.3)
                took.append(clock.now() - started)
                assert where in str(caught.value)
                assert "&fencelock:wake:*" in str(caught.value)
            await lease.release()
        finally:
            await carol.aclose()
            await holder.aclose()
        return took

    assert max(asyncio.run(main())) < 5  # not the 10 s its confirmation may take


def pubsub_clients(server: RedisServer) -> int:
    """Connections subscribed to a channel (each client's listener has one)."""
    listed = redis_cli(server.port, "client", "list", "type", "pubsub")
    return sum(" sub=1 " in line for line in listed.splitlines())


def server_ms(server: RedisServer) -> int:
    seconds, micros = redis_cli(server.port, "time").split()
    return int(seconds) * 1000 + int(micros) // 1000


def last_try_ms(server: RedisServer, name: str) -> int:
    """When (server ms) the only waiter on ``name`` last asked: its liveness deadline,
    which each try sets to then plus WAITER_LIVENESS."""

    reply = redis_cli(server.port, "zrange", LockKeys.of(name).alive, "0", "0", "withscores")
    lines = reply.splitlines()
    return int(float(lines[1])) - int(barging.WAITER_LIVENESS * 1000) if len(lines) == 2 else 0


def test_a_waiter_is_woken_across_a_pubsub_reconnect(
    servers: ServerPool, name: str, slow_refresh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listener's connection is killed while a waiter waits; a release that lands
    before it has subscribed again must not leave the waiter asleep until its refresh."""
    from fencelock.backends.redis import listener

    # After a failed read the listener reads (and confirms its subscription) again in
    # 1 s, not 0.1 s: the release below lands inside that gap, as the test checks.
    monkeypatch.setattr(listener, "RETRY_AFTER", 1.0)
    server = servers.redis(name="reconnect")
    patient = server.url + "?timeout=5"  # the waiter awaits its listener's return 5 s
    with fencelock.connect(server.url) as holder, fencelock.connect(patient) as other:
        subscription = other.internals.backend.listener._state  # type: ignore[attr-defined]
        lease = holder.lock(name, ttl=30).acquire(timeout=0)
        waiter = Background(lambda: other.lock(name, ttl=30).acquire(timeout=15))
        wait_until(
            lambda: queued(server, name) == 1 and subscription.confirmed,
            timeout=10,
            what=lambda: f"the waiter queued and subscribed: {waiter.outcome()}",
        )
        killed = server_ms(server)
        assert redis_cli(server.port, "client", "kill", "type", "pubsub") == "1"
        wait_until(lambda: not subscription.confirmed, timeout=10, what="the kill noticed")
        # The lost connection wakes the waiter: it asks again, and stays queued.
        wait_until(
            lambda: last_try_ms(server, name) >= killed,
            timeout=10,
            what=lambda: f"a try after the kill: {waiter.outcome()}",
        )
        released = clock.now()
        lease.release()
        assert not subscription.confirmed, "subscribed again before the release: untested"
        assert waiter.wait(10), waiter.outcome()
        assert waiter.value is not None, waiter.outcome()
        waited = clock.now() - released
        waiter.value.release()
    # Woken once the listener is back (1 s), not by the waiter's refresh (10 s).
    assert waited < 5, f"woken {waited:.2f}s after the release, by its 10 s refresh"


def test_a_forked_childs_waiter_is_woken_by_a_release(
    plain_redis: RedisServer, name: str, slow_refresh: None
) -> None:
    """The parent's listener thread does not exist in a child, nor should its channel."""
    with fencelock.connect(plain_redis.url) as client, fencelock.connect(plain_redis.url) as holder:
        lease = holder.lock(name + "/warm", ttl=30).acquire(timeout=0)
        with pytest.raises(fencelock.LockTimeout):  # subscribes the parent's listener
            client.lock(name + "/warm", ttl=30).acquire(timeout=0.05)
        lease.release()
        lease = holder.lock(name, ttl=30).acquire(timeout=0)
        listeners = pubsub_clients(plain_redis)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: waits with the inherited client
            code = 1
            try:
                child = client.lock(name, ttl=30).acquire(timeout=10)
                os.write(write, b"%f" % clock.now())
                child.release()
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        wait_until(  # in its wait: queued, and its own listener subscribed
            lambda: queued(plain_redis, name) == 1 and pubsub_clients(plain_redis) > listeners,
            timeout=10,
            what="the child queued and subscribed",
        )
        released = clock.now()
        lease.release()
        acquired = float(os.read(read, 100) or b"inf")
        os.close(read)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert acquired - released < 5, f"the child woke {acquired - released:.2f}s after"


def test_asyncio_acquire_cancelled_mid_request_leaves_no_lease_behind(
    servers: ServerPool, name: str
) -> None:
    """Cancelled while its acquire script is in flight (here: held by a paused server),
    the caller never learns whether it got the lease; it must not keep it for its TTL."""
    server = servers.redis(name="cancelled")

    async def main() -> None:
        client = fencelock.aconnect(server.url + "?timeout=10")
        try:
            warm = await client.lock(name + "/warm", ttl=30).acquire(timeout=0)
            await warm.release()  # a connection to send the next acquire on at once
            server.pause()
            try:
                task = asyncio.create_task(client.lock(name, ttl=30).acquire(timeout=5))
                for _ in range(1000):  # until the acquire reached the server (10 s at most)
                    if unread_bytes(server.port):
                        break
                    await asyncio.sleep(0.01)
                assert unread_bytes(server.port), "the acquire never reached the server"
                task.cancel()
                await asyncio.sleep(0)  # the acquire learns it was cancelled
            finally:
                server.resume()  # ... and the server runs the acquire it holds
            with pytest.raises(asyncio.CancelledError):
                await task
            lease = await client.lock(name, ttl=30).acquire(timeout=5)  # not 30 s
            await lease.release()
        finally:
            await client.aclose()

    asyncio.run(main())
    assert queued(server, name) == 0


def test_an_acquire_that_timed_out_leaves_no_lease_once_the_server_answers(
    servers: ServerPool, name: str
) -> None:
    """The server ran the acquire after the client gave up on it: the client undoes it
    as soon as the server answers again, instead of a lease nobody uses for the TTL."""
    server = servers.redis(name="slow")
    with (
        fencelock.connect(f"{server.url}?timeout=0.2") as impatient,
        fencelock.connect(server.url) as other,
    ):
        impatient.lock(name + "/warm", ttl=30).acquire(timeout=0).release()  # connected
        server.pause()
        try:
            with pytest.raises(fencelock.BackendUnavailable, match="did not answer in time"):
                impatient.lock(name, ttl=30).acquire(timeout=0)
        finally:
            server.resume()  # ... and it runs the acquire it was sent
        lease = other.lock(name, ttl=30).acquire(timeout=5)  # not 30 s
        assert lease.token > 0
        lease.release()


def test_an_asyncio_acquire_that_timed_out_leaves_no_lease(servers: ServerPool, name: str) -> None:
    server = servers.redis(name="slow-async")

    async def main() -> int:
        async with (
            fencelock.aconnect(f"{server.url}?timeout=0.2") as impatient,
            fencelock.aconnect(server.url) as other,
        ):
            await (await impatient.lock(name + "/warm", ttl=30).acquire(timeout=0)).release()
            server.pause()
            try:
                with pytest.raises(fencelock.BackendUnavailable, match="did not answer in time"):
                    await impatient.lock(name, ttl=30).acquire(timeout=0)
            finally:
                server.resume()
            lease = await other.lock(name, ttl=30).acquire(timeout=5)
            await lease.release()
            return lease.token

    assert asyncio.run(main()) > 0
