"""Keys on Redis: nothing is left without an expiry, and a token counter that expired
after a week of idleness never lets a token go backwards (docs/backends.md, "Keys and
their lifetimes")."""

from __future__ import annotations

import redis

import fencelock
from fencelock.backends.redis.scripts import LockKeys
from fencelock.testing.pool import ServerPool
from fencelock.testing.redis import RedisServer
from tests.polling import wait_until

WEEK_MS = 7 * 24 * 3600 * 1000


def test_one_shot_locks_leave_no_key_without_an_expiry(plain_redis: RedisServer, name: str) -> None:
    with fencelock.connect(plain_redis.url) as client:
        for n in range(200):
            client.lock(f"{name}/{n}", ttl=5).acquire().release()
    with redis.Redis(port=plain_redis.port) as server:
        ours = list(server.scan_iter(match=f"*{{{name}/*"))
        assert len(ours) == 200  # the counters; the lock keys went with their release
        expiries = [server.pttl(key) for key in ours]
    assert all(WEEK_MS < left <= WEEK_MS + 5000 for left in expiries), sorted(expiries)[:3]


def test_a_token_after_the_counter_expired_is_still_greater(
    plain_redis: RedisServer, name: str
) -> None:
    with fencelock.connect(plain_redis.url) as client:
        first = client.lock(name).acquire()
        first.release()
        with redis.Redis(port=plain_redis.port) as server:
            assert server.pexpire(LockKeys.of(name).token, 1)  # as if a week had passed
            wait_until(
                lambda: not server.exists(LockKeys.of(name).token),
                what="the token counter to expire",
                interval=0.005,
            )
        second = client.lock(name).acquire()
        assert second.token > first.token
        second.release()


def test_a_token_follows_a_counter_ahead_of_the_clock(plain_redis: RedisServer, name: str) -> None:
    """As after the server's clock went back: the counter, not the clock, decides."""
    ahead = 4 * 10**15  # microseconds: a clock seventy years ahead, still exact in Lua
    with fencelock.connect(plain_redis.url) as client, redis.Redis(port=plain_redis.port) as server:
        server.set(LockKeys.of(name).token, ahead)
        lease = client.lock(name).acquire()
        assert lease.token == ahead + 1
        assert int(server.get(LockKeys.of(name).token)) == ahead + 1
        assert WEEK_MS < server.pttl(LockKeys.of(name).token) <= WEEK_MS + 60_000
        lease.release()
        seconds, micros = server.time()
        following = client.lock(name).acquire()
        assert following.token == ahead + 2
        following.release()
    with fencelock.connect(plain_redis.url) as client:
        fresh = client.lock(f"{name}/fresh").acquire()
        assert fresh.token >= seconds * 1_000_000 + micros  # a new counter: the clock
        fresh.release()


def test_redlock_counters_expire_too(module_servers: ServerPool, name: str) -> None:
    nodes = [module_servers.redis(name=f"hygiene{i}") for i in range(3)]
    url = "redlock://" + ",".join(f"127.0.0.1:{node.port}" for node in nodes) + "/0?timeout=5"
    with fencelock.connect(url) as client:
        client.lock(name, ttl=5).acquire().release()
    token = LockKeys.of(name).token

    def expiries() -> list[int]:
        found = []
        for node in nodes:
            with redis.Redis(port=node.port) as server:
                found.append(server.pttl(token))  # -2: no counter there (no phase 2 sent)
        return found

    wait_until(
        lambda: sum(left > 0 for left in expiries()) >= 2,
        timeout=10,
        what=lambda: f"two keys with an expiry: {expiries()}",
    )
    assert all(left == -2 or 0 < left <= WEEK_MS for left in expiries())  # never -1
