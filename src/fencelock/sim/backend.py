"""A client's view of a model server: the backend protocol over the simulated network.

Each operation is one request; a request whose reply is lost times out as a real one
would (``BackendUnavailable`` after the request bound), though the server may have
applied it. Waiting is a sleep until the flow's next try (the model announces no
release), which the acquire flow bounds by the holder's remaining TTL and its backoff.
"""

from __future__ import annotations

import asyncio
import builtins
import math
import random
from collections.abc import Callable
from typing import TypeVar

from fencelock import clock
from fencelock.backends.base import Capabilities, LockInfo
from fencelock.engine import redlock as plan
from fencelock.engine.outcomes import Acquired, AttemptResult, Busy, RenewedAsOf
from fencelock.engine.session import SharedSession
from fencelock.errors import BackendUnavailable, ConfigError, LeaseLost
from fencelock.sim.model import (
    GrantReply,
    LeaseStore,
    RedlockNode,
    RedlockNodes,
    SessionStore,
    Taken,
)
from fencelock.sim.network import Network

T = TypeVar("T")

REQUEST_BOUND = 0.25  # how long a client waits for a reply (a real URL's request_bound)


class SimBackend:
    """Client ``client``'s connection to ``store`` over ``network``."""

    capabilities = Capabilities()
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

        def apply() -> GrantReply | float:
            taken = backend.store.acquire(self._name, self._owner, self._ttl, backend._now())
            return taken if isinstance(taken, GrantReply) else taken.remaining

        outcome = await backend.network.call(
            backend.client, apply, REQUEST_BOUND, f"acquire {self._name}"
        )
        if isinstance(outcome, GrantReply):
            return Acquired(outcome.token)
        return Busy(retry_after=outcome)

    async def wait(self, timeout: float) -> None:
        await asyncio.sleep(timeout)

    async def close(self) -> None:
        pass


class SimSessionBackend:
    """Client ``client``'s connection to a session-family ``store``: one session, opened
    on first use and again after it ended; every lock held in it reports its end (the
    server's push, or the answer to the next request) through one :class:`SharedSession`."""

    capabilities = Capabilities()
    request_bound = REQUEST_BOUND

    def __init__(self, store: SessionStore, network: Network, client: int, timeout: float) -> None:
        self.store, self.network, self.client, self.timeout = store, network, client, timeout
        self.url = f"sim://session-store/client-{client}"
        self._session: tuple[int, SharedSession] | None = None
        self._opening = asyncio.Lock()  # one session at a time, as a real client's

    def outlives_client(self, renewed: bool) -> bool:
        return False  # a lock ends with its session

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    async def open(self) -> None:
        await self.session()

    async def session(self) -> tuple[int, SharedSession]:
        """The session in use, opened if there is none: by one task at a time (two tasks
        opening at once made two, a lock taken in one and the other pinged)."""
        async with self._opening:
            return await self._open_once()

    async def _open_once(self) -> tuple[int, SharedSession]:
        if self._session is None or self._session[1].ended_because is not None:
            number = await self.network.call(
                self.client,
                lambda: self.store.open_session(self.timeout, self._now()),
                REQUEST_BOUND,
                "open a session",
            )
            news = SharedSession(f"simulated session {number}")
            self.store.clients[number] = self
            self._session = (number, news)
        return self._session

    @property
    def current(self) -> int | None:
        """The session in use, if any."""
        return None if self._session is None else self._session[0]

    def ended(self, number: int, why: str) -> None:
        """Session ``number`` ended (the server said so)."""
        if self._session is not None and self._session[0] == number:
            self._session[1].end(f"simulated session {number} {why}")

    def attempt(
        self, name: str, owner: str, ttl: float, fair: bool = False, renewed: bool = True
    ) -> SimSessionAttempt:
        return SimSessionAttempt(self, name, owner)

    async def release(self, name: str, owner: str) -> bool:
        if self._session is None:
            return False
        number = self._session[0]

        def apply() -> bool:
            return self.store.release(name, owner, number, self._now())

        return await self.network.call(self.client, apply, REQUEST_BOUND, f"release {name}")

    async def renew(self, name: str, owner: str, ttl: float) -> bool | RenewedAsOf:
        if ttl > self.timeout:
            raise ConfigError(f"a session of {self.timeout}s cannot carry a {ttl}s lease")
        if self._session is None:
            return False
        number = self._session[0]
        sent = self._now()

        def apply() -> bool:
            alive = self.store.ping(number, self._now())
            held = self.store.locks.get(name)
            mine = held is not None and held.owner == owner and held.session == number
            return alive and mine  # a lock in another session is not kept by this ping

        if not await self.network.call(self.client, apply, REQUEST_BOUND, f"ping for {name}"):
            if number not in self.store.sessions:
                self.ended(number, "expired")
            return False
        return RenewedAsOf(sent)

    async def inspect(self, name: str) -> LockInfo | None:
        def apply() -> LockInfo | None:
            held = self.store.holder(name, self._now())
            if held is None:
                return None if self.store.counter == 0 else LockInfo(name, None, 0, None)
            return LockInfo(name, held.owner, held.token, None)

        return await self.network.call(self.client, apply, REQUEST_BOUND, f"inspect {name}")

    async def list(self, prefix: str) -> builtins.list[LockInfo]:
        infos = [await self.inspect(name) for name in sorted(self.store.locks)]
        return [info for info in infos if info is not None and info.name.startswith(prefix)]

    async def waiters(self, name: str) -> builtins.list[str] | None:
        return None

    async def close(self) -> None:
        pass


class SimSessionAttempt:
    def __init__(self, backend: SimSessionBackend, name: str, owner: str) -> None:
        self._backend, self._name, self._owner = backend, name, owner

    async def try_acquire(self) -> AttemptResult:
        backend = self._backend
        number, news = await backend.session()

        def apply() -> GrantReply | float | None:
            taken = backend.store.acquire(self._name, self._owner, number, backend._now())
            return taken.remaining if isinstance(taken, Taken) else taken

        outcome = await backend.network.call(
            backend.client, apply, REQUEST_BOUND, f"acquire {self._name}"
        )
        if outcome is None:  # the session had ended: a new one at the next try
            backend.ended(number, "expired")
            return Busy(retry_after=0.0)
        if isinstance(outcome, GrantReply):
            return Acquired(outcome.token, session=news)
        return Busy(retry_after=max(outcome, 0.0))

    async def wait(self, timeout: float) -> None:
        await asyncio.sleep(timeout)

    async def close(self) -> None:
        pass


NODE_TIMEOUT = 0.1  # how long a Redlock client waits for one node (the URL's timeout)


class SimRedlockBackend:
    """Client ``client``'s Redlock over N model nodes, each request to each node over
    the network: the decisions are the real ones (:mod:`fencelock.engine.redlock`)."""

    capabilities = Capabilities()
    request_bound = REQUEST_BOUND

    def __init__(self, nodes: RedlockNodes, network: Network, client: int) -> None:
        self.nodes, self.network, self.client = nodes, network, client
        self.url = f"sim://redlock/client-{client}"
        self._trusted: dict[str, float] = {}
        self._undoing: set[asyncio.Future[list[bool | plan.NodeError]]] = set()

    def outlives_client(self, renewed: bool) -> bool:
        return True

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    async def open(self) -> None:
        pass

    async def _each(
        self, ask: Callable[[RedlockNode], T], what: str, timeout: float = NODE_TIMEOUT
    ) -> list[T | plan.NodeError]:
        async def one(node: RedlockNode) -> T | plan.NodeError:
            link = (self.client, id(node))  # one connection per node, as the real links
            try:
                return await self.network.call(self.client, lambda: ask(node), timeout, what, link)
            except BackendUnavailable as exc:
                return plan.NodeError(str(exc))

        return list(await asyncio.gather(*(one(node) for node in self.nodes.nodes)))

    def attempt(
        self, name: str, owner: str, ttl: float, fair: bool = False, renewed: bool = True
    ) -> SimRedlockAttempt:
        return SimRedlockAttempt(self, name, owner, ttl)

    async def take(self, name: str, owner: str, ttl: float) -> AttemptResult:
        started = clock.now()
        raw = await self._each(
            lambda node: node.phase_one(name, owner, ttl, self._now()), f"phase 1 {name}"
        )
        firsts: list[plan.PhaseOneResult] = [
            r
            if isinstance(r, plan.NodeError)
            else plan.NodeWon(r)
            if isinstance(r, int)
            else plan.NodeBusy(r[0], r[1])
            for r in raw
        ]
        step = plan.decide_phase_one(firsts, ttl, started, clock.now())
        if isinstance(step, plan.Abort):
            return self._abort(name, owner, step, firsts)
        seconds = await self._each(
            lambda node: node.phase_two(name, owner, step.token, self._now()), f"phase 2 {name}"
        )
        done = plan.decide_phase_two(step, dict(enumerate(seconds)), clock.now())
        if isinstance(done, plan.Abort):
            return self._abort(name, owner, done, firsts)
        self._trusted[owner] = done.trusted_until
        return Acquired(done.token, owner)

    def _abort(
        self, name: str, owner: str, abort: plan.Abort, firsts: list[plan.PhaseOneResult]
    ) -> AttemptResult:
        undo = asyncio.ensure_future(
            self._each(lambda node: node.release(name, owner, self._now()), "undo")
        )
        self._undoing.add(undo)
        undo.add_done_callback(self._undoing.discard)
        failed = sum(isinstance(r, plan.NodeError) for r in firsts)
        if failed > len(self.nodes.nodes) - self.nodes.quorum:
            raise BackendUnavailable(f"redlock: {failed} nodes unavailable")
        return plan.busy_result(abort, random.random)

    async def release(self, name: str, owner: str) -> bool:
        self._trusted.pop(owner, None)
        replies = await self._each(
            lambda node: node.release(name, owner, self._now()), f"release {name}"
        )
        released = plan.decide_release(replies)
        if released is None:
            raise BackendUnavailable(f"redlock: release of {name!r} not confirmed")
        return released

    async def renew(self, name: str, owner: str, ttl: float) -> bool:
        started = clock.now()
        replies = await self._each(
            lambda node: node.renew(name, owner, ttl, self._now()), f"renew {name}"
        )
        until = self._trusted.get(owner, math.inf)
        bound = plan.decide_extend(replies, ttl=ttl, started=started, now=clock.now(), until=until)
        if bound is not None:
            self._trusted[owner] = bound
            return True
        why = plan.why_not_extended(replies)
        if why is plan.NotExtended.LOST:
            self._trusted.pop(owner, None)
            return False
        if why is plan.NotExtended.TOO_SLOW:
            raise LeaseLost(f"redlock: lease on {name!r} not extended: {why.value}")
        raise BackendUnavailable(f"redlock: cannot tell whether {name!r} was extended")

    async def inspect(self, name: str) -> LockInfo | None:
        replies = await self._each(lambda node: node.peek(name, self._now()), f"inspect {name}")
        answers = [r for r in replies if not isinstance(r, plan.NodeError)]
        if len(answers) < self.nodes.quorum:
            raise BackendUnavailable(f"redlock: too few nodes answered an inspect of {name!r}")
        view = plan.quorum_view(name, answers, self.nodes.quorum, len(self.nodes.nodes))
        return None if view is None else LockInfo(name, *view)

    async def list(self, prefix: str) -> builtins.list[LockInfo]:
        scans = await self._each(lambda node: node.names_under(prefix), f"scan {prefix}")
        known = [scan for scan in scans if not isinstance(scan, plan.NodeError)]
        if len(known) < self.nodes.quorum:
            raise BackendUnavailable(f"redlock: too few nodes answered a scan of {prefix!r}")
        infos = [await self.inspect(name) for name in sorted(set().union(*known))]
        return [info for info in infos if info is not None and info.held]

    async def waiters(self, name: str) -> builtins.list[str] | None:
        return None

    async def close(self) -> None:
        pass


class SimRedlockAttempt:
    """As the real one: every try stores a fresh owner value, so a late undo of an
    abandoned try never touches a later one (fresh, but from the seed: a suffix)."""

    def __init__(self, backend: SimRedlockBackend, name: str, owner: str, ttl: float) -> None:
        self._backend, self._name, self._owner, self._ttl = backend, name, owner, ttl
        self._tries = 0

    async def try_acquire(self) -> AttemptResult:
        self._tries += 1
        owner = self._owner if self._tries == 1 else f"{self._owner}.{self._tries}"
        return await self._backend.take(self._name, owner, self._ttl)

    async def wait(self, timeout: float) -> None:
        await asyncio.sleep(timeout)

    async def close(self) -> None:
        pass
