"""Redlock waiters are woken by releases: on many names at once, after lost connections,
with a node hung, and without leaving tasks behind.

A missed wake-up shows as a wait of the holder's whole TTL; a woken waiter waits a few
handoffs. The TTLs here are long and the bounds far below them, so a loaded machine
passes and a missed wake-up fails.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time

import pytest

import fencelock
from fencelock.backends.redlock import listener as redlock_listener
from fencelock.testing import RedisServer, ServerPool
from tests.polling import wait_until
from tests.redis.conftest import Background, redis_cli

TTL = 10.0
FEW_HANDOFFS = TTL / 4  # a woken waiter's wait, with room for a loaded machine
NAMES, PER_NAME = 8, 3
HOLD = 0.01


def redlock_url(ports: list[int], timeout: float = 0.2) -> str:
    return "redlock://" + ",".join(f"127.0.0.1:{p}" for p in ports) + f"?timeout={timeout:g}"


@pytest.fixture(scope="module")
def three(module_servers: ServerPool) -> list[int]:
    return [module_servers.redis(name=f"redlock-w{i}").port for i in range(3)]


@pytest.fixture
def fresh_three(servers: ServerPool) -> list[RedisServer]:
    """Nodes of one test: it may pause them."""
    return [servers.redis(name=f"redlock-wf{i}") for i in range(3)]


def channel(name: str) -> str:
    return f"fencelock:{{{name}}}:free"


def subscribed(port: int, *names: str, count: int = 1) -> bool:
    """Whether node ``port`` counts ``count`` subscribers to the channels of ``names``."""
    return sum(subscribers(port, name) for name in names) == count


def subscribers(port: int, name: str) -> int:
    reply = redis_cli(port, "pubsub", "numsub", channel(name)).split()
    return int(reply[-1])


# -- many names at once ---------------------------------------------------------------


def test_asyncio_waiters_of_many_names_are_woken(three: list[int], name: str) -> None:
    """Waiters of several names start waiting at once: every one of them is woken."""

    async def one(client: fencelock.AsyncClient, lock_name: str) -> float:
        started = time.monotonic()
        async with client.lock(lock_name, ttl=TTL, timeout=4 * TTL):
            waited = time.monotonic() - started
            await asyncio.sleep(HOLD)
        return waited

    async def run() -> list[float]:
        # 1 s per node: 24 waiters' first requests at once missed 0.2 s beside two busy loops
        async with fencelock.aconnect(redlock_url(three, timeout=1)) as client:
            names = [f"{name}/{i}" for i in range(NAMES)]
            return await asyncio.gather(*(one(client, n) for n in names for _ in range(PER_NAME)))

    waits = asyncio.run(run())
    assert max(waits) < FEW_HANDOFFS, sorted(waits)[-5:]


def test_sync_waiters_of_many_names_are_woken(three: list[int], name: str) -> None:
    waits: list[float] = []
    errors: list[BaseException] = []

    def one(client: fencelock.Client, lock_name: str, go: threading.Event) -> None:
        go.wait()
        started = time.monotonic()
        try:
            with client.lock(lock_name, ttl=TTL, timeout=4 * TTL):
                waits.append(time.monotonic() - started)
                time.sleep(HOLD)
        except BaseException as exc:
            errors.append(exc)

    with fencelock.connect(redlock_url(three)) as client:
        go = threading.Event()
        threads = [
            threading.Thread(target=one, args=(client, f"{name}/{i}", go), daemon=True)
            for i in range(NAMES)
            for _ in range(PER_NAME)
        ]
        for thread in threads:
            thread.start()
        go.set()
        for thread in threads:
            thread.join(8 * TTL)
    assert not errors, errors
    assert len(waits) == NAMES * PER_NAME
    assert max(waits) < FEW_HANDOFFS, sorted(waits)[-5:]


# -- lost connections, hung nodes ------------------------------------------------------


def test_waiters_subscribe_again_after_their_connections_are_killed(
    three: list[int], name: str
) -> None:
    with (
        fencelock.connect(redlock_url(three)) as holder_client,
        fencelock.connect(redlock_url(three)) as waiter_client,
    ):
        held = holder_client.lock(name, ttl=TTL).acquire(timeout=0)
        waiter = Background(lambda: waiter_client.lock(name, ttl=TTL).acquire(timeout=4 * TTL))
        for port in three:
            wait_until(
                functools.partial(subscribed, port, name), timeout=5, what="the subscription"
            )
        for port in three:
            redis_cli(port, "client", "kill", "type", "pubsub")
        for port in three:  # woken by the loss, the waiter retried and subscribed again
            wait_until(
                functools.partial(subscribed, port, name), timeout=5, what="a new subscription"
            )
        released = time.monotonic()
        held.release()
        assert waiter.wait(4 * TTL), waiter.outcome()
        assert waiter.error is None, waiter.outcome()
        assert time.monotonic() - released < FEW_HANDOFFS
        assert waiter.value is not None
        waiter.value.release()


def test_a_hung_node_does_not_keep_a_waiter_from_waking(
    fresh_three: list[RedisServer], name: str
) -> None:
    ports = [server.port for server in fresh_three]
    with (
        fencelock.connect(redlock_url(ports)) as holder_client,
        fencelock.connect(redlock_url(ports)) as waiter_client,
    ):
        held = holder_client.lock(name, ttl=TTL).acquire(timeout=0)
        fresh_three[2].pause()
        try:
            waiter = Background(lambda: waiter_client.lock(name, ttl=TTL).acquire(timeout=4 * TTL))
            for port in ports[:2]:
                wait_until(
                    functools.partial(subscribed, port, name), timeout=5, what="the subscription"
                )
            released = time.monotonic()
            held.release()
            assert waiter.wait(4 * TTL), waiter.outcome()
            assert waiter.error is None, waiter.outcome()
            assert time.monotonic() - released < FEW_HANDOFFS
        finally:
            fresh_three[2].resume()


# -- what waiting leaves behind --------------------------------------------------------


def test_channels_nobody_waits_for_are_unsubscribed_beyond_a_bound(
    three: list[int], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redlock_listener, "IDLE_SUBSCRIPTIONS", 2)
    names = [f"{name}/{i}" for i in range(5)]
    with (
        fencelock.connect(redlock_url(three)) as holder_client,
        fencelock.connect(redlock_url(three)) as waiter_client,
    ):
        leases = [holder_client.lock(n, ttl=TTL).acquire(timeout=0) for n in names]
        for n in names:
            with pytest.raises(fencelock.LockTimeout):
                waiter_client.lock(n, ttl=TTL).acquire(timeout=0.05)
        for port in three:
            wait_until(
                functools.partial(subscribed, port, *names, count=2),
                timeout=5,
                what=lambda: f"2 subscriptions, got {[subscribers(three[0], n) for n in names]}",
            )
        for lease in leases:
            lease.release()


def test_a_waiter_that_gave_up_leaves_no_task(three: list[int], name: str) -> None:
    """No task reads the subscriptions, so an unclosed client leaves nothing pending."""

    async def run() -> list[str]:
        async with (
            fencelock.aconnect(redlock_url(three)) as holder,
            fencelock.aconnect(redlock_url(three)) as waiter,
        ):
            lease = await holder.lock(name, ttl=TTL).acquire(timeout=0)
            with pytest.raises(fencelock.LockTimeout):
                await waiter.lock(name, ttl=TTL).acquire(timeout=0.05)
            await asyncio.sleep(0)
            left = [backend_task(t) for t in asyncio.all_tasks()]
            await lease.release()
        return [t for t in left if t]

    assert asyncio.run(run()) == []


def backend_task(task: asyncio.Task[object]) -> str:
    """The task's coroutine if a backend module runs it (the renewer's task is not one)."""
    code = getattr(task.get_coro(), "cr_code", None)
    return repr(task) if code is not None and "/backends/" in code.co_filename else ""


# -- split votes ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def five(module_servers: ServerPool) -> list[int]:
    return [module_servers.redis(name=f"redlock-s{i}").port for i in range(5)]


def test_a_split_vote_is_retried_soon_not_after_the_rivals_ttl(five: list[int], name: str) -> None:
    """Two rivals hold 2 and 1 of 5 nodes: nobody holds the lock. Rivals delete their
    keys quietly (no release is published), so the waiter must not wait for their TTL."""
    key = f"fencelock:{{{name}}}"
    for port, owner in zip(five, ["x", "x", "y"], strict=False):
        assert redis_cli(port, "set", key, owner, "px", str(int(4 * TTL * 1000))) == "OK"
    with fencelock.connect(redlock_url(five)) as client:
        waiter = Background(lambda: client.lock(name, ttl=TTL).acquire(timeout=2 * TTL))
        for port in five:
            wait_until(functools.partial(subscribed, port, name), timeout=5, what="the waiter")
        gone = time.monotonic()
        for port in five[:3]:  # the rivals give up, without a word
            redis_cli(port, "del", key)
        assert waiter.wait(4 * TTL), waiter.outcome()
        assert waiter.error is None, waiter.outcome()
        assert time.monotonic() - gone < FEW_HANDOFFS
        assert waiter.value is not None
        waiter.value.release()
