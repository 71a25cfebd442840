from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fencelock.errors import StaleToken
from fencelock.fencing import MemoryGuard, SQLiteGuard


@given(st.lists(st.integers(0, 50), max_size=60))
def test_memory_guard_accepts_only_increasing_tokens(tokens: list[int]) -> None:
    guard = MemoryGuard()
    accepted = []
    for token in tokens:
        try:
            guard.accept("k", token)
        except StaleToken as exc:
            refused = exc
        else:
            accepted.append(token)
            continue
        assert refused.token == token
        assert refused.last >= token
    assert accepted == sorted(set(accepted))
    assert guard.rejections == len(tokens) - len(accepted)
    assert guard.last("k") == (accepted[-1] if accepted else None)


def test_sqlite_guard_shared_between_instances(tmp_path: Path) -> None:
    path = str(tmp_path / "fences.db")
    first, second = SQLiteGuard(path), SQLiteGuard(path)
    first.accept("seat", 5)
    with pytest.raises(StaleToken, match="token 4"):
        second.accept("seat", 4)
    with pytest.raises(StaleToken):
        second.accept("seat", 5)
    second.accept("seat", 6)
    second.accept("other", 1)
    assert first.last("seat") == 6
    assert second.rejections == 2
    assert first.rejections == 0
    first.close()
    second.close()


@pytest.mark.parametrize("make", [lambda p: MemoryGuard(), lambda p: SQLiteGuard(str(p / "f.db"))])
def test_allow_equal_lets_one_lease_write_twice(make: object, tmp_path: Path) -> None:
    guard = make(tmp_path)  # type: ignore[operator]
    guard.accept("k", 3)
    with pytest.raises(StaleToken):
        guard.accept("k", 3)
    guard.accept("k", 3, allow_equal=True)
    with pytest.raises(StaleToken):
        guard.accept("k", 2, allow_equal=True)
    assert guard.last("k") == 3


def test_a_rejection_is_counted_by_prefix_as_docs_fencing_says() -> None:
    from fencelock import metrics

    metrics.reset()
    guard = MemoryGuard()
    guard.accept("show/42", 5)
    with pytest.raises(StaleToken):
        guard.accept("show/42", 3)
    assert guard.rejections == 1
    assert metrics.snapshot()["show"].fencing_rejections == 1


def test_a_redis_guard_on_a_url_that_is_not_redis_is_one_config_error() -> None:
    from fencelock.errors import ConfigError
    from fencelock.fencing import RedisGuard

    with pytest.raises(ConfigError, match="a RedisGuard needs a redis:// URL"):
        RedisGuard("postgresql://app:secret@db/prod")
