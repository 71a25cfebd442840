"""extend() racing the background renewal never leaves the client trusting a lease
longer than the server keeps it (issue: two live leases after a slow renewal).

A wrapper around the real backend delays one renew request (a slow network or a
descheduled thread) while the other is made; the invariant is checked against what
the server itself reports. The waits inside the wrapper are bounded, so the test
also finishes when the requests are serialised (they cannot overlap then).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import pytest

import fencelock
from fencelock.client_internals import ClientInternals
from tests.contract.conftest import BackendCase

pytestmark = pytest.mark.slow  # seconds of waiting on every backend

# The client may believe a little less than the server keeps, never more.
SLACK = 0.05


class _Requests:
    """Numbers the renew requests; lets the first one wait for the second."""

    def __init__(self) -> None:
        self.count = 0
        self.first_paused = threading.Event()
        self.second_done = threading.Event()
        self.first_done = threading.Event()
        self.mutex = threading.Lock()

    def number(self) -> int:
        with self.mutex:
            self.count += 1
            return self.count


class SlowFirstRenewal:
    """The first renew request waits (up to ``hold``) for the second before it is sent."""

    def __init__(self, backend: Any, hold: float) -> None:
        self._backend, self._hold, self.requests = backend, hold, _Requests()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    def renew(self, name: str, owner: str, ttl: float) -> bool:
        n = self.requests.number()
        if n == 1:
            self.requests.first_paused.set()
            self.requests.second_done.wait(self._hold)
        granted: bool = self._backend.renew(name, owner, ttl)
        (self.requests.first_done if n == 1 else self.requests.second_done).set()
        return granted


class LateFirstReply:
    """The first renew request reaches the server, but its reply waits (up to ``hold``)
    for the second request to finish."""

    def __init__(self, backend: Any, hold: float) -> None:
        self._backend, self._hold, self.requests = backend, hold, _Requests()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    def renew(self, name: str, owner: str, ttl: float) -> bool:
        n = self.requests.number()
        granted: bool = self._backend.renew(name, owner, ttl)
        if n == 1:
            self.requests.second_done.wait(self._hold)
            self.requests.first_done.set()
        else:
            self.requests.second_done.set()
        return granted


class AsyncSlowFirstRenewal:
    def __init__(self, backend: Any, hold: float) -> None:
        self._backend, self._hold = backend, hold
        self.count = 0
        self.first_paused = asyncio.Event()
        self.second_done = asyncio.Event()
        self.first_done = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    async def renew(self, name: str, owner: str, ttl: float) -> bool:
        self.count += 1
        n = self.count
        if n == 1:
            self.first_paused.set()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.second_done.wait(), self._hold)
        granted: bool = await self._backend.renew(name, owner, ttl)
        (self.first_done if n == 1 else self.second_done).set()
        return granted


def server_remaining(backend: BackendCase, name: str, client: fencelock.Client) -> float:
    info = client.inspect(name)
    assert info is not None
    assert info.remaining is not None
    return info.remaining


def assert_trust_within_grant(
    lease: fencelock.Lease | fencelock.AsyncLease, server: float, what: str
) -> None:
    believed = lease.remaining()
    assert believed <= server + SLACK, (
        f"{what}: the client trusts the lease {believed:.2f}s, the server keeps it {server:.2f}s"
    )


def test_a_slow_renewal_landing_after_extend(
    backend: BackendCase, client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    """The renewer's ttl=4.5 request is sent late; meanwhile the caller extends to 30 s."""
    slow = SlowFirstRenewal(client.internals.backend, hold=1.0)
    # in front of every lock's backend
    client.internals = ClientInternals(slow, client.internals.holdings)
    lease = client.lock(name, ttl=4.5).acquire()
    assert slow.requests.first_paused.wait(10), "the renewer never renewed"
    lease.extend(30)
    assert slow.requests.first_done.wait(10)
    assert_trust_within_grant(lease, server_remaining(backend, name, other), "slow renewal")
    assert lease.remaining() > 20  # the extend, serialised after the renewal, stands
    lease.release()


def test_an_extend_whose_reply_comes_late(
    backend: BackendCase, client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    """extend(30) reaches the server first, its reply late; the renewer renews meanwhile."""
    late = LateFirstReply(client.internals.backend, hold=3.0)
    # in front of every lock's backend
    client.internals = ClientInternals(late, client.internals.holdings)
    lease = client.lock(name, ttl=6).acquire()
    lease.extend(30)
    assert late.requests.second_done.wait(10), "the renewer never renewed"
    assert_trust_within_grant(lease, server_remaining(backend, name, other), "late extend reply")
    assert not lease.lost
    lease.release()


def test_async_a_slow_renewal_landing_after_extend(
    backend: BackendCase, other: fencelock.Client, name: str
) -> None:
    async def main() -> None:
        async with fencelock.aconnect(backend.url) as client:
            slow = AsyncSlowFirstRenewal(client.internals.backend, hold=1.0)
            # in front of every lock's backend
            client.internals = ClientInternals(slow, client.internals.holdings)
            lease = await client.lock(name, ttl=4.5).acquire()
            await asyncio.wait_for(slow.first_paused.wait(), 10)
            await lease.extend(30)
            await asyncio.wait_for(slow.first_done.wait(), 10)
            server = await asyncio.to_thread(server_remaining, backend, name, other)
            assert_trust_within_grant(lease, server, "async slow renewal")
            assert lease.remaining() > 20
            await lease.release()

    asyncio.run(main())


def test_a_cancelled_extend_still_bounds_trust(
    backend: BackendCase, other: fencelock.Client, name: str
) -> None:
    """extend(1) whose caller gives up is still sent and settled: trust follows it."""

    async def main() -> None:
        async with fencelock.aconnect(backend.url) as client:
            slow = AsyncSlowFirstRenewal(client.internals.backend, hold=0.5)
            # in front of every lock's backend
            client.internals = ClientInternals(slow, client.internals.holdings)
            lease = await client.lock(name, ttl=30).acquire()
            extending = asyncio.ensure_future(lease.extend(1))
            await asyncio.wait_for(slow.first_paused.wait(), 10)
            extending.cancel()
            await asyncio.wait_for(slow.first_done.wait(), 10)
            server = await asyncio.to_thread(server_remaining, backend, name, other)
            assert_trust_within_grant(lease, server, "cancelled extend")
            assert lease.remaining() < 1.5

    asyncio.run(main())


def test_a_release_while_a_renewal_is_in_flight(
    backend: BackendCase, client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    """The late renewal finds the lease gone: the release stands, nobody is told of a loss."""
    slow = SlowFirstRenewal(client.internals.backend, hold=0.5)
    # in front of every lock's backend
    client.internals = ClientInternals(slow, client.internals.holdings)
    lease = client.lock(name, ttl=3).acquire()
    lost: list[str] = []
    lease.on_lost(lambda _lease: lost.append("lost"))
    assert slow.requests.first_paused.wait(10), "the renewer never renewed"
    lease.release()
    assert slow.requests.first_done.wait(10)
    assert lease.released
    assert not lost
    assert other.lock(name).try_acquire() is not None
