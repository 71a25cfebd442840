"""python-redis-lock's ``Lock`` face (``fencelock.compat.redis_lock``): its signature and
errors (its own exception classes), a fencing token on every hold, and mutual exclusion
with python-redis-lock itself on the same name, whose waiters a face's release wakes."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redis_lock

import fencelock
from fencelock.compat.redis_lock import Lock, reset_all
from fencelock.testing import RedisServer
from tests.polling import wait_until


@pytest.fixture
def conn(plain_redis: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(plain_redis.url)
    yield client
    client.close()


def test_a_hold_answers_as_python_redis_lock_does_with_a_rising_token(
    conn: redis.Redis, name: str
) -> None:
    lock = Lock(conn, name, expire=60, auto_renewal=True)
    assert lock.id is None
    assert lock.fencing_token is None
    assert not lock.locked()
    assert lock.acquire(blocking=False) is True
    first = lock.fencing_token
    assert first is not None
    assert lock.locked()
    assert lock.get_owner_id() == lock.id  # at python-redis-lock's key, lock:NAME
    assert conn.get(f"lock:{name}") == (lock.id or "").encode()
    with pytest.raises(redis_lock.AlreadyAcquired):
        lock.acquire()
    lock.release()
    with pytest.raises(redis_lock.NotAcquired):
        lock.release()
    with lock:
        assert lock.fencing_token is not None
        assert lock.fencing_token > first


def test_a_face_and_python_redis_lock_exclude_each_other(conn: redis.Redis, name: str) -> None:
    face, theirs = Lock(conn, name, expire=30), redis_lock.Lock(conn, name, expire=30)
    assert face.acquire(blocking=False)
    assert not theirs.acquire(blocking=False)
    face.release()
    assert theirs.acquire(blocking=False)
    assert not face.acquire(blocking=False)
    theirs.release()
    assert face.acquire(blocking=False)
    face.release()


def test_a_face_release_wakes_a_python_redis_lock_waiter(conn: redis.Redis, name: str) -> None:
    face = Lock(conn, name)  # no expire: theirs would wait on its signal list forever
    assert face.acquire()
    got: list[float] = []

    def wait_theirs() -> None:
        theirs = redis_lock.Lock(conn, name)
        if theirs.acquire(blocking=True, timeout=None):
            got.append(time.monotonic())
            theirs.release()

    waiter = threading.Thread(target=wait_theirs, daemon=True)
    waiter.start()
    time.sleep(0.3)  # queued on BLPOP
    released = time.monotonic()
    face.release()
    waiter.join(30)
    assert got
    assert got[0] - released < 10  # woken by the signal, not by a timeout


def test_argument_errors_are_python_redis_locks(conn: redis.Redis, name: str) -> None:
    with pytest.raises(ValueError, match="auto_renewal"):
        Lock(conn, name, auto_renewal=True)
    with pytest.raises(ValueError, match="negative"):
        Lock(conn, name, expire=-1)
    lock = Lock(conn, name, expire=5)
    with pytest.raises(redis_lock.TimeoutNotUsable):
        lock.acquire(blocking=False, timeout=1)
    with pytest.raises(redis_lock.TimeoutTooLarge):
        lock.acquire(timeout=10)
    with pytest.raises(fencelock.ConfigError, match="id= is not supported"):
        Lock(conn, name, id="mine")


def test_extend_and_its_errors(conn: redis.Redis, name: str) -> None:
    lock = Lock(conn, name, expire=10)
    with pytest.raises(redis_lock.NotAcquired):
        lock.extend(20)
    assert lock.acquire()
    lock.extend(20)
    assert 18_000 < int(conn.pttl(f"lock:{name}")) <= 20_000
    lock.release()
    untimed = Lock(conn, name + "/untimed")
    assert untimed.acquire()
    with pytest.raises(redis_lock.NotExpirable):
        untimed.extend(5)
    with pytest.raises(TypeError, match="must be provided"):
        untimed.extend()
    untimed.release()


def test_reset_and_reset_all_end_the_holder(conn: redis.Redis, name: str) -> None:
    holder = Lock(conn, name, expire=30)
    assert holder.acquire()
    Lock(conn, name).reset()
    assert not holder.locked()
    another = Lock(conn, name + "/2", expire=30)
    assert another.acquire()
    reset_all(conn)
    assert not another.locked()


def test_found_by_python_redis_locks_own_tests(conn: redis.Redis, name: str) -> None:
    """Three differences its suite found: a string expire is converted before it is
    checked; reset_all ends python-redis-lock's own holders too and wakes their waiters;
    a Lock collected while held is renewed no more, so its key ends by its expire."""
    with pytest.raises(ValueError, match="negative"):
        Lock(conn, name, expire="-1")  # type: ignore[arg-type]

    theirs = redis_lock.Lock(conn, f"{name}-theirs", expire=60)
    assert theirs.acquire(blocking=False)
    reset_all(conn)
    assert conn.get(f"lock:{name}-theirs") is None
    assert conn.blpop([f"lock-signal:{name}-theirs"], timeout=5) is not None

    dropped = Lock(conn, f"{name}-dropped", expire=1, auto_renewal=True)
    assert dropped.acquire(blocking=False)
    del dropped
    gc.collect()
    wait_until(
        lambda: not conn.exists(f"lock:{name}-dropped"),
        what="a collected Lock's key to expire, renewed no more",
        timeout=20,
        interval=0.2,
    )


def test_a_module_named_redis_lock_may_re_export_the_face(tmp_path: Path) -> None:
    """The usual way to move a large code base without editing every import: a module
    ``redis_lock`` of one's own that re-exports the face (it crashed at import, the face
    asking the half-made module for python-redis-lock's exception classes)."""
    (tmp_path / "redis_lock.py").write_text("from fencelock.compat.redis_lock import *\n")
    probe = (
        "import redis_lock\n"
        "assert redis_lock.Lock.__module__ == 'fencelock.compat.redis_lock'\n"
        "assert issubclass(redis_lock.AlreadyAcquired, RuntimeError)\n"
        "print(redis_lock.NotAcquired.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "NotAcquired\n"


def test_strict_is_python_redis_locks_check(conn: redis.Redis, name: str) -> None:
    Lock(conn, name, strict=True)  # a redis-py client is a StrictRedis
    with pytest.raises(ValueError, match="StrictRedis"):
        Lock(object(), name, strict=True)
    lock = Lock(conn, name, expire=5, strict=False)
    assert lock.acquire(blocking=False)
    lock.release()
