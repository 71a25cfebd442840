"""One client holding many leases renews them together where its backend can (one
request a round, not one a lease), keeps every one, and loses none to the batching;
elsewhere one by one, as before. Both colours."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

import pytest

import fencelock
from fencelock.backends.base import Renewal
from tests.contract.conftest import BackendCase

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
    if getattr(backend, "renews_in_batches", False):
        monkeypatch.setattr(backend, "renew_many", count.many(backend.renew_many))
    return count


def check(count: Count, batching: bool) -> None:
    assert count.renewed >= LEASES * 2, "every lease was renewed, rounds after rounds"
    if batching:
        assert count.batches > 0 and count.requests * 4 <= count.renewed, vars(count)
    else:
        assert count.batches == 0 and count.requests == count.renewed


def test_many_leases_are_renewed_together_and_all_kept(
    backend: BackendCase, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fencelock.connect(backend.url) as client:
        count = spy(client._backend, monkeypatch)
        leases = [client.lock(f"{name}-{i}", ttl=TTL).acquire() for i in range(LEASES)]
        time.sleep(HELD_FOR)
        assert not [lease for lease in leases if lease.lost]
        for lease in leases:
            lease.release()
    check(count, getattr(client._backend, "renews_in_batches", False))


def test_async_many_leases_are_renewed_together_and_all_kept(
    backend: BackendCase, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        async with fencelock.aconnect(backend.url) as client:
            count = spy(client._backend, monkeypatch)
            leases = [await client.lock(f"{name}-{i}", ttl=TTL).acquire() for i in range(LEASES)]
            await asyncio.sleep(HELD_FOR)
            assert not [lease for lease in leases if lease.lost]
            for lease in leases:
                await lease.release()
        check(count, getattr(client._backend, "renews_in_batches", False))

    asyncio.run(main())
