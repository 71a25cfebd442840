"""RedisGuard: the fence and the guarded write are one Lua script on a real Redis."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import fencelock
from fencelock import metrics
from fencelock.fencing import MemoryGuard, RedisGuard
from fencelock.testing import RedisServer
from tests.redis.conftest import redis_cli


def _rejections() -> int:
    """Fencing rejections this process has counted, every prefix together."""
    return sum(m.fencing_rejections for m in metrics.snapshot().values())


@pytest.fixture
def guard(plain_redis: RedisServer) -> Iterator[RedisGuard]:
    g = RedisGuard(plain_redis.url)
    yield g
    g.close()


@pytest.fixture
def key() -> str:
    return f"seat/{secrets.token_hex(4)}"


def test_tokens_are_accepted_only_increasing(guard: RedisGuard, key: str) -> None:
    assert guard.last(key) is None
    guard.accept(key, 5)
    guard.accept(key, 7)
    with pytest.raises(fencelock.StaleToken) as older:
        guard.accept(key, 6)
    assert (older.value.key, older.value.token, older.value.last) == (key, 6, 7)
    with pytest.raises(fencelock.StaleToken):
        guard.accept(key, 7)  # equal is stale unless allowed
    guard.accept(key, 8)
    assert guard.last(key) == 8


def test_allow_equal_accepts_the_same_token_again_but_never_an_older_one(
    guard: RedisGuard, key: str
) -> None:
    guard.accept(key, 3)
    guard.accept(key, 3, allow_equal=True)
    with pytest.raises(fencelock.StaleToken):
        guard.accept(key, 2, allow_equal=True)
    assert guard.last(key) == 3
    assert guard.rejections == 1


def test_write_sets_the_data_key_only_when_accepted(
    guard: RedisGuard, plain_redis: RedisServer, key: str
) -> None:
    data = f"{{{key}}}:data"
    guard.write(key, 10, data, "ten")
    assert redis_cli(plain_redis.port, "get", data) == "ten"
    with pytest.raises(fencelock.StaleToken):
        guard.write(key, 9, data, "nine")
    with pytest.raises(fencelock.StaleToken):
        guard.write(key, 10, data, "ten again")
    assert redis_cli(plain_redis.port, "get", data) == "ten"
    guard.write(key, 10, data, "ten, amended", allow_equal=True)
    assert redis_cli(plain_redis.port, "get", data) == "ten, amended"
    guard.write(key, 11, data, "eleven")
    assert redis_cli(plain_redis.port, "get", data) == "eleven"
    assert guard.last(key) == 11


def test_rejections_are_counted(guard: RedisGuard, key: str) -> None:
    before = _rejections()
    guard.accept(key, 100)
    for stale in (99, 100, 1):
        with pytest.raises(fencelock.StaleToken):
            guard.accept(key, stale)
    with pytest.raises(fencelock.StaleToken):
        guard.write(key, 50, f"{{{key}}}:data", "late")
    assert guard.rejections == 4
    assert _rejections() - before == 4


def test_the_fence_lives_in_redis_so_guards_share_it(plain_redis: RedisServer, key: str) -> None:
    first, second = RedisGuard(plain_redis.url), RedisGuard(plain_redis.url)
    try:
        first.accept(key, 20)
        with pytest.raises(fencelock.StaleToken):
            second.accept(key, 19)
        assert second.last(key) == 20
        assert (first.rejections, second.rejections) == (0, 1)
    finally:
        first.close()
        second.close()


def test_real_lease_tokens_are_fenced_exactly(
    guard: RedisGuard, plain_redis: RedisServer, name: str
) -> None:
    """Tokens seeded from the server clock (~1.8e15 us) compare exactly, even when adjacent."""
    with fencelock.connect(plain_redis.url) as client:
        with client.lock(name, ttl=5) as old:
            pass
        with client.lock(name, ttl=5) as new:
            pass
    guard.accept(name, new.token)
    with pytest.raises(fencelock.StaleToken):
        guard.accept(name, old.token)
    with pytest.raises(fencelock.StaleToken):
        guard.accept(name, new.token - 1)
    guard.accept(name, new.token + 1)
    assert guard.last(name) == new.token + 1


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(st.integers(0, 10), st.booleans()), max_size=25))
@example(tokens=[(3, False), (3, False), (3, True), (2, True), (4, False)])
def test_redis_guard_agrees_with_the_memory_guard(
    guard: RedisGuard, tokens: list[tuple[int, bool]]
) -> None:
    key = f"model/{secrets.token_hex(6)}"
    model = MemoryGuard()
    for token, allow_equal in tokens:
        expected: type[Exception] | None = None
        try:
            model.accept(key, token, allow_equal=allow_equal)
        except fencelock.StaleToken:
            expected = fencelock.StaleToken
        if expected is None:
            guard.accept(key, token, allow_equal=allow_equal)
        else:
            with pytest.raises(expected):
                guard.accept(key, token, allow_equal=allow_equal)
        assert guard.last(key) == model.last(key)


def test_tokens_above_two_to_the_53_compare_exactly(guard: RedisGuard, key: str) -> None:
    big = 2**53
    guard.accept(key, big)
    try:
        guard.accept(key, big + 1)
    except fencelock.StaleToken as exc:
        raise AssertionError(f"{big + 1} rejected after {big}: {exc}") from exc
    for stale in (big + 1, big):  # and accepting "equal" doubles is no fix
        try:
            guard.accept(key, stale)
        except fencelock.StaleToken:
            continue
        raise AssertionError(f"{stale} accepted after {big + 1}")
    assert guard.last(key) == big + 1
