"""A client's view of a model server: the backend protocol over the simulated network.

Each operation is one request; a request whose reply is lost times out as a real one
would (``BackendUnavailable`` after the request bound), though the server may have
applied it. Waiting is a sleep until the flow's next try (the model announces no
release), which the acquire flow bounds by the holder's remaining TTL and its backoff.
"""

from __future__ import annotations

import asyncio
import builtins

from fencelock.backends.base import LockInfo
from fencelock.engine.outcomes import Acquired, AttemptResult, Busy, RenewedAsOf
from fencelock.sim.model import Granted, LeaseStore
from fencelock.sim.network import Network

REQUEST_BOUND = 0.25  # how long a client waits for a reply (a real URL's request_bound)


class SimBackend:
    """Client ``client``'s connection to ``store`` over ``network``."""

    supports_fair = False
    request_bound = REQUEST_BOUND

    def __init__(self, store: LeaseStore, network: Network, client: int) -> None:
        self.store, self.network, self.client = store, network, client
        self.url = f"sim://lease-store/client-{client}"

    def outlives_client(self, renewed: bool) -> bool:
        return True  # a TTL lease stays on the server until its TTL ends

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    async def open(self) -> None:
        await self.network.call(self.client, lambda: None, REQUEST_BOUND, "open")

    def attempt(
        self, name: str, owner: str, ttl: float, fair: bool = False, renewed: bool = True
    ) -> SimAttempt:
        return SimAttempt(self, name, owner, ttl)

    async def release(self, name: str, owner: str) -> bool:
        def apply() -> bool:
            return self.store.release(name, owner, self._now())

        return await self.network.call(self.client, apply, REQUEST_BOUND, f"release {name}")

    async def renew(self, name: str, owner: str, ttl: float) -> bool | RenewedAsOf:
        def apply() -> bool:
            return self.store.renew(name, owner, ttl, self._now())

        return await self.network.call(self.client, apply, REQUEST_BOUND, f"renew {name}")

    async def inspect(self, name: str) -> LockInfo | None:
        def apply() -> LockInfo | None:
            now = self._now()
            held = self.store.holder(name, now)
            token = self.store.counters.get(name)
            if token is None:
                return None
            if held is None:
                return LockInfo(name, None, token, None)
            return LockInfo(name, held.owner, held.token, held.expires - self.store.clock(now))

        return await self.network.call(self.client, apply, REQUEST_BOUND, f"inspect {name}")

    async def list(self, prefix: str) -> builtins.list[LockInfo]:
        infos = []
        for name in sorted(self.store.records):
            if name.startswith(prefix):
                info = await self.inspect(name)
                if info is not None and info.held:
                    infos.append(info)
        return infos

    async def waiters(self, name: str) -> builtins.list[str] | None:
        return None

    async def close(self) -> None:
        pass


class SimAttempt:
    def __init__(self, backend: SimBackend, name: str, owner: str, ttl: float) -> None:
        self._backend, self._name, self._owner, self._ttl = backend, name, owner, ttl

    async def try_acquire(self) -> AttemptResult:
        backend = self._backend

        def apply() -> Granted | float:
            taken = backend.store.acquire(self._name, self._owner, self._ttl, backend._now())
            return taken if isinstance(taken, Granted) else taken.remaining

        outcome = await backend.network.call(
            backend.client, apply, REQUEST_BOUND, f"acquire {self._name}"
        )
        if isinstance(outcome, Granted):
            return Acquired(outcome.token)
        return Busy(retry_after=outcome)

    async def wait(self, timeout: float) -> None:
        await asyncio.sleep(timeout)

    async def close(self) -> None:
        pass
