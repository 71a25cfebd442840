"""A blocking acquire interrupted (Ctrl-C) while its request is out leaves nothing held.

As an asyncio acquire cancelled mid-request: the script may have run, and the caller
never reads its reply, so nobody would use that lease for its whole TTL.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable

import pytest

import fencelock
from fencelock.backends.redis.scripts import LockKeys
from fencelock.testing import RedisServer, ServerPool
from tests.redis.conftest import redis_cli, unread_bytes


def interrupt_then_resume(server: RedisServer, seen: list[str]) -> threading.Thread:
    """SIGINT to this process (pytest runs tests in its main thread) once a request
    reached the paused ``server`` (it sits unread in the server's socket); once the
    client hung up that connection (it gave up on the reply), let the server run again:
    it then runs the acquire it holds. What it saw goes to ``seen``."""

    def until(condition: Callable[[], int], what: str) -> None:
        deadline = time.monotonic() + 10
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append(what if condition() else f"not {what}")

    def fire() -> None:
        try:
            until(lambda: unread_bytes(server.port), "sent")
            os.kill(os.getpid(), signal.SIGINT)
            until(lambda: unread_bytes(server.port, "close_wait"), "hung up")
        finally:
            server.resume()

    thread = threading.Thread(target=fire, daemon=True)
    thread.start()
    return thread


def test_an_interrupted_blocking_acquire_gives_back_what_it_may_have_taken(
    servers: ServerPool, name: str, ctrl_c_raises: None
) -> None:
    server = servers.redis(name="interrupted")
    with fencelock.connect(server.url + "?timeout=10") as client:
        client.lock(name + "/warm", ttl=30).acquire(timeout=0).release()  # a warm connection
        server.pause()  # the acquire below is sent, and waits for its answer
        try:
            seen: list[str] = []
            firing = interrupt_then_resume(server, seen)
            with pytest.raises(KeyboardInterrupt):
                client.lock(name, ttl=60).acquire(timeout=30)
            firing.join(10)
            assert seen == ["sent", "hung up"]
        finally:
            server.resume()
        lease = client.lock(name, ttl=60).acquire(timeout=5)  # not held for 60 s by nobody
        lease.release()
    assert int(redis_cli(server.port, "zcard", LockKeys.of(name).queue) or 0) == 0
