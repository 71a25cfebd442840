"""Multi-locks, the same on every backend: all names or none, in one global order (two
multi-locks over overlapping names never deadlock), a token per name, and a lost member
loses the whole multi-lease."""

from __future__ import annotations

import asyncio
import threading

import pytest

import fencelock
from tests.contract.conftest import BackendCase


def test_all_names_are_held_each_with_its_own_token(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    names = [f"{name}/seat-2", f"{name}/seat-1", f"{name}/account"]
    with client.multi_lock(names) as multi:
        assert multi.names == tuple(sorted(names))
        assert set(multi.tokens) == set(names)
        for each in names:
            assert other.inspect(each).token == multi.tokens[each]  # type: ignore[union-attr]
            assert other.locked(each)
            assert multi[each].token == multi.tokens[each]
        multi.check()
        assert multi.remaining() > 0
    assert not any(other.locked(each) for each in names)


def test_all_or_nothing(client: fencelock.Client, other: fencelock.Client, name: str) -> None:
    a, b, c = f"{name}/a", f"{name}/b", f"{name}/c"
    held = other.lock(b).acquire()
    with pytest.raises(fencelock.LockTimeout, match=f"'{b}' stayed held"):
        client.multi_lock([c, a, b]).acquire(timeout=0.3)
    assert not other.locked(a)
    assert not other.locked(c)  # a was given back
    assert client.held() == []
    assert client.multi_lock([a, b]).try_acquire() is None
    held.release()
    multi = client.multi_lock([a, b, c]).try_acquire()
    assert multi is not None
    multi.release()


def test_overlapping_multi_locks_in_opposite_orders_do_not_deadlock(
    backend: BackendCase, name: str
) -> None:
    names = [f"{name}/{i}" for i in range(4)]
    done: list[int] = []
    errors: list[BaseException] = []

    def worker(order: list[str]) -> None:
        try:
            with fencelock.connect(backend.url) as client:
                for _ in range(5):
                    with client.multi_lock(order, timeout=60):
                        done.append(1)
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=worker, args=(names,)),
        threading.Thread(target=worker, args=(list(reversed(names)),)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert len(done) == 10


def test_a_lost_member_loses_the_whole_multi_lease(client: fencelock.Client, name: str) -> None:
    multi = client.multi_lock([f"{name}/a", f"{name}/b"], ttl=0.3, renew=False).acquire()
    heard: list[fencelock.MultiLease] = []
    multi.on_lost(heard.append)
    assert multi.wait_lost(10)
    assert multi.lost
    assert heard == [multi]
    assert multi.lost_reason is not None
    assert name in multi.lost_reason
    with pytest.raises(fencelock.LeaseLost):
        multi.check()
    with pytest.raises(fencelock.LeaseLost, match="multi-lease lost before release"):
        multi.release()
    assert client.held() == []


def test_bad_names_are_refused(client: fencelock.Client) -> None:
    with pytest.raises(fencelock.ConfigError, match="at least one name"):
        client.multi_lock([])
    with pytest.raises(fencelock.ConfigError, match="not one str"):
        client.multi_lock("orders/1")
    with pytest.raises(fencelock.ConfigError, match="must be > 0 seconds"):
        client.multi_lock(["a"], ttl=0)


def test_async_multi_lock(backend: BackendCase, name: str) -> None:
    async def main() -> None:
        async with (
            fencelock.aconnect(backend.url) as client,
            fencelock.aconnect(backend.url) as other,
        ):
            names = [f"{name}/y", f"{name}/x"]
            async with client.multi_lock(names) as multi:
                assert multi.names == (f"{name}/x", f"{name}/y")
                assert await other.multi_lock(names).try_acquire() is None
                assert await other.locked(f"{name}/x")
            assert not await other.locked(f"{name}/x")
            again = await other.multi_lock(names, timeout=5).acquire()
            await again.release()

    asyncio.run(main())
