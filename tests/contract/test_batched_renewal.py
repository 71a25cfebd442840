"""One client holding many leases renews them together where its backend can (one
request a round, not one a lease), keeps every one, and loses none to the batching;
elsewhere one by one, as before. Both variants."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import fencelock
from fencelock import clock
from fencelock.backends.base import Renewal
from tests.contract.conftest import BackendCase

pytestmark = pytest.mark.slow  # seconds of waiting on every backend

LEASES = 30
TTL = 3.0  # renewed every ~1 s
HELD_FOR = 4.0  # about four rounds


class Count:
    """How many requests renewed how many leases (a spy on the client's real backend; a
    batch that renews each lease through the backend's own ``renew`` is one request)."""

    def __init__(self) -> None:
        self.requests = self.batches = self.renewed = 0
        self.in_batch = False

    def one(self, renew: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any) -> Any:
            if not self.in_batch:
                self.requests += 1
                self.renewed += 1
            return renew(*args)

        return counted

    def many(self, renew_many: Callable[[list[Renewal]], Any]) -> Callable[..., Any]:
        def counted(renewals: list[Renewal]) -> Any:
            self.requests += 1
            self.batches += 1
            self.renewed += len(renewals)
            self.in_batch = True
            try:
                outcome = renew_many(renewals)
            finally:
                self.in_batch = False
            return outcome

        async def acounted(renewals: list[Renewal]) -> Any:
            self.requests += 1
            self.batches += 1
            self.renewed += len(renewals)
            self.in_batch = True  # the batch's own renewals start before its first await
            try:
                return await renew_many(renewals)
            finally:
                self.in_batch = False

        return acounted if inspect.iscoroutinefunction(renew_many) else counted


def spy(backend: Any, monkeypatch: pytest.MonkeyPatch) -> Count:
    count = Count()
    monkeypatch.setattr(backend, "renew", count.one(backend.renew))
    if backend.capabilities.renews_in_batches:
        monkeypatch.setattr(backend, "renew_many", count.many(backend.renew_many))
    return count


def check(count: Count, batching: bool) -> None:
    assert count.renewed >= LEASES * 2, "every lease was renewed, rounds after rounds"
    if batching:
        assert count.batches > 0, vars(count)
        assert count.requests * 4 <= count.renewed, vars(count)
    else:
        assert count.batches == 0
        assert count.requests == count.renewed


def test_many_leases_are_renewed_together_and_all_kept(
    backend: BackendCase, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fencelock.connect(backend.url) as client:
        count = spy(client.internals.backend, monkeypatch)
        leases = [client.lock(f"{name}-{i}", ttl=TTL).acquire() for i in range(LEASES)]
        time.sleep(HELD_FOR)
        assert not [lease for lease in leases if lease.lost]
        for lease in leases:
            lease.release()
    check(count, client.internals.backend.capabilities.renews_in_batches)


def test_async_many_leases_are_renewed_together_and_all_kept(
    backend: BackendCase, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        async with fencelock.aconnect(backend.url) as client:
            count = spy(client.internals.backend, monkeypatch)
            leases = [await client.lock(f"{name}-{i}", ttl=TTL).acquire() for i in range(LEASES)]
            await asyncio.sleep(HELD_FOR)
            assert not [lease for lease in leases if lease.lost]
            for lease in leases:
                await lease.release()
        check(count, client.internals.backend.capabilities.renews_in_batches)

    asyncio.run(main())


def test_batches_meet_extends_and_releases_and_trust_stays_within_the_grant(
    backend: BackendCase, name: str
) -> None:
    """While the renewer renews leases together, another thread extends some of them and
    releases and takes again others: no lease is lost, a released one is not renewed
    back to life, and no lease is trusted longer than the server keeps it."""
    with fencelock.connect(backend.url) as client:
        leases = [client.lock(f"{name}-{i}", ttl=TTL).acquire() for i in range(LEASES)]
        stop = threading.Event()
        errors: list[BaseException] = []

        def meddle() -> None:
            try:
                while not stop.is_set():
                    for i in range(0, LEASES, 3):
                        leases[i].extend(TTL)
                    i = LEASES - 1
                    leases[i].release()
                    leases[i] = client.lock(f"{name}-{i}", ttl=TTL).acquire()
                    time.sleep(0.05)
            except BaseException as exc:  # the test fails on it, below
                errors.append(exc)

        meddler = threading.Thread(target=meddle)
        meddler.start()
        time.sleep(HELD_FOR)
        stop.set()
        meddler.join(30)
        assert not errors
        assert not [lease for lease in leases if lease.lost]
        for lease in leases:
            started = clock.now()
            trusted = lease.remaining()
            info = client.inspect(lease.name)
            assert info is not None
            assert info.owner == lease.owner
            if info.remaining is not None:  # the server's own count, read after ours
                whole = 1.0 if backend.url.startswith("etcd") else 0.05  # etcd: whole seconds
                assert trusted - (clock.now() - started) <= info.remaining + whole
            lease.release()
