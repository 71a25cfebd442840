"""One simulated run: real asyncio clients (``AsyncClient``, its leases, renewer and
acquire flow) against a model server over a faulty network, in virtual time, with the
invariants checked after every turn of the loop. Everything is decided by the seed."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NoReturn

from fencelock import clock
from fencelock.client import AsyncClient
from fencelock.engine.reintroduced import KNOWN, reintroduced
from fencelock.engine.timing import validate_ttl
from fencelock.errors import ConfigError, FencelockError, LockTimeout
from fencelock.lease import AsyncLease
from fencelock.primitives import lock as lock_module
from fencelock.sim.backend import (
    REQUEST_BOUND,
    SimBackend,
    SimRedlockBackend,
    SimSessionBackend,
)
from fencelock.sim.loop import VirtualClock, VirtualLoop
from fencelock.sim.model import (
    LeaseStore,
    RedlockNode,
    RedlockNodes,
    SessionLock,
    SessionStore,
)
from fencelock.sim.network import Network, Weather

NAME = "orders/1"
POOL = "exports"  # the semaphore workload's
PERMITS = "exports.sem/p/"  # where its permits' leases are (engine/semaphore.py)
SEMAPHORE_PERMITS = 2
BELL = "exports.sem/bell"  # a waiter's wake-up: the semaphore ends it to ring it
# Slack past a lease's trusted time before its loss must have been reported: the renewer
# looks at it by then at the latest (a renewal in flight waits out its request bound).
LOSS_BOUND = 2 * REQUEST_BOUND
# Server clock rates a run draws from: within the documented drift (1 % of the TTL).
DRIFT = 0.0099
REDLOCK_NODES = 5
FAMILIES = ("lease", "session", "redlock")
WORKLOADS = ("lock", "semaphore")


class Violation(AssertionError):
    """An invariant failed; the message says which, when and who."""


@dataclass(frozen=True)
class Plan:
    """What a run does, all of it from ``seed``."""

    seed: int
    clients: int = 4
    duration: float = 30.0  # virtual seconds
    ttl: float = 1.0
    weather: Weather = field(default_factory=Weather)
    faults: bool = True
    bugs: tuple[str, ...] = ()  # historical bugs put back (fencelock.engine.reintroduced)
    family: str = "lease"  # the model: "lease" (TTL leases), "session" or "redlock"
    workload: str = "lock"  # or "semaphore": permits of a pool of two

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ConfigError(f"no model family {self.family!r} (one of {', '.join(FAMILIES)})")
        if self.workload not in WORKLOADS:
            raise ConfigError(f"no workload {self.workload!r} (one of {', '.join(WORKLOADS)})")
        if self.clients < 2:
            raise ConfigError(f"a run needs at least 2 clients to contend, not {self.clients}")
        validate_ttl(self.ttl)
        validate_ttl(self.duration, "duration")
        unknown = sorted(set(self.bugs) - set(KNOWN))
        if unknown:
            raise ConfigError(f"no such historical bug: {', '.join(unknown)}")


@dataclass
class Outcome:
    plan: Plan
    violation: str | None
    trace: list[str]
    steps: int
    virtual_seconds: float
    cpu_seconds: float
    grants: int
    lease_seconds: float
    digest: str

    @property
    def ok(self) -> bool:
        return self.violation is None


class World:
    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.rng = random.Random(plan.seed)
        self.clock = VirtualClock()
        self.loop = VirtualLoop(self.clock)
        rate = self.rng.uniform(1 - DRIFT, 1 + DRIFT) if plan.faults else 1.0
        self.store: LeaseStore | SessionStore | RedlockNodes
        if plan.family == "redlock":  # five nodes, each its own clock
            self.store = RedlockNodes(
                [
                    RedlockNode(self.rng.uniform(1 - DRIFT, 1 + DRIFT), self.clock.now)
                    for _ in range(REDLOCK_NODES)
                ]
            )
        elif plan.family == "session":
            self.store = SessionStore(rate=rate, started=self.clock.now)
        else:  # a holder's own try answered as Redis and SQLite do, or as PostgreSQL
            self.store = LeaseStore(rate, self.clock.now, regrant=self.rng.random() < 0.5)
        weather = plan.weather if plan.faults else Weather(slow=0.0, drop=0.0, duplicate=0.0)
        self.network = Network(random.Random(self.rng.random()), weather)
        self.network.log = self.say
        self.clients: list[AsyncClient] = []
        self.trace: deque[str] = deque(maxlen=60)
        self.whole = hashlib.blake2b(digest_size=8)
        self.victims: set[str] = set()  # owners whose lease a fault ended on the server
        self.workers: list[asyncio.Task[None]] = []
        self.acquired = 0
        self.tokens: dict[str, list[tuple[float, int]]] = {}  # per name: (granted, token)
        self.held_since: dict[AsyncLease, float] = {}
        self.lease_seconds = 0.0
        self.ended = False

    def say(self, text: str) -> None:
        line = f"{self.clock.now - 1000.0:10.4f}  {text}"
        self.trace.append(line)
        self.whole.update(line.encode())

    # --- the invariants, after every turn ------------------------------------------------

    def check(self) -> None:
        if self.ended:
            return
        trusting = self._trusting(self.clock.now)
        by_name: dict[str, list[tuple[int, AsyncLease]]] = {}
        for number, lease in trusting:
            by_name.setdefault(lease.name, []).append((number, lease))
        for name, holders in by_name.items():
            if len(holders) > 1:
                who = ", ".join(f"client {n} (token {lease.token})" for n, lease in holders)
                self._violated(f"two clients trust {name} at once: {who}")
        permits = [lease for _, lease in trusting if lease.name.startswith(PERMITS)]
        if len(permits) > SEMAPHORE_PERMITS:
            self._violated(f"{len(permits)} permits of {SEMAPHORE_PERMITS} trusted at once")
        for number, lease in trusting:
            granted_until = self.store.grant_until(lease.name, lease.owner, self.clock.now)
            if granted_until is None:
                self._violated(
                    f"client {number} trusts token {lease.token} the server no longer grants"
                )
            if lease.trusted_until > granted_until + 1e-9:
                self._violated(
                    f"client {number} trusts token {lease.token} until "
                    f"{lease.trusted_until - 1000:.4f}, past the server's grant "
                    f"(until {granted_until - 1000:.4f})"
                )

    def _trusting(self, now: float) -> list[tuple[int, AsyncLease]]:
        """The live leases trusted now (a lease a fault ended on the server aside), each
        checked to be reported lost in time once its trusted time is over."""
        trusting: list[tuple[int, AsyncLease]] = []
        for number, client in enumerate(self.clients):
            if number in self.network.dead:  # a killed process trusts nothing
                continue
            for lease in client.held():
                if lease.lost:
                    continue
                if now > lease.trusted_until + LOSS_BOUND:
                    self._violated(
                        f"client {number}'s lease (token {lease.token}) is past its trusted "
                        f"time by {now - lease.trusted_until:.3f}s and not reported lost"
                    )
                if lease.name == BELL:  # a wake-up, which others end on purpose
                    continue
                if lease.trusted_until > now and lease.owner not in self.victims:
                    trusting.append((number, lease))
        return trusting

    def _check_token(self, number: int, lease: AsyncLease, asked: float) -> None:
        """Tokens per name strictly increase: a lease asked for after another was
        granted (and known to be) has a greater token."""
        earlier = self.tokens.setdefault(lease.name, [])
        before = [token for granted, token in earlier if granted < asked]
        if before and lease.token <= max(before):
            self._violated(
                f"client {number} got token {lease.token} on {lease.name}, not above "
                f"{max(before)}, granted before it asked"
            )
        earlier.append((self.clock.now, lease.token))

    def _violated(self, what: str) -> NoReturn:
        self.say(f"VIOLATION: {what}")
        raise Violation(what)

    # --- the clients and the faults ------------------------------------------------------

    async def worker(self, number: int, client: AsyncClient, rng: random.Random) -> None:
        lock = client.lock(NAME, ttl=self.plan.ttl)
        pool = client.semaphore(POOL, permits=SEMAPHORE_PERMITS, ttl=self.plan.ttl)
        end = self.clock.now + self.plan.duration
        while self.clock.now < end:
            timeout, asked = rng.uniform(0.05, 4 * self.plan.ttl), self.clock.now
            try:
                if self.plan.workload == "semaphore":
                    lease = (await pool.acquire(timeout=timeout)).lease
                else:
                    lease = await lock.acquire(timeout=timeout)
            except LockTimeout:
                continue
            except FencelockError as exc:
                self.say(f"client {number}: acquire failed: {type(exc).__name__}")
                await asyncio.sleep(rng.uniform(0.01, 0.2))
                continue
            self.say(f"client {number}: acquired token {lease.token}")
            self._check_token(number, lease, asked)
            self.acquired += 1
            self.held_since[lease] = self.clock.now
            lease.on_lost(self._telling_loss(number))
            await self.hold(number, lease, rng)

    def _telling_loss(self, number: int) -> Callable[[AsyncLease], None]:
        def lost(lease: AsyncLease) -> None:
            self.say(f"client {number}: lost {lease.token}")

        return lost

    async def hold(self, number: int, lease: AsyncLease, rng: random.Random) -> None:
        with contextlib.suppress(FencelockError):
            held = rng.expovariate(1 / (0.8 * self.plan.ttl))
            if rng.random() < 0.4:  # at any moment of the hold, a renewal perhaps in flight
                before = rng.uniform(0.0, held)
                await asyncio.sleep(before)
                ttl = rng.uniform(0.5, 2.0) * self.plan.ttl
                await lease.extend(ttl)
                self.say(f"client {number}: extended {lease.token} to {ttl:.3f}s")
                held -= before
            await asyncio.sleep(held)
        with contextlib.suppress(FencelockError):
            await lease.release()
            self.say(f"client {number}: released {lease.token}")
        self.lease_seconds += self.clock.now - self.held_since.pop(lease, self.clock.now)

    async def nemesis(self, rng: random.Random) -> None:
        end = self.clock.now + self.plan.duration
        while self.clock.now < end:
            await asyncio.sleep(rng.expovariate(1.0))
            fault = rng.choice(("pause", "pause", "kill", "evict", "restart", "restart-empty"))
            if fault == "kill":
                self._kill(rng)
                continue
            if fault == "pause":
                victim, seconds = rng.randrange(self.plan.clients), rng.uniform(0.01, 3.0)
                self.network.pause(victim, self.clock.now, seconds)
                self.say(f"nemesis: client {victim} paused for {seconds:.3f}s")
                continue
            if fault == "evict":
                self._force_end()
            else:
                if fault == "restart-empty":  # every grant ends, answered yet or not
                    self.victims.update(self.store.owners())
                    for number in range(len(self.clients)):
                        if isinstance(self.store, SessionStore):
                            self._tell_session_end(number, "was lost with the server's data")
                keep = fault == "restart"
                if isinstance(self.store, RedlockNodes):  # one node of them
                    which = rng.randrange(REDLOCK_NODES)
                    self.store.restart(keep, self.clock.now, which)
                    fault = f"{fault} of node {which}"
                else:
                    self.store.restart(keep, self.clock.now)
            self.say(f"nemesis: {fault}")

    def _kill(self, rng: random.Random) -> None:
        """A client's process dies (nothing in or out, no release) and another starts."""
        alive = [n for n in range(len(self.clients)) if n not in self.network.dead]
        victim = rng.choice(alive)
        self.network.dead.add(victim)
        self.workers[victim].cancel()
        self.say(f"nemesis: client {victim} killed; client {len(self.clients)} starts")
        self._start(random.Random(rng.random()))

    def _start(self, rng: random.Random) -> None:
        number = len(self.clients)
        self.clients.append(AsyncClient(self._backend(number)))
        self.workers.append(asyncio.ensure_future(self.worker(number, self.clients[-1], rng)))

    def _force_end(self) -> None:
        """An operator's forced release (a lease store), or the holder's session killed
        by the server (a session store), which tells its client as it goes."""
        store, now = self.store, self.clock.now
        name = next(iter(sorted(store.names())), NAME)
        held = store.holder(name, now)
        ended = store.force_end(name, now)
        if not ended:
            return
        self.victims.update(ended)
        if isinstance(store, SessionStore) and isinstance(held, SessionLock):
            backend = store.clients.get(held.session)
            if backend is not None:
                self._tell_session_end(backend.client, "was killed by the server")

    def _tell_session_end(self, number: int, why: str) -> None:
        backend = self.clients[number].seam.backend
        if isinstance(backend, SimSessionBackend) and backend.current is not None:
            session = backend.current
            self.network.push(number, lambda: backend.ended(session, why))

    def _backend(self, number: int) -> SimBackend | SimSessionBackend | SimRedlockBackend:
        if isinstance(self.store, RedlockNodes):
            return SimRedlockBackend(self.store, self.network, number)
        if isinstance(self.store, SessionStore):
            return SimSessionBackend(self.store, self.network, number, self.plan.ttl)
        return SimBackend(self.store, self.network, number)

    async def main(self) -> None:
        for _ in range(self.plan.clients):
            self._start(random.Random(self.rng.random()))
        nemesis = self.nemesis(random.Random(self.rng.random())) if self.plan.faults else None
        try:
            if nemesis is not None:
                await nemesis
            while not all(task.done() for task in self.workers):  # the killed' replacements too
                await asyncio.gather(*self.workers, return_exceptions=True)
        finally:
            self.ended = True
            for client in self.clients:
                with contextlib.suppress(FencelockError):
                    await client.aclose()


@contextlib.contextmanager
def _seams(world: World) -> Iterator[None]:
    """The library's one clock and its owner values, the world's while it runs."""
    owners = random.Random(world.rng.random())
    real_now, real_owner, real_random = clock.now, lock_module.new_owner, random.getstate()
    clock.now = lambda: world.clock.now
    lock_module.new_owner = lambda: f"{owners.getrandbits(160):040x}"
    random.seed(world.rng.random())
    try:
        yield
    finally:
        clock.now, lock_module.new_owner = real_now, real_owner
        random.setstate(real_random)


def run(plan: Plan) -> Outcome:
    """Run ``plan`` to its end or its first violation."""
    world = World(plan)
    world.loop.after_step = world.check
    violation = None
    began = time.process_time()
    with _seams(world), reintroduced(*plan.bugs):
        try:
            world.loop.run_until_complete(world.main())
        except Violation as exc:
            violation = str(exc)
        finally:
            world.ended = True
            _close(world.loop)
    return Outcome(
        plan,
        violation,
        list(world.trace),
        world.loop.steps,
        world.clock.now - 1000.0,
        time.process_time() - began,
        world.acquired,
        world.lease_seconds,
        world.whole.hexdigest(),
    )


def _close(loop: VirtualLoop) -> None:
    """Cancel what is left (a run ended at a violation) and let it unwind."""
    with contextlib.suppress(Exception):
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    loop.close()
