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
from fencelock.testing import RedisServer, ServerPool
from tests.redis.conftest import redis_cli


def interrupt_then_resume(server: RedisServer, after: float) -> threading.Thread:
    """SIGINT to this process (pytest runs tests in its main thread) after ``after``
    seconds, then let the paused server run again: it then runs the acquire it holds."""

    def fire() -> None:
        time.sleep(after)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)
        server.resume()

    thread = threading.Thread(target=fire, daemon=True)
    thread.start()
    return thread


def test_an_interrupted_blocking_acquire_gives_back_what_it_may_have_taken(
    servers: ServerPool, name: str
) -> None:
    server = servers.redis(name="interrupted")
    with fencelock.connect(server.url + "?timeout=10") as client:
        client.lock(name + "/warm", ttl=30).acquire(timeout=0).release()  # a warm connection
        server.pause()  # the acquire below is sent, and waits for its answer
        try:
            firing = interrupt_then_resume(server, 0.3)
            with pytest.raises(KeyboardInterrupt):
                client.lock(name, ttl=60).acquire(timeout=30)
            firing.join()
        finally:
            server.resume()
        lease = client.lock(name, ttl=60).acquire(timeout=5)  # not held for 60 s by nobody
        lease.release()
    assert int(redis_cli(server.port, "zcard", LockKeys.of(name).queue) or 0) == 0
