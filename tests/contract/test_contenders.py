"""Who holds and who waits, on every backend (kazoo's ``Lock.contenders()``,
``Semaphore.lease_holders()``, ``Election.contenders()``): ``lock.contenders()`` lists
the holder, then the waiters in line order; ``semaphore.holders()`` each permit held;
``election.candidates()`` the leader, then the campaigners. A backend that keeps no line
of waiters (``waiters()`` is None: MySQL, Redlock) lists the holder alone.

Contenders are told apart by their label (:func:`fencelock.holder.set_label`), which a
contender's owner value records when it starts to acquire: each waiter is started once
the one before it shows in the line, so the order is known without sleeping.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import fencelock
from fencelock import holder
from fencelock.holder import Holder, contender_of, holder_of
from tests.contract.conftest import BackendCase
from tests.polling import await_until, wait_until

PATIENCE = 60  # a waiter's own timeout: it gets the lock long before


@pytest.fixture
def label() -> Iterator[Callable[[str], None]]:
    """Sets this process's holder label; the one it started with comes back after."""
    yield holder.set_label
    holder.set_label(os.environ.get("FENCELOCK_LABEL"))


def commands(contenders: list[Holder]) -> list[str]:
    return [each.command for each in contenders]


def keeps_a_line(client: fencelock.Client, name: str) -> bool:
    return client.internals.backend.waiters(name) is not None


def seen(look: Callable[[], list[Holder]], count: int) -> list[str]:
    """What ``look`` lists once it lists ``count`` contenders (fails after a while)."""

    def enough() -> list[Holder]:
        listed = look()
        return listed if len(listed) >= count else []

    listed = wait_until(
        enough,
        what=lambda: f"{count} contenders: {commands(look())}",
        timeout=PATIENCE / 2,
        interval=0.01,
    )
    return commands(listed)


def in_thread(work: Callable[[], Any], done: list[Any]) -> threading.Thread:
    thread = threading.Thread(target=lambda: done.append(work()))
    thread.start()
    return thread


def test_the_holder_then_the_waiters_in_line(
    backend: BackendCase,
    client: fencelock.Client,
    other: fencelock.Client,
    name: str,
    label: Callable[[str], None],
) -> None:
    fair, lined = client.internals.backend.capabilities.fair, keeps_a_line(client, name)
    assert client.lock(name).contenders() == []
    label("holder")
    held = client.lock(name, fair=fair).acquire()
    (me,) = client.lock(name).contenders()
    assert me == holder_of(held.owner)
    assert (me.command, me.pid) == ("holder", os.getpid())
    granted: list[str] = []

    def take(lock: fencelock.Lock) -> None:
        lease = lock.acquire(timeout=PATIENCE)
        granted.append(contender_of(lease.owner).command)
        lease.release()

    with fencelock.connect(backend.url) as third:
        threads = []
        for who, waiter in (("first", other), ("second", third)):
            label(who)
            lock = waiter.lock(name, fair=fair)
            threads.append(in_thread(functools.partial(take, lock), []))
            if lined:
                seen(client.lock(name).contenders, len(threads) + 1)
        listed = commands(client.lock(name).contenders())
        assert listed == (["holder", "first", "second"] if lined else ["holder"])
        held.release()
        for thread in threads:
            thread.join(PATIENCE)
    # each with the label it asked with, fair: in line order (without a line to wait
    # for, a waiter may start to ask only once the next label is set)
    assert len(granted) == 2
    assert granted == ["first", "second"] or not lined
    assert client.lock(name).contenders() == []


def test_each_permit_held(
    client: fencelock.Client, other: fencelock.Client, name: str, label: Callable[[str], None]
) -> None:
    sem = client.semaphore(name, permits=3)
    assert sem.holders() == []
    label("a")
    first = sem.acquire(timeout=10)
    label("b")
    second = other.semaphore(name, permits=3).acquire(timeout=10)
    holders = sem.holders()
    assert sorted(h.holder.command for h in holders if h.holder) == ["a", "b"]
    assert {h.token for h in holders} == {first.lease.token, second.lease.token}
    assert all(h.remaining is None or 0 < h.remaining <= 30 for h in holders)
    first.release()
    (left,) = other.semaphore(name, permits=3).holders()
    assert left.token == second.lease.token
    assert left.owner == second.lease.owner
    second.release()
    assert sem.holders() == []


def test_the_leader_then_the_campaigners(
    client: fencelock.Client, other: fencelock.Client, name: str, label: Callable[[str], None]
) -> None:
    election, lined = client.election(name, ttl=10), keeps_a_line(client, name)
    assert election.candidates() == []
    label("leader")
    leading = election.campaign()
    label("campaigner")
    won: list[fencelock.Leadership] = []
    thread = in_thread(lambda: other.election(name, ttl=10).campaign(timeout=PATIENCE), won)
    if lined:
        assert seen(election.candidates, 2) == ["leader", "campaigner"]
    else:
        assert commands(election.candidates()) == ["leader"]
    leading.resign()
    thread.join(PATIENCE)
    assert won
    assert commands(election.candidates()) == ["campaigner"]
    won[0].resign()


def test_the_asyncio_faces(backend: BackendCase, name: str, label: Callable[[str], None]) -> None:
    async def main() -> None:
        async with (
            fencelock.aconnect(backend.url) as first,
            fencelock.aconnect(backend.url) as second,
        ):
            lined = await first.internals.backend.waiters(name) is not None
            label("holder")
            held = await first.lock(name).acquire()
            label("waiter")
            waiting = asyncio.ensure_future(second.lock(name).acquire(timeout=PATIENCE))
            expected = ["holder", "waiter"] if lined else ["holder"]
            listed: list[str] = []

            async def listed_as_expected() -> bool:
                listed[:] = commands(await second.lock(name).contenders())
                return listed == expected

            await await_until(
                listed_as_expected,
                what=lambda: f"{expected} listed, not {listed}",
                timeout=PATIENCE / 2,
                interval=0.01,
            )
            assert commands(await first.election(name).candidates()) == expected
            await held.release()
            await (await waiting).release()
            label("permit")
            permit = await first.semaphore(name, permits=2).acquire(timeout=10)
            (only,) = await second.semaphore(name, permits=2).holders()
            assert only.token == permit.lease.token
            assert only.holder is not None
            assert only.holder.command == "permit"
            await permit.release()

    asyncio.run(main())
