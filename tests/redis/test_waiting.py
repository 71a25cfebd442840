"""How ``redis://`` waiters wait: queued on the server, woken one at a time, never starved."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import fencelock
from fencelock import clock
from fencelock.backends.redis.scripts import ACQUIRE, FREE, LockKeys
from fencelock.engine.barging import STARVATION_BOUND, WAITER_LIVENESS
from fencelock.testing import RedisServer
from tests.polling import wait_until
from tests.redis.conftest import Background, redis_cli


def acquire_script_calls(server: RedisServer) -> int:
    """How many EVALSHA calls the server has run so far."""
    for line in redis_cli(server.port, "info", "commandstats").splitlines():
        if line.startswith("cmdstat_evalsha:"):
            return int(line.split("calls=")[1].split(",")[0])
    return 0


def settled_script_calls(server: RedisServer) -> int:
    """The EVALSHA count once no waiter is still between its tries (it stays put)."""
    last = acquire_script_calls(server)
    for _ in range(100):
        time.sleep(0.05)
        now = acquire_script_calls(server)
        if now == last:
            return now
        last = now
    raise AssertionError("the waiters never settled into their waits")


def queued(server: RedisServer, name: str) -> int:
    return int(redis_cli(server.port, "zcard", LockKeys.of(name).queue) or 0)


def test_a_release_wakes_one_waiter_not_all(plain_redis: RedisServer, name: str) -> None:
    clients = [fencelock.connect(plain_redis.url) for _ in range(5)]
    try:
        holder = clients[0].lock(name, ttl=30).acquire(timeout=0)

        def wait_for_it(client: fencelock.Client) -> fencelock.Lease:
            return client.lock(name, ttl=30).acquire(timeout=10)

        waiters = [Background(functools.partial(wait_for_it, c)) for c in clients[1:]]
        wait_until(lambda: queued(plain_redis, name) == 4, timeout=5, what="4 waiters queued")
        before = settled_script_calls(plain_redis)  # every waiter is in its wait
        holder.release()
        wait_until(lambda: sum(w.wait(0) for w in waiters) == 1, timeout=2, what="one woken")
        calls = acquire_script_calls(plain_redis) - before
        # The release and the woken waiter's acquire: 2, plus any of the other waiters'
        # every-⅓-s refreshes that fell in this window. A broadcast would make it 5.
        assert calls <= 4, f"{calls} scripts ran after one release: every waiter was woken"
        winner = next(w for w in waiters if w.wait(0))
        assert winner.value is not None, winner.error
        assert winner.value.token > holder.token, winner.error
        winner.value.release()
        released = {id(winner)}
        deadline = time.monotonic() + 5
        while len(released) < len(waiters):  # the rest, woken one after another
            assert time.monotonic() < deadline, "the others were not woken one after another"
            for waiter in waiters:
                if id(waiter) not in released and waiter.wait(0.01):
                    assert waiter.value is not None, waiter.error
                    waiter.value.release()
                    released.add(id(waiter))
    finally:
        for client in clients:
            client.close()


def test_a_waiter_is_not_starved_by_a_holder_that_takes_it_straight_back(
    plain_redis: RedisServer, name: str
) -> None:
    """The holder releases and re-takes in one MULTI, so no waiter can slip in between:
    only the starvation bound (acquire.lua refusing it) lets the waiter in."""
    keys = LockKeys.of(name)
    raw: Any = redis.Redis(port=plain_redis.port, decode_responses=True)
    free, acquire = raw.script_load(FREE.source), raw.script_load(ACQUIRE.source)
    starve_us = int(STARVATION_BOUND * 1e6)

    def take(pipe: Any, owner: str) -> None:
        pipe.evalsha(acquire, 4, *keys.queued, 30_000, "test:greedy", starve_us, 1000, owner)

    def hog(stop: threading.Event) -> int:
        owner, rounds = "greedy-0", 0
        take(raw, owner)
        while not stop.is_set():
            pipe = raw.pipeline(transaction=True)
            pipe.evalsha(free, 3, *keys.waking, "release", owner)
            take(pipe, f"greedy-{rounds + 1}")
            freed, taken = pipe.execute()
            if freed != 1 or taken[0] != 1:
                return rounds  # refused: a waiter has waited too long
            rounds, owner = rounds + 1, f"greedy-{rounds + 1}"
        return rounds

    stop = threading.Event()
    hogging = Background(lambda: hog(stop))
    try:
        wait_until(
            lambda: redis_cli(plain_redis.port, "exists", keys.lock) == "1",
            timeout=10,
            what="the lock key",
        )
        with fencelock.connect(plain_redis.url) as other:
            started = time.monotonic()
            lease = other.lock(name, ttl=30).acquire(timeout=5)
            waited = time.monotonic() - started
            lease.release()
    finally:
        stop.set()
        assert hogging.wait(5), hogging.error
        raw.close()
    assert hogging.value is not None, hogging.error
    assert hogging.value > 10, hogging.error
    assert waited < 4, f"waited {waited:.3f}s while the holder kept re-taking the lock"


WAITER = """
import sys, fencelock
if len(sys.argv) > 3:  # stays in line this long after its last ask (not 3 s)
    from tests.contract.workers import lasting_waiters
    lasting_waiters(float(sys.argv[3]))
client = fencelock.connect(sys.argv[1])
print("queued", flush=True)
client.lock(sys.argv[2], ttl=30, fair=True).acquire()
"""


@contextlib.contextmanager
def first_in_line(
    server: RedisServer, name: str, liveness: float | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """A process waiting (fair) for ``name``, queued and subscribed (kept in line
    ``liveness`` s after its last ask); killed at the end."""
    channels_before = wake_channels(server)
    more = [] if liveness is None else [str(liveness)]
    first = subprocess.Popen(
        [sys.executable, "-c", WAITER, server.url, name, *more],
        stdout=subprocess.DEVNULL,
        cwd=Path(__file__).parents[2],  # where ``tests`` is importable
    )
    try:
        wait_until(
            lambda: queued(server, name) == 1 and wake_channels(server) > channels_before,
            timeout=10,
            what="the first queued and subscribed",
        )
        yield first
    finally:
        first.kill()
        first.wait(5)


def wake_channels(server: RedisServer) -> int:
    return len(redis_cli(server.port, "pubsub", "channels", "fencelock:wake:*").split())


@pytest.mark.parametrize(
    ("fault", "liveness", "bound"),
    [
        # paused: still connected, so only its liveness deadline (3 s) lets the line move
        (signal.SIGSTOP, None, WAITER_LIVENESS * 4),
        # dead: its wake-up reaches nobody, and the release passes the lease on at once,
        # not at its liveness deadline (made 30 s)
        (signal.SIGKILL, 30.0, 5.0),
    ],
    ids=["paused", "killed"],
)
def test_a_silent_waiter_first_in_line_holds_the_others_up_briefly(
    plain_redis: RedisServer,
    name: str,
    fault: signal.Signals,
    liveness: float | None,
    bound: float,
) -> None:
    with (
        fencelock.connect(plain_redis.url) as holder_client,
        fencelock.connect(plain_redis.url) as second_client,
    ):
        holder = holder_client.lock(name, ttl=30, fair=True).acquire(timeout=0)
        with first_in_line(plain_redis, name, liveness) as first:
            os.kill(first.pid, fault)  # first in line, and silent from now on
            if fault == signal.SIGKILL:
                first.wait(5)
            second = Background(
                lambda: second_client.lock(name, ttl=30, fair=True).acquire(timeout=10)
            )
            wait_until(lambda: queued(plain_redis, name) == 2, timeout=5, what="the second queued")
            released = clock.now()
            holder.release()
            assert second.wait(bound), f"a {fault.name}ed waiter blocked the line"
            assert second.value is not None, second.error
            waited = clock.now() - released
            second.value.release()
    assert waited < bound, f"the line moved {waited:.2f}s after the release"


def test_a_forked_child_does_not_share_its_parents_connections(
    plain_redis: RedisServer, name: str
) -> None:
    with fencelock.connect(plain_redis.url) as client:
        client.lock(name + "/parent", ttl=30).acquire(timeout=0).release()  # opens a connection
        pid = os.fork()
        if pid == 0:  # the child: the same client object, another lock
            code = 0
            try:
                for _ in range(300):
                    client.lock(name + "/child", ttl=30).acquire(timeout=1).release()
            except BaseException:
                code = 1
            os._exit(code)
        tokens = []
        for _ in range(300):
            lease = client.lock(name + "/parent", ttl=30).acquire(timeout=1)
            tokens.append(lease.token)
            lease.release()
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child's locks failed"
    assert tokens == sorted(set(tokens)), "the parent read replies meant for the child"


def test_an_expired_lease_passes_over_a_dead_waiter_at_once(
    plain_redis: RedisServer, name: str
) -> None:
    """The holder crashed (its lease expires, no release wakes anyone) and so did the
    first waiter: the next one takes the lease when it expires, not at the dead
    waiter's liveness deadline (made 30 s)."""
    with fencelock.connect(plain_redis.url) as second_client:
        lock = LockKeys.of(name).lock
        redis_cli(plain_redis.port, "set", lock, "crashed", "px", "30000")
        with first_in_line(plain_redis, name, 30.0) as first:
            first.kill()
            first.wait(5)
            expires = clock.now() + 1.0  # at the earliest
            assert redis_cli(plain_redis.port, "pexpire", lock, "1000") == "1"
            lease = second_client.lock(name, ttl=30, fair=True).acquire(timeout=20)
            late = clock.now() - expires
            lease.release()
    assert late < 5, f"taken {late:.2f}s after the lease expired: the dead waiter held it"
