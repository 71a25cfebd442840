"""A block under ``stop_on_loss`` stops when the server dies: the lease is lost at the end
of its safe time (renewals fail meanwhile), and the block is cancelled or interrupted then.

memory:// and sqlite:/// have no server to kill; their loss cases are in
tests/contract/test_stop_on_loss.py (the lease taken away, a pause past the TTL).
"""

from __future__ import annotations

import asyncio
import threading

import fencelock
from fencelock import clock
from fencelock.testing import RedisServer, ServerPool

TTL = 1.5
PROMPTLY = 10.0  # the block would otherwise run for FOREVER
FOREVER = 60.0


def redlock_url(nodes: list[RedisServer]) -> str:
    return "redlock://" + ",".join(node.address for node in nodes)


def cancelled_after_kill(
    url: str, kill: list[RedisServer], name: str
) -> tuple[BaseException, float]:
    async def main() -> tuple[BaseException, float]:
        killed_at = 0.0
        async with fencelock.aconnect(url) as client:
            try:
                async with client.lock(name, ttl=TTL, stop_on_loss=True):
                    for server in kill:
                        server.kill()
                    killed_at = clock.now()
                    await asyncio.sleep(FOREVER)
            except BaseException as exc:
                return exc, clock.now() - killed_at
        raise AssertionError("the block ran to its end")

    return asyncio.run(main())


def test_redis_killed_cancels_the_block(servers: ServerPool, name: str) -> None:
    server = servers.redis()
    raised, after = cancelled_after_kill(server.url, [server], name)
    assert isinstance(raised, fencelock.LeaseLost), repr(raised)
    assert "last renewal failed" in str(raised)
    assert TTL / 2 < after < PROMPTLY  # at the end of the safe time, not at once nor never


def test_redlock_losing_its_quorum_cancels_the_block(servers: ServerPool, name: str) -> None:
    nodes = [servers.redis(name=f"node{n}") for n in range(5)]
    raised, after = cancelled_after_kill(redlock_url(nodes), nodes[:3], name)
    assert isinstance(raised, fencelock.LeaseLost), repr(raised)
    assert after < PROMPTLY


def test_redis_killed_interrupts_the_holding_thread(servers: ServerPool, name: str) -> None:
    server = servers.redis()
    outcome: list[BaseException] = []
    killed = threading.Event()

    def job() -> None:
        with fencelock.connect(server.url) as client:
            try:
                with client.lock(name, ttl=TTL, stop_on_loss=True):
                    server.kill()
                    killed.set()
                    deadline = clock.now() + FOREVER
                    while clock.now() < deadline:
                        sum(range(1000))
            except BaseException as exc:
                outcome.append(exc)

    thread = threading.Thread(target=job)
    thread.start()
    assert killed.wait(PROMPTLY)
    thread.join(PROMPTLY + TTL)
    assert not thread.is_alive()
    (raised,) = outcome
    assert isinstance(raised, fencelock.LeaseLost), repr(raised)
