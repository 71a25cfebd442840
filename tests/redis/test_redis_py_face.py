"""redis-py's ``Lock`` face (``fencelock.compat.redis_py``): its signature and errors,
a fencing token on every hold, and mutual exclusion with redis-py's own ``Lock`` on the
same name (a service moves over one process at a time)."""

from __future__ import annotations

import asyncio
import gc
import logging
import multiprocessing
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio
from redis.exceptions import LockError, LockNotOwnedError
from redis.lock import Lock as RedisPyLock

import fencelock
from fencelock.compat.redis_py import AsyncLock, Lock
from fencelock.testing import RedisServer
from tests.polling import wait_until


@pytest.fixture
def r(plain_redis: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(plain_redis.url)
    yield client
    client.close()


def test_a_hold_has_redis_pys_answers_and_a_rising_fencing_token(r: redis.Redis, name: str) -> None:
    lock = r.lock(name, lock_class=Lock)
    assert isinstance(lock, Lock)
    assert lock.fencing_token is None
    assert not lock.locked()
    assert not lock.owned()
    assert lock.acquire(blocking=False) is True
    first = lock.fencing_token
    assert first is not None
    assert lock.locked()
    assert lock.owned()
    assert r.get(name) == lock.local.token  # the lock's key is its name, as redis-py's
    lock.release()
    assert not lock.locked()
    assert lock.local.token is None
    with lock:
        assert lock.fencing_token is not None
        assert lock.fencing_token > first


def test_a_face_and_redis_pys_lock_exclude_each_other(r: redis.Redis, name: str) -> None:
    face, theirs = Lock(r, name), RedisPyLock(r, name)
    assert face.acquire(blocking=False)
    assert not theirs.acquire(blocking=False)  # redis-py sees the name taken
    face.release()
    assert theirs.acquire(blocking=False)
    assert not face.acquire(blocking=False)  # and the face sees redis-py's hold
    assert face.locked()
    theirs.release()
    assert face.acquire(blocking=False)
    face.release()


def test_a_face_waiting_on_a_redis_py_holder_gets_the_lock_when_it_is_released(
    r: redis.Redis, name: str
) -> None:
    theirs = RedisPyLock(r, name, timeout=30, thread_local=False)  # released elsewhere
    assert theirs.acquire(blocking=False)
    threading.Timer(0.3, theirs.release).start()
    face = Lock(r, name)
    assert face.acquire(blocking_timeout=30)  # no wake-up from redis-py: found by looking
    face.release()


def test_two_faces_in_one_thread_contend_as_two_redis_py_locks_do(
    r: redis.Redis, name: str
) -> None:
    first, second = Lock(r, name), Lock(r, name, blocking_timeout=0.2)
    assert first.acquire()
    started = time.monotonic()
    assert second.acquire() is False  # waited its blocking_timeout, then gave up
    assert time.monotonic() - started >= 0.2
    assert first.acquire(blocking=False) is False  # held by itself: not again
    with pytest.raises(LockError, match="Unable to acquire lock"), second:
        pass
    first.release()


def test_thread_local_keeps_each_threads_hold_its_own(r: redis.Redis, name: str) -> None:
    shared, local = Lock(r, name, thread_local=False), Lock(r, name + "/2")
    assert shared.acquire()
    assert local.acquire()
    seen: list[object] = []

    def elsewhere() -> None:
        seen.append(shared.owned())
        seen.append(local.owned())
        try:
            local.release()
        except LockError as exc:
            seen.append(exc)
        shared.release()  # thread_local=False: another thread may release it

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join(30)
    assert seen[:2] == [True, False]
    assert isinstance(seen[2], LockError)
    assert "not owned" in str(seen[2])
    assert not shared.locked()
    assert local.owned()
    local.release()


def test_release_extend_and_reacquire_say_what_redis_py_says(r: redis.Redis, name: str) -> None:
    lock = Lock(r, name, timeout=10)
    with pytest.raises(LockError, match="not owned or is already unlocked"):
        lock.release()
    with pytest.raises(LockError, match="Cannot extend an unlocked lock"):
        lock.extend(5)
    assert lock.acquire()
    assert lock.extend(10) is True
    assert 18_000 < int(r.pttl(name)) <= 20_000
    assert lock.extend(3, replace_ttl=True) is True
    assert int(r.pttl(name)) <= 3_000
    assert lock.reacquire() is True
    assert 8_000 < int(r.pttl(name)) <= 10_000
    untimed = Lock(r, name + "/untimed")
    assert untimed.acquire()
    with pytest.raises(LockError, match="with no timeout"):
        untimed.extend(5)
    with pytest.raises(LockError, match="with no timeout"):
        untimed.reacquire()
    untimed.release()
    lock.release()


def test_a_lost_lock_says_it_is_no_longer_owned(r: redis.Redis, name: str) -> None:
    lock = Lock(r, name, timeout=0.2)
    assert lock.acquire()
    wait_until(lambda: not r.exists(name), what=f"{name}'s key to expire", interval=0.05)
    assert not lock.owned()
    with pytest.raises(LockNotOwnedError, match="no longer owned"):
        lock.extend(1)
    with pytest.raises(LockNotOwnedError, match="no longer owned"):
        lock.release()
    assert lock.local.token is None  # cleared, as redis-py does


def test_raise_on_release_error_false_logs_instead(
    r: redis.Redis, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="fencelock.compat.redis_py"),
        Lock(r, name, raise_on_release_error=False) as lock,
    ):
        lock.release()
    assert "no longer owned when exiting" in caplog.text
    with pytest.raises(LockError), Lock(r, name) as lock:
        lock.release()


def test_a_chosen_token_is_refused_with_the_reason(r: redis.Redis, name: str) -> None:
    with pytest.raises(fencelock.ConfigError, match="token= is not supported"):
        Lock(r, name).acquire(token="mine")


def test_the_asyncio_face(plain_redis: RedisServer, name: str) -> None:
    async def main() -> None:
        client = redis.asyncio.Redis.from_url(plain_redis.url)
        try:
            # redis-py types lock_class as its own Lock: fencelock's stands in for it
            lock = client.lock(name, lock_class=AsyncLock, timeout=10)  # type: ignore[arg-type]
            assert isinstance(lock, AsyncLock)
            other = AsyncLock(client, name, blocking_timeout=0.1)
            assert await lock.acquire()
            assert await lock.owned()
            assert await client.get(name) == lock.local.token
            assert not await other.acquire()
            first = lock.fencing_token
            assert await lock.extend(5) is True
            await lock.release()
            assert not await lock.owned()
            assert not await lock.locked()
            async with other:
                assert other.fencing_token is not None
                assert first is not None
                assert other.fencing_token > first
            with pytest.raises(LockError, match="not owned or is already unlocked"):
                await other.release()
        finally:
            await client.aclose()

    asyncio.run(main())


def _in_the_child(lock: Lock, outcome: Any) -> None:
    outcome.put((lock.owned(), lock.acquire(blocking=False)))


def test_a_forked_child_does_not_hold_its_parents_lock(r: redis.Redis, name: str) -> None:
    lock = Lock(r, name, thread_local=False)
    assert lock.acquire()
    context = multiprocessing.get_context("fork")
    outcome = context.Queue()
    child = context.Process(target=_in_the_child, args=(lock, outcome))
    child.start()
    child.join(60)
    assert outcome.get(timeout=10) == (False, False)  # not its hold, and still taken
    assert lock.owned()
    lock.release()


@pytest.mark.filterwarnings("error::ResourceWarning")
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_the_asyncio_face_leaves_nothing_open_as_event_loops_come_and_go(
    plain_redis: RedisServer, r: redis.Redis, name: str
) -> None:
    """Ten ``asyncio.run()``s, each with a redis.asyncio client of its own and a face's
    hold: no connection of theirs stays open, none is left to the garbage collector (it
    was 1 -> 5 server connections and 34 ResourceWarnings; redis-py's own Lock: 1 -> 1)."""

    def connections() -> int:
        return len(r.client_list())

    async def one_loop() -> None:
        client = redis.asyncio.Redis.from_url(plain_redis.url)
        try:
            # redis-py types lock_class as its own Lock: fencelock's stands in for it
            async with client.lock(name, lock_class=AsyncLock, timeout=10) as held:  # type: ignore[arg-type]
                assert held.fencing_token is not None
        finally:
            await client.aclose()

    asyncio.run(one_loop())
    before = connections()
    for _ in range(10):
        asyncio.run(one_loop())
    gc.collect()
    assert connections() <= before
