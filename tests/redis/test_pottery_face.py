"""pottery's ``Redlock`` and ``synchronize`` face (``fencelock.compat.pottery``): its
signature and errors (pottery's own exception classes), a fencing token on every hold,
mutual exclusion with pottery itself over one master, and, over several, the documented
lack of it (the face's Redlock keeps its keys apart from pottery's)."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator

import pottery
import pytest
import redis

import fencelock
from fencelock.compat.pottery import Redlock, redlock_url, synchronize
from fencelock.engine.urls import parse_url
from fencelock.testing import RedisServer, ServerPool
from tests.redis.conftest import Background

LONG = 30.0  # an auto_release_time no test waits out


@pytest.fixture
def conn(plain_redis: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(plain_redis.url)
    yield client
    client.close()


@pytest.fixture(scope="module")
def three(module_servers: ServerPool) -> Iterator[set[redis.Redis]]:
    clients = {
        redis.Redis.from_url(module_servers.redis(name=f"pottery-m{i}").url) for i in range(3)
    }
    yield clients
    for client in clients:
        client.close()


def test_two_faces_exclude_each_other_and_tokens_rise(conn: redis.Redis, name: str) -> None:
    first = Redlock(key=name, masters={conn}, auto_release_time=LONG)
    second = Redlock(key=name, masters={conn}, auto_release_time=LONG)
    assert first.fencing_token is None
    assert first.locked() == 0
    assert first.acquire(blocking=False) is True
    assert 0 < first.locked() <= LONG
    assert conn.exists(f"redlock:{name}")  # pottery's key
    assert second.acquire(blocking=False) is False
    assert second.locked() == 0
    token = first.fencing_token
    first.release()
    assert first.fencing_token is None
    assert second.acquire(blocking=False) is True
    assert first.acquire(blocking=False) is False
    assert (second.fencing_token or 0) > (token or 0)
    second.release()
    assert not conn.exists(f"redlock:{name}")


def test_errors_are_potterys(conn: redis.Redis, name: str) -> None:
    lock = Redlock(key=name, masters={conn}, auto_release_time=LONG, num_extensions=2)
    with pytest.raises(pottery.ReleaseUnlockedLock):
        lock.release()
    with pytest.raises(pottery.ExtendUnlockedLock):
        lock.extend()
    assert lock.acquire()
    lock.extend()
    lock.extend()
    with pytest.raises(pottery.TooManyExtensions):
        lock.extend()
    lock.release()
    with pytest.raises(pottery.ReleaseUnlockedLock):
        lock.release()
    with pytest.raises(ValueError, match="non-blocking"):
        lock.acquire(blocking=False, timeout=1)
    with pytest.raises(ValueError, match="non-blocking"):
        Redlock(key=name, masters={conn}, context_manager_blocking=False, context_manager_timeout=1)
    assert repr(lock) == f"<Redlock key=redlock:{name}>"


def test_context_manager(conn: redis.Redis, name: str) -> None:
    lock = Redlock(key=name, masters={conn}, auto_release_time=LONG)
    rival = Redlock(
        key=name, masters={conn}, auto_release_time=LONG, context_manager_blocking=False
    )
    with lock as held:
        assert held is lock
        assert lock.locked() > 0
        with pytest.raises(pottery.QuorumNotAchieved), rival:
            pytest.fail("entered a lock that is held")  # pragma: no cover
    assert lock.locked() == 0
    with rival:
        assert rival.fencing_token is not None


def test_a_hold_ends_with_its_auto_release_time_unless_extended(
    conn: redis.Redis, name: str
) -> None:
    lock = Redlock(key=name, masters={conn}, auto_release_time=0.3)
    tokens: list[int | None] = []

    def hold_past_the_auto_release_time() -> None:
        with lock:
            tokens.append(lock.fencing_token)
            time.sleep(0.8)
            assert lock.locked() == 0

    with pytest.raises(pottery.ReleaseUnlockedLock):  # not renewed: leaving says so
        hold_past_the_auto_release_time()
    later = Redlock(key=name, masters={conn}, auto_release_time=LONG)
    assert later.acquire(blocking=False)
    assert (later.fencing_token or 0) > (tokens[0] or 0)
    later.release()


def test_blocking_false_and_timeout_give_up_and_a_wait_is_woken(
    conn: redis.Redis, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pottery")
    holder = Redlock(key=name, masters={conn}, auto_release_time=LONG)
    waiter = Redlock(key=name, masters={conn}, auto_release_time=LONG)
    assert holder.acquire()
    assert waiter.acquire(blocking=False) is False
    assert waiter.acquire(timeout=0.2) is False
    waiting = Background(lambda: waiter.acquire(timeout=LONG / 2))
    time.sleep(0.1)
    holder.release()
    assert waiting.wait(LONG), waiting.outcome()
    assert waiting.value is True  # woken by the release, long before its timeout
    waiter.release()
    lines = [r.getMessage() for r in caplog.records if r.name == "pottery"]
    assert [line.endswith(f"sample#redlock.acquired.{name}=0") for line in lines] == [True, False]
    assert lines[1].endswith(f"sample#redlock.acquired.{name}=1")  # pottery's lines


def test_an_object_acquiring_again_waits_for_its_own_hold_as_potterys(
    conn: redis.Redis, name: str
) -> None:
    lock = Redlock(key=name, masters={conn}, auto_release_time=2)
    assert lock.acquire()
    first = lock.fencing_token
    assert lock.acquire(blocking=False) is False
    assert lock.fencing_token == first  # its hold stands
    assert lock.acquire(timeout=LONG)  # after its own hold ran out
    assert (lock.fencing_token or 0) > (first or 0)
    lock.release()


def test_synchronize_serializes_calls(conn: redis.Redis, name: str) -> None:
    inside, most, calls = [0], [0], []
    guard = threading.Lock()

    @synchronize(key=name, masters={conn}, auto_release_time=LONG)
    def work(n: int) -> int:
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.02)
        with guard:
            inside[0] -= 1
        calls.append(n)
        return n

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(LONG)
    assert sorted(calls) == [0, 1, 2, 3]
    assert most[0] == 1
    assert work.__name__ == "work"


def test_synchronize_without_blocking_raises_quorum_not_achieved(
    conn: redis.Redis, name: str
) -> None:
    @synchronize(key=name, masters={conn}, blocking=False)
    def work() -> str:
        return "ran"

    holder = Redlock(key=name, masters={conn}, auto_release_time=LONG)
    with holder, pytest.raises(pottery.QuorumNotAchieved):
        work()
    assert work() == "ran"


def test_a_face_and_pottery_exclude_each_other_over_one_master(
    conn: redis.Redis, name: str
) -> None:
    face = Redlock(key=name, masters={conn}, auto_release_time=LONG)
    theirs = pottery.Redlock(key=name, masters={conn}, auto_release_time=LONG)
    assert face.acquire(blocking=False)
    assert not theirs.acquire(blocking=False)
    assert not theirs.locked()
    face.release()
    assert theirs.acquire(blocking=False)
    assert not face.acquire(blocking=False)
    theirs.release()
    assert face.acquire(blocking=False)
    face.release()


def test_several_masters_are_redlock(three: set[redis.Redis], name: str) -> None:
    first = Redlock(key=name, masters=three, auto_release_time=LONG)
    second = Redlock(key=name, masters=three, auto_release_time=LONG)
    assert first.acquire(blocking=False)
    assert first.locked() > 0
    assert not second.acquire(blocking=False)
    first.extend()
    token = first.fencing_token
    first.release()
    assert second.acquire(blocking=False)
    assert (second.fencing_token or 0) > (token or 0)
    second.release()
    assert redlock_url(three).startswith("redlock://127.0.0.1:")


def test_over_several_masters_pottery_is_not_excluded_as_documented(
    three: set[redis.Redis], name: str
) -> None:
    """The face's Redlock keeps its keys under fencelock:{redlock:KEY}, pottery's at
    redlock:KEY: both hold at once, so every process on such a key moves together."""
    face = Redlock(key=name, masters=three, auto_release_time=LONG)
    theirs = pottery.Redlock(key=name, masters=three, auto_release_time=LONG)
    assert face.acquire(blocking=False)
    assert theirs.acquire(blocking=False)
    theirs.release()
    face.release()


def test_masters_that_are_no_quorum_of_servers_are_refused(
    plain_redis: RedisServer, three: set[redis.Redis], name: str
) -> None:
    two = set(list(three)[:2])
    with pytest.raises(fencelock.ConfigError, match="at least 3"):
        Redlock(key=name, masters=two)
    databases = {redis.Redis(port=plain_redis.port, db=db) for db in range(3)}
    with pytest.raises(fencelock.ConfigError, match="one server more than once"):
        Redlock(key=name, masters=databases)
    with pytest.raises(fencelock.ConfigError, match="auto_release_time"):
        Redlock(key=name, masters=three, auto_release_time=0.001)


def test_an_unreachable_master_fails_as_potterys(name: str) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    gone = redis.Redis(host="127.0.0.1", port=port)
    lock = Redlock(key=name, masters={gone})  # as pottery's: no request yet
    assert lock.acquire(blocking=False) is False
    assert lock.acquire(timeout=0.3) is False
    with pytest.raises(pottery.QuorumIsImpossible):
        lock.acquire(blocking=False, raise_on_redis_errors=True)
    assert lock.locked() == 0


def test_a_master_lost_while_held_fails_as_potterys_but_release_is_logged(
    servers: ServerPool, name: str
) -> None:
    server = servers.redis(name="pottery-lost")
    lock = Redlock(key=name, masters={redis.Redis.from_url(server.url)}, auto_release_time=LONG)
    assert lock.acquire()
    server.kill()
    assert lock.locked() == 0
    with pytest.raises(pottery.QuorumIsImpossible):
        lock.locked(raise_on_redis_errors=True)
    with pytest.raises(pottery.ExtendUnlockedLock):
        lock.extend()
    with pytest.raises(pottery.QuorumIsImpossible):
        lock.extend(raise_on_redis_errors=True)
    lock.release()  # pottery: ReleaseUnlockedLock; here logged, and the key ends by its TTL
    with pytest.raises(pottery.ReleaseUnlockedLock):
        lock.release()


def test_the_masters_settings_make_one_redlock_url() -> None:
    masters = [
        redis.Redis(host=f"10.0.0.{i}", port=6380, db=2, username="app", password="p w", ssl=True)
        for i in (3, 1, 2)
    ]
    url = redlock_url(masters)
    assert url.startswith("redlocks://app:p%20w@10.0.0.1:6380,10.0.0.2:6380,10.0.0.3:6380/2")
    parsed = parse_url(url)
    assert parsed.scheme == "redlocks"
    assert len(parsed.hosts) == 3
    other_db = [*masters[:2], redis.Redis(host="10.0.0.4", port=6380, db=3)]
    with pytest.raises(fencelock.ConfigError, match="differ"):
        redlock_url(other_db)
