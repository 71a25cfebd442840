"""A server paused past the TTL, with a waiter queued: never two trusted holders.

The waiter's tries during the pause go unanswered; at resume the server runs the
oldest of them (it may take the lock), and the waiter tries again on a new connection.
The undo of the unanswered try, sent once the server answers, must give back only
what that try took, never the grant of a later try: every try that may land late
stores an owner value of its own. Both variants, against a real ``redis-server``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable

import fencelock
from fencelock.testing import RedisServer, ServerPool
from tests.polling import wait_until
from tests.redis.conftest import Background, redis_cli

TTL = 3.0
PAUSE = 2 * TTL  # past the holder's TTL: its key expires while the server sleeps


class Overlaps:
    """Polls the leases it is given every millisecond: the longest time two of them
    were trusted at once (trusted: not lost, and inside their safe time)."""

    def __init__(self) -> None:
        self.leases: list[fencelock.Lease | fencelock.AsyncLease] = []
        self.longest = 0.0
        self._since: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.001):
            trusted = [lease for lease in list(self.leases) if _trusted(lease)]
            now = time.monotonic()
            if len(trusted) > 1:
                self._since = now if self._since is None else self._since
                self.longest = max(self.longest, now - self._since)
            else:
                self._since = None

    def stop(self) -> float:
        self._stop.set()
        self._thread.join(5)
        return self.longest


def _trusted(lease: fencelock.Lease | fencelock.AsyncLease) -> bool:
    return not lease.lost and not lease.released and lease.remaining() > 0


def _let_go(lease: fencelock.Lease) -> None:
    """Release, whether or not the lease was lost (the pause ends the first holder's)."""
    with contextlib.suppress(fencelock.LeaseLost):
        lease.release()


def _queued(server: RedisServer) -> Callable[[], bool]:
    """The waiter is queued and listens for its wake-up (a waiter whose subscription
    the paused server never confirmed gives up instead: another case)."""
    return lambda: bool(redis_cli(server.port, "pubsub", "channels", "*"))


def _pause_then_third(server: RedisServer, third: Callable[[], object]) -> Background[object]:
    server.pause()
    try:
        time.sleep(PAUSE)
    finally:
        server.resume()
    time.sleep(0.3)
    return Background(third)


def test_a_paused_server_never_leaves_two_trusted_holders(servers: ServerPool, name: str) -> None:
    server = servers.redis(name="paused-undo")
    impatient = server.url + "?timeout=1"  # its tries in the pause go unanswered, fast
    watch = Overlaps()
    with (
        fencelock.connect(server.url) as a_client,
        fencelock.connect(impatient) as b_client,
        fencelock.connect(server.url) as c_client,
    ):
        holder = a_client.lock(name, ttl=TTL).acquire()
        watch.leases.append(holder)

        def take(client: fencelock.Client) -> Callable[[], fencelock.Lease]:
            def run() -> fencelock.Lease:
                lease = client.lock(name, ttl=TTL).acquire(timeout=30)
                watch.leases.append(lease)
                return lease

            return run

        b = Background(take(b_client))
        wait_until(_queued(server), timeout=10, what="the waiter queued")
        c = _pause_then_third(server, take(c_client))
        wait_until(lambda: b.wait(0) or c.wait(0), timeout=3 * TTL + 20, what="b or c to get it")
        time.sleep(2 * TTL)  # the window where the old undo struck (a grant, then ~0.1 s)
        longest = watch.stop()
        for waiter in (b, c, b, c):  # the one still waiting gets it once the first lets go
            if waiter.wait(TTL + 20) and isinstance(waiter.value, fencelock.Lease):
                _let_go(waiter.value)
        _let_go(holder)
    assert longest == 0.0, f"two holders trusted the lock at once for {longest:.3f}s"
    granted = [w.value for w in (b, c) if isinstance(w.value, fencelock.Lease)]
    assert granted, f"nobody got the lock after the pause: {b.outcome()}, {c.outcome()}"


def test_a_paused_server_never_leaves_two_trusted_async_holders(
    servers: ServerPool, name: str
) -> None:
    server = servers.redis(name="paused-undo-async")
    impatient = server.url + "?timeout=1"
    watch = Overlaps()
    leases: list[fencelock.AsyncLease] = []

    async def waiter(url: str, started: threading.Event | None) -> None:
        async with fencelock.aconnect(url) as client:
            if started is not None:
                started.set()
            lease = await client.lock(name, ttl=TTL).acquire(timeout=30)
            watch.leases.append(lease)
            leases.append(lease)
            await asyncio.sleep(2 * TTL)  # held (renewed) through the old undo's window
            with contextlib.suppress(fencelock.LeaseLost):
                await lease.release()

    def run(url: str, started: threading.Event | None = None) -> Callable[[], None]:
        return lambda: asyncio.run(waiter(url, started))

    with fencelock.connect(server.url) as a_client:
        holder = a_client.lock(name, ttl=TTL).acquire()
        watch.leases.append(holder)
        b = Background(run(impatient))
        wait_until(_queued(server), timeout=10, what="the waiter queued")
        c = _pause_then_third(server, run(server.url))
        for task in (b, c):
            assert task.wait(3 * TTL + 20), task.outcome()
        longest = watch.stop()
        _let_go(holder)
    assert longest == 0.0, f"two holders trusted the lock at once for {longest:.3f}s"
    assert leases, f"nobody got the lock after the pause: {b.outcome()}, {c.outcome()}"
