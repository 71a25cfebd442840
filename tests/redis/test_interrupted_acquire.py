"""A blocking acquire interrupted (Ctrl-C) while its request is out leaves nothing held.

As an asyncio acquire cancelled mid-request: the script may have run, and the caller
never reads its reply, so nobody would use that lease for its whole TTL.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import fencelock
from fencelock.backends.redis.scripts import LockKeys
from fencelock.testing import RedisServer
from tests.redis.conftest import Background, redis_cli

BUSY_FOR = 1.5  # seconds the server spends in one slow script
SLOW = (
    "local t = redis.call('TIME') local s = t[1] * 1e6 + t[2] "
    f"repeat t = redis.call('TIME') until t[1] * 1e6 + t[2] - s > {int(BUSY_FOR * 1e6)} return 1"
)


def interrupt_after(seconds: float) -> threading.Thread:
    """SIGINT to this process (pytest runs tests in its main thread) after ``seconds``."""

    def fire() -> None:
        time.sleep(seconds)
        os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=fire, daemon=True)
    thread.start()
    return thread


def test_an_interrupted_blocking_acquire_gives_back_what_it_may_have_taken(
    plain_redis: RedisServer, name: str
) -> None:
    with fencelock.connect(plain_redis.url + "?timeout=10") as client:
        client.lock(name + "/warm", ttl=30).acquire(timeout=0).release()  # a warm connection
        busy = Background(lambda: redis_cli(plain_redis.port, "eval", SLOW, "0"))
        time.sleep(0.3)  # the slow script is running (for BUSY_FOR); not an ordering race
        firing = interrupt_after(0.3)
        with pytest.raises(KeyboardInterrupt):
            client.lock(name, ttl=60).acquire(timeout=30)
        firing.join()
        assert busy.wait(10), busy.outcome()
        lease = client.lock(name, ttl=60).acquire(timeout=5)  # not held for 60 s by nobody
        lease.release()
    assert int(redis_cli(plain_redis.port, "zcard", LockKeys.of(name).queue) or 0) == 0
