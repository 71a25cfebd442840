"""``acquire(timeout=0)`` on a held lock sends one try on PostgreSQL, both modes and
sync and async: no listening connection is opened for a try that never waits.

Counted, not timed: every statement and connection the client sends through psycopg.
Before, a contender's first try subscribed to the client's listener, so a client's
first ``acquire(timeout=0)`` opened its ``LISTEN`` connection first (a new server
process, ``set_config``, ``LISTEN``: 3 round trips and a fork before the try). Measured
after ``aconnect()``: 12 to 18 ms idle, 15 to 35 ms median and up to 120 ms on a loaded
2-core machine, 4 ms after (a warm try: 2 ms). The statement after the try (the
waiter's row taken out of the line) stays: the attempt is not told that its caller
will not wait.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

import fencelock
from fencelock.testing import PostgreSQLServer

TTL = 30.0


class Sent:
    """What the client sends through psycopg while :attr:`counting`."""

    def __init__(self) -> None:
        self.counting = False
        self.statements: list[str] = []
        self.connections = 0


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Sent:
    seen = Sent()
    execute = psycopg.AsyncConnection.execute
    connect = psycopg.AsyncConnection.connect.__func__  # type: ignore[attr-defined]

    async def counted_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if seen.counting:
            seen.statements.append(" ".join(str(query).split())[:60])
        return await execute(self, query, *args, **kwargs)

    async def counted_connect(cls: Any, *args: Any, **kwargs: Any) -> Any:
        if seen.counting:
            seen.connections += 1
        return await connect(cls, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", counted_execute)
    monkeypatch.setattr(psycopg.AsyncConnection, "connect", classmethod(counted_connect))
    return seen


def url_of(postgres: PostgreSQLServer, scheme: str) -> str:
    return postgres.url.replace("postgresql://", f"{scheme}://", 1)


def assert_tried_once(sent: Sent, scheme: str, which: str) -> None:
    """One acquire statement, then the one that takes the try out of the line again (a
    try queues: the protocol does not say it will not wait); nothing listens, and no
    connection is opened but, on ``+advisory``, the client's first lock session."""
    shown = f"{which}: {sent.connections} connection(s) opened, statements {sent.statements}"
    assert not any(statement.startswith("LISTEN") for statement in sent.statements), shown
    tries = [statement for statement in sent.statements if statement.startswith("WITH head")]
    assert len(tries) == 1, shown
    assert sent.statements[-1].startswith("WITH gone"), shown
    opened = 1 if scheme == "postgresql+advisory" and which == "first try" else 0
    assert sent.connections <= opened, shown


@pytest.mark.parametrize("scheme", ["postgresql", "postgresql+advisory"])
def test_a_blocking_try_on_a_held_lock_opens_no_listener(
    postgres: PostgreSQLServer, name: str, scheme: str, sent: Sent
) -> None:
    url = url_of(postgres, scheme)
    with fencelock.connect(url) as holder, fencelock.connect(url) as other:
        lease = holder.lock(name, ttl=TTL, renew=False).acquire(timeout=5)
        other.inspect(name)  # its schema checked, no listener yet
        for which in ("first try", "second try"):
            sent.counting = True
            try:
                with pytest.raises(fencelock.LockTimeout):
                    other.lock(name, ttl=TTL).acquire(timeout=0)
            finally:
                sent.counting = False
            assert_tried_once(sent, scheme, which)
            sent.statements.clear()
            sent.connections = 0
        info = other.inspect(name)
        assert info is not None
        assert info.waiters == 0  # the tries left nobody in line
        lease.release()
        assert other.lock(name, ttl=TTL).acquire(timeout=0).token > lease.token


@pytest.mark.parametrize("scheme", ["postgresql", "postgresql+advisory"])
def test_an_asyncio_try_on_a_held_lock_opens_no_listener(
    postgres: PostgreSQLServer, name: str, scheme: str, sent: Sent
) -> None:
    url = url_of(postgres, scheme)

    async def main() -> None:
        async with fencelock.aconnect(url) as holder, fencelock.aconnect(url) as other:
            lease = await holder.lock(name, ttl=TTL, renew=False).acquire(timeout=5)
            await other.inspect(name)  # its schema checked, no listener yet
            for which in ("first try", "second try"):
                sent.counting = True
                try:
                    with pytest.raises(fencelock.LockTimeout):
                        await other.lock(name, ttl=TTL).acquire(timeout=0)
                finally:
                    sent.counting = False
                assert_tried_once(sent, scheme, which)
                sent.statements.clear()
                sent.connections = 0
            sent.connections = 0
            info = await other.inspect(name)
            assert info is not None
            assert info.waiters == 0
            await lease.release()
            assert (await other.lock(name, ttl=TTL).acquire(timeout=0)).token > lease.token

    asyncio.run(main())


@pytest.mark.parametrize("scheme", ["postgresql", "postgresql+advisory"])
def test_a_waiter_still_joins_the_line_and_is_woken_by_the_release(
    postgres: PostgreSQLServer, name: str, scheme: str
) -> None:
    """The first wait joins the line: the waiter is counted, and a release hands it the
    lock long before the holder's TTL would."""
    url = url_of(postgres, scheme)

    async def main() -> None:
        async with fencelock.aconnect(url) as holder, fencelock.aconnect(url) as other:
            lease = await holder.lock(name, ttl=TTL).acquire(timeout=5)
            waiting = asyncio.ensure_future(other.lock(name, ttl=TTL).acquire(timeout=20))
            for _ in range(200):
                info = await holder.inspect(name)
                if info is not None and info.waiters == 1:
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the waiter never showed in line")
            released = asyncio.get_running_loop().time()
            await lease.release()
            taken = await asyncio.wait_for(waiting, 10)
            assert asyncio.get_running_loop().time() - released < 5  # not the TTL's 30 s
            assert taken.token > lease.token
            await taken.release()

    asyncio.run(main())


@pytest.mark.parametrize("scheme", ["postgresql", "postgresql+advisory"])
def test_a_release_before_the_waiter_listens_is_not_missed(
    postgres: PostgreSQLServer, name: str, scheme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The waiter's first look was made before its client listened; the holder releases
    just before it does (its notice unheard). Its first wait sees the lease free and it
    takes it at once, not at its next refresh (made 30 s here)."""
    from fencelock.backends.postgresql.listener import Listener
    from fencelock.engine import barging

    monkeypatch.setattr(barging, "WAITER_REFRESH", 30.0)
    url = url_of(postgres, scheme)

    async def main() -> None:
        async with fencelock.aconnect(url) as holder, fencelock.aconnect(url) as other:
            lease = await holder.lock(name, ttl=TTL).acquire(timeout=5)
            subscribe = Listener.subscribe

            async def released_first(self: Listener, lock: str, waiter: str) -> asyncio.Event:
                if not lease.released:
                    await lease.release()
                return await subscribe(self, lock, waiter)

            monkeypatch.setattr(Listener, "subscribe", released_first)
            loop = asyncio.get_running_loop()
            started = loop.time()
            taken = await other.lock(name, ttl=TTL).acquire(timeout=20)
            assert loop.time() - started < 5, "the waiter waited for its refresh"
            assert taken.token > lease.token
            await taken.release()

    asyncio.run(main())
