"""One simulated run: real asyncio clients (``AsyncClient``, its leases, renewer and
acquire flow) against a model server over a faulty network, in virtual time, with the
invariants checked after every turn of the loop. Everything is decided by the seed."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import hashlib
import importlib.util
import math
import random
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from fencelock import clock, holder
from fencelock.backends.base import AsyncBackend
from fencelock.client import AsyncClient
from fencelock.engine.renewal import Outcome as RenewalOutcome
from fencelock.engine.timing import validate_ttl
from fencelock.errors import ConfigError, FencelockError, LockTimeout
from fencelock.lease import AsyncLease
from fencelock.primitives import barrier, election, latch, rwlock, semaphore
from fencelock.primitives import lock as lock_module
from fencelock.sim.backend import (
    REQUEST_BOUND,
    SimBackend,
    SimRedlockBackend,
    SimSessionBackend,
)
from fencelock.sim.bugs import KNOWN, reintroduced
from fencelock.sim.invariants import Grant, Release, Releases, TokenOrder
from fencelock.sim.loop import ClientClock, VirtualClock, VirtualLoop, client_clock, client_number
from fencelock.sim.model import (
    LeaseStore,
    RedlockNode,
    RedlockNodes,
    SessionLock,
    SessionStore,
)
from fencelock.sim.network import Network, NetworkConditions
from fencelock.sim.workloads import WORKLOADS

T = TypeVar("T")

if TYPE_CHECKING:
    from fencelock.sim.etcd import EtcdModel
    from fencelock.sim.redis_model import RedisModel
    from fencelock.sim.redlock import RedisNodes

# Loaded before any run (see _seams): one imported while a run is on would keep its owners.
LOADED = (barrier, election, latch, rwlock, semaphore)
# Slack past a lease's trusted time before its loss must have been reported: the renewer
# looks at it by then at the latest (a renewal in flight waits out its request bound).
LOSS_BOUND = 2 * REQUEST_BOUND
# Clock rates a run draws, the server's and each client's: together within the
# documented drift (1 % of the TTL), so each within half of it.
DRIFT = 0.0099
REDLOCK_NODES = 5
FAMILIES = ("lease", "session", "redlock", "etcd", "redis", "redlock-model")
# The families that run a backend of the library on models of Redis (redis, lupa).
ON_REDIS = ("redis", "redlock")
# What --all shares its time among: redlock-model (the decisions of the real Redlock
# backend over a model of its nodes, before the real backend ran here) is kept for the
# seeds of the bugs found on it.
SEARCHED = ("lease", "session", "redlock", "etcd", "redis")
# Where a release is decided by the nodes that answered it (a quorum's, Redlock's): done
# when the key may have been on a quorum, counting the nodes that did not answer, so it
# says "gone from a quorum", not "held": one that did not answer keeps the key until its
# TTL, and a try's phase 1 landing late may set it again until the backend's undo comes
# (the name stays taken for a TTL at most). The release's answer is not checked there.
QUORUM = ("redlock", "redlock-model")
# Workloads that need a lease to outlive its client (a latch's count): not the session
# family's, as on ZooKeeper, MySQL and the advisory locks (docs/backends.md).
OUTLIVING = ("latch", "barrier")


def missing_for_redis() -> str | None:
    """What the families on models of Redis need and this install lacks (None: nothing)."""
    lacking = [name for name in ("redis", "lupa") if importlib.util.find_spec(name) is None]
    if not lacking:
        return None
    return (
        f"the redis and redlock families run the real backends and their Lua scripts: "
        f"they need {' and '.join(lacking)} (pip install 'fencelock[sim]')"
    )


class Violation(AssertionError):
    """An invariant failed; the message says which, when and who."""


@dataclass(frozen=True)
class Plan:
    """What a run does, all of it from ``seed``."""

    seed: int
    clients: int = 4
    duration: float = 30.0  # virtual seconds
    ttl: float = 1.0
    conditions: NetworkConditions = field(default_factory=NetworkConditions)
    faults: bool = True
    bugs: tuple[str, ...] = ()  # bugs put back (fencelock.sim.bugs)
    family: str = "lease"  # one of FAMILIES
    workload: str = "lock"  # what the clients do (fencelock.sim.workloads)
    # extends (and renewals) cancelled in flight, a client's loop shut down with one out
    # (drawn from a random stream of their own; ``--no-cancels`` leaves them out)
    cancels: bool = True

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ConfigError(f"no model family {self.family!r} (one of {', '.join(FAMILIES)})")
        if self.workload not in WORKLOADS:
            raise ConfigError(f"no workload {self.workload!r} (one of {', '.join(WORKLOADS)})")
        if self.family in ON_REDIS and (missing := missing_for_redis()):
            raise ConfigError(missing)
        if self.workload in OUTLIVING and self.family == "session":
            raise ConfigError(f"a {self.workload} needs leases that outlive their client")
        check_run(self.clients, self.ttl, self.duration, self.bugs)


def check_run(clients: int, ttl: float, duration: float, put_back: tuple[str, ...]) -> None:
    """What every simulated run's plan must be (ConfigError naming what is wrong)."""
    if clients < 2:
        raise ConfigError(f"a run needs at least 2 clients to contend, not {clients}")
    validate_ttl(ttl)
    validate_ttl(duration, "duration")
    unknown = sorted(set(put_back) - set(KNOWN))
    if unknown:
        raise ConfigError(f"no such historical bug: {', '.join(unknown)}")


@dataclass
class Leases:
    """The leases the clients took, each known by its name and owner (as a release
    names it), and those the workloads were told of that the server granted at the last
    look, with until when it granted them then."""

    taken: dict[tuple[str, str], tuple[int, AsyncLease]] = field(default_factory=dict)
    watched: dict[tuple[str, str], tuple[int, AsyncLease, float]] = field(default_factory=dict)


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
        self.unmodeled: list[str] = []  # what the Redis model was asked and does not model
        self.store: LeaseStore | SessionStore | RedlockNodes | EtcdModel | RedisModel | RedisNodes
        if plan.family == "etcd":  # the real etcd backend, against a model of etcd
            from fencelock.sim.etcd import EtcdModel

            self.store = EtcdModel(self.true_now, rate=self._rate())
        elif plan.family == "redis":  # the real Redis backend, against its scripts' model
            from fencelock.sim import redis  # noqa: F401 - loaded before the seams are set
            from fencelock.sim.redis_model import RedisModel

            self.store = RedisModel(self.true_now, rate=self._rate())
            self.store.log = self.say
            self.unmodeled = self.store.unmodeled
        elif plan.family == "redlock":  # the real backend on five nodes of Redis
            self.store = self._redis_nodes()
            self.unmodeled = self.store.unmodeled
        elif plan.family == "redlock-model":  # five nodes, each its own clock
            self.store = RedlockNodes(
                [RedlockNode(self._rate(), self.clock.now) for _ in range(REDLOCK_NODES)]
            )
        elif plan.family == "session":
            self.store = SessionStore(rate=self._rate(), started=self.clock.now)
        else:  # a holder's own try answered as Redis and SQLite do, or as PostgreSQL
            self.store = LeaseStore(self._rate(), self.clock.now, regrant=self.rng.random() < 0.5)
        conditions = (
            plan.conditions if plan.faults else NetworkConditions(slow=0.0, drop=0.0, duplicate=0.0)
        )
        self.network = Network(random.Random(self.rng.random()), conditions, self.true_now)
        self.network.log = self.say
        if plan.family == "redlock":
            from fencelock.sim.redlock import RedisNodes, dialer

            assert isinstance(self.store, RedisNodes)
            self.loop.dial = dialer(self.store, self.network)
        self.loop.set_exception_handler(self._unretrieved)
        self.workload = WORKLOADS[plan.workload](self)
        self.clients: list[AsyncClient] = []
        self.clocks: list[ClientClock] = []
        self.trace: deque[str] = deque(maxlen=60)
        self.whole = hashlib.blake2b(digest_size=8)
        # owners whose lease a fault ended on the server, and when it first did
        self.victims: dict[str, float] = {}
        self.data_lost: list[float] = []  # when a fault ended leases or lost the data
        self.workers: list[asyncio.Task[None]] = []
        self.acquired = 0
        self.tokens = TokenOrder()  # every grant the workloads were told of, per name
        self.releases = Releases()  # every release sent, and the leases the server ended
        self.leases = Leases()
        self.held_since: dict[AsyncLease, float] = {}
        self.trusting: list[tuple[int, AsyncLease]] = []  # as of the last check
        self.lease_seconds = 0.0
        self.violation: str | None = None
        self.ended = False
        self.cancelled = 0  # client loops shut down with a request (a renewal's) in flight

    def _redis_nodes(self) -> RedisNodes:
        """Redlock's nodes, each a model of Redis on its own clock."""
        from fencelock.sim import redlock  # noqa: F401 - loaded before the seams are set
        from fencelock.sim.redis_model import RedisModel
        from fencelock.sim.redlock import RedisNodes

        models = [RedisModel(self.true_now, rate=self._rate()) for _ in range(REDLOCK_NODES)]
        for number, model in enumerate(models):
            model.log = functools.partial(self._node_says, number)
        return RedisNodes(models)

    def _node_says(self, number: int, line: str) -> None:
        self.say(line.replace("server:", f"node {number}:", 1))

    def _rate(self) -> float:
        """A clock's rate against true time: within half the drift the design allows."""
        return self.rng.uniform(1 - DRIFT / 2, 1 + DRIFT / 2) if self.plan.faults else 1.0

    def true_now(self) -> float:
        return self.clock.now

    def say(self, text: str) -> None:
        line = f"{self.clock.now - 1000.0:10.4f}  {text}"
        self.trace.append(line)
        self.whole.update(line.encode())

    def _unretrieved(self, loop: object, context: dict[str, object]) -> None:
        """An error no task awaited (a request left running): into the trace, not a log."""
        self.say(f"unretrieved: {context.get('message')}: {context.get('exception')!r}")

    def data_lost_since(self, when: float) -> bool:
        """Whether a fault has ended leases on the server, or lost its data, since ``when``."""
        return any(at >= when for at in self.data_lost)

    def server_grants(self, name: str, owner: str) -> bool:
        """Whether the server grants ``owner`` the name now."""
        return self.store.grant_until(name, owner, self.clock.now) is not None

    def trusts(self, number: int, lease: AsyncLease) -> bool:
        """Whether client ``number`` trusts ``lease`` now (true time), a fault's victim
        or not; a killed process trusts nothing."""
        if number in self.network.dead or lease.lost or lease._given_back:
            return False
        return self.clocks[number].true_at(lease.trusted_until) > self.clock.now

    def struck(self, owner: str) -> float | None:
        """When a fault ended ``owner``'s lease on the server (None: none did)."""
        return self.victims.get(owner)

    def released_by_victim(self, name: str, owner: str, holding: str) -> bool:
        """Whether a release naming ``owner``'s lease on ``name`` (an eviction) came from
        a client that, as it sent it, trusted a lease on ``holding`` a fault had ended:
        in that window it may believe what is no longer so (that it leads)."""
        return any(
            (release.name, release.owner) == (name, owner)
            and any(held == holding and by in self.victims for held, by in release.trusting)
            for release in self.releases.out
        )

    # --- the invariants, after every turn ------------------------------------------------

    def check(self) -> None:
        if self.violation is not None:
            raise Violation(self.violation)
        if self.ended:
            return
        if self.unmodeled:
            self.violated(f"the Redis model was asked for {self.unmodeled[0]}, unmodeled")
        self._check_ends(self.clock.now)
        self.trusting = self._trusting(self.clock.now)
        by_name: dict[str, list[tuple[int, AsyncLease]]] = {}
        for number, lease in self.trusting:
            by_name.setdefault(lease.name, []).append((number, lease))
        for name, holders in by_name.items():
            if len(holders) > 1:
                who = ", ".join(f"client {n} (token {lease.token})" for n, lease in holders)
                self.violated(f"two clients trust {name} at once: {who}")
        for number, lease in self.trusting:
            granted_until = self.store.grant_until(lease.name, lease.owner, self.clock.now)
            if granted_until is None:
                self.violated(
                    f"client {number} trusts token {lease.token} the server no longer grants"
                )
            trusted_until = self.clocks[number].true_at(lease.trusted_until)
            if trusted_until > granted_until + 1e-9:
                self.violated(
                    f"client {number} trusts token {lease.token} until "
                    f"{trusted_until - 1000:.4f}, past the server's grant "
                    f"(until {granted_until - 1000:.4f})"
                )
        self.workload.check(self.clock.now)

    def _trusting(self, now: float) -> list[tuple[int, AsyncLease]]:
        """The live leases trusted now (a lease a fault ended on the server aside), each
        checked to be reported lost in time once its trusted time is over (all in true
        time: a client's own clock may run fast or slow, or have jumped)."""
        trusting: list[tuple[int, AsyncLease]] = []
        for number, client in enumerate(self.clients):
            if number in self.network.dead:  # a killed process trusts nothing
                continue
            own = self.clocks[number]
            for lease in client.held():
                if lease.lost or self.workload.exempt(lease.name):
                    continue
                trusted_until = own.true_at(lease.trusted_until)
                noticed = max(trusted_until, own.jumped_at)  # a jump ends trust at once
                if now > noticed + LOSS_BOUND:
                    self.violated(
                        f"client {number}'s lease (token {lease.token}) is past its trusted "
                        f"time by {now - trusted_until:.3f}s and not reported lost"
                    )
                if trusted_until > now and lease.owner not in self.victims:
                    trusting.append((number, lease))
        return trusting

    def _check_ends(self, now: float) -> None:
        """A lease the workloads were told of ends on the server by its time, by a
        release naming its owner, or by a fault: never by another owner's release."""
        for key, (number, lease, until) in list(self.leases.watched.items()):
            granted_until = self.store.grant_until(lease.name, lease.owner, now)
            if granted_until is not None:
                self.leases.watched[key] = (number, lease, granted_until)
                continue
            del self.leases.watched[key]
            if lease.owner not in self.victims:
                wrong = self.releases.ended(
                    number, lease.name, lease.owner, lease.token, until, now
                )
                if wrong is not None:
                    self.violated(wrong)

    def tokens_since(self) -> float:
        """Grants asked for before this time are no measure of later tokens: etcd's
        revision starts again at 1 in a store that lost its data (as a real one's)."""
        return max(self.data_lost, default=-math.inf) if self.plan.family == "etcd" else -math.inf

    def _check_token(self, number: int, lease: AsyncLease, asked: float) -> None:
        """Tokens per name strictly increase: a lease asked for after another was
        granted (and known to be) has a greater token."""
        above = self.tokens.above(lease.name, lease.token, asked, since=self.tokens_since())
        if above is not None:
            self.violated(
                f"client {number} got token {lease.token} on {lease.name}, not above "
                f"{above}, granted before it asked"
            )
        self.tokens.add(lease.name, Grant(asked, self.clock.now, lease.token))

    def violated(self, what: str) -> NoReturn:
        """Raise :class:`Violation`; the run ends at the next turn, even if the task it
        is raised in is a client's (whose end nobody awaits)."""
        if self.violation is None:
            self.violation = what
            self.say(f"VIOLATION: {what}")
        raise Violation(what)

    # --- what the workloads call ----------------------------------------------------------

    def granted(self, number: int, lease: AsyncLease, asked: float) -> None:
        """Client ``number`` was granted ``lease`` (it asked at true time ``asked``)."""
        self.say(f"client {number}: acquired {lease.name} token {lease.token}")
        self._check_token(number, lease, asked)
        self.acquired += 1
        self.held_since[lease] = self.clock.now
        until = self.store.grant_until(lease.name, lease.owner, self.clock.now)
        if until is not None and not self.workload.exempt(lease.name):
            self.leases.watched[lease.name, lease.owner] = (number, lease, until)
        lease.on_lost(self._telling_loss(number))

    def _telling_loss(self, number: int) -> Callable[[AsyncLease], None]:
        def lost(lease: AsyncLease) -> None:
            self.say(f"client {number}: lost {lease.token}")

        return lost

    async def hold(self, number: int, lease: AsyncLease, rng: random.Random) -> None:
        """Hold ``lease`` a while (an extend perhaps in flight), then release it."""
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

    # --- the clients and the faults ------------------------------------------------------

    async def worker(self, number: int, client: AsyncClient, rng: random.Random) -> None:
        end = self.clock.now + self.plan.duration
        while self.clock.now < end:
            try:
                await self.workload.once(number, client, rng)
            except LockTimeout:
                continue
            except FencelockError as exc:
                self.say(f"client {number}: failed: {type(exc).__name__}: {exc}")
                await asyncio.sleep(rng.uniform(0.01, 0.2))

    async def nemesis(self, rng: random.Random) -> None:
        end = self.clock.now + self.plan.duration
        faults: tuple[str, ...] = ("pause", "pause", "kill", "evict", "restart")
        faults += ("restart-empty", "jump")
        if self.plan.family in ON_REDIS:  # a server (a node) that stops, then runs it all
            faults += ("server-pause",)
        while self.clock.now < end:
            await asyncio.sleep(rng.expovariate(1.0))
            fault = rng.choice(faults)
            if fault == "kill":
                self._kill(rng)
                continue
            if fault == "server-pause":
                self._pause_server(rng.uniform(0.05, 3.0), rng)
                continue
            if fault == "pause":
                victim, seconds = rng.randrange(len(self.clients)), rng.uniform(0.01, 3.0)
                self.network.pause(victim, self.clock.now, seconds)
                self.say(f"nemesis: client {victim} paused for {seconds:.3f}s")
                continue
            if fault == "jump":  # the client's clock leaps ahead (it never goes back)
                victim, seconds = rng.randrange(len(self.clients)), rng.uniform(0.01, 2.0)
                self.loop.jump(self.clocks[victim], seconds)
                self.say(f"nemesis: client {victim}'s clock jumps {seconds:.3f}s ahead")
                continue
            if fault == "evict":
                self._force_end(rng)
            else:
                self._restart(fault, rng)
                fault = f"{fault}" if not isinstance(self.store, RedlockNodes) else fault
            self.say(f"nemesis: {fault}")

    async def canceller(self, rng: random.Random) -> None:
        """Now and then a client's extend (or ``expire_in``) is called from a task of its
        own, which is cancelled while its request is out (the request goes on: it is
        shielded); or, the next request on a lease (an extend's, a renewal's) in flight,
        its client's loop shuts down, every task cancelled, that request's too (the
        renewal's interrupted branch). The world's invariants check the rest."""
        end = self.clock.now + self.plan.duration
        while self.clock.now < end:
            await asyncio.sleep(rng.expovariate(2.0))
            held = [
                (number, lease)
                for number, client in enumerate(self.clients)
                if number not in self.network.dead
                for lease in client.held()
                if not lease.lost and not self.workload.exempt(lease.name)
            ]
            if not held:
                continue
            (number, lease), roll = rng.choice(held), rng.random()
            if roll < 0.4 or roll >= 0.7:  # its next request, cancelled in flight
                self._arm(number, lease, rng.uniform(0.0, 0.005), rng)
            if roll < 0.4:  # a renewal's, most likely
                continue
            ttl = rng.uniform(0.5, 2.0) * self.plan.ttl
            # expire_in lets a lease go here: not one its holder holds nested (re-entrant),
            # whose holder gives it back level by level
            expire = rng.random() < 0.2 and not lease.reentrant
            calling = self._on_client(number, self._extending(number, lease, ttl, expire))
            await asyncio.sleep(rng.uniform(0.0, 0.005))
            if not calling.done():
                calling.cancel()
                what = "expire_in" if expire else "extend"
                self.say(f"nemesis: client {number}'s {what} of {lease.token} cancelled")

    def _arm(self, number: int, lease: AsyncLease, after: float, rng: random.Random) -> None:
        """``after`` seconds into the next request on ``lease``, its client's loop shuts
        down (as ``asyncio.run`` ends, every task cancelled) with the request in flight."""
        if "_renewal" in vars(lease):
            return  # armed already
        sending, then = lease._renewal, random.Random(rng.random())

        def cancelled_soon(ttl: float | None = None) -> asyncio.Task[RenewalOutcome]:
            delattr(lease, "_renewal")  # once: the class's method again
            request = sending(ttl)
            self.loop.call_later(after, self._shut_down, number, request, then)
            return request

        setattr(lease, "_renewal", cancelled_soon)  # noqa: B010 - undone by its first call

    def _shut_down(
        self, number: int, request: asyncio.Task[RenewalOutcome], rng: random.Random
    ) -> None:
        """Client ``number``'s loop ends with ``request`` in flight: the request, the
        renewer and the client's work cancelled, the client gone (nobody there trusts its
        leases any more, which end by their TTL); another client starts."""
        if request.done() or number in self.network.dead or self.ended:
            return
        self.network.dead.add(number)
        renewing = self.clients[number]._renewer._task
        for task in (request, renewing, self.workers[number]):
            if task is not None:
                task.cancel()
        self.cancelled += 1
        self.say(
            f"nemesis: client {number}'s loop shuts down with a request in flight; "
            f"client {len(self.clients)} starts"
        )
        self._start(rng)

    async def _extending(self, number: int, lease: AsyncLease, ttl: float, expire: bool) -> None:
        with contextlib.suppress(FencelockError):
            if expire:
                await lease.expire_in(ttl)
                self.say(f"client {number}: left {lease.token} to expire in {ttl:.3f}s")
            else:
                await lease.extend(ttl)
                self.say(f"client {number}: extended {lease.token} to {ttl:.3f}s")

    def _on_client(self, number: int, work: Coroutine[object, object, None]) -> asyncio.Task[None]:
        """``work`` as a task of client ``number``'s (on its clock), its end retrieved."""
        context = contextvars.copy_context()
        context.run(client_clock.set, self.clocks[number])
        context.run(client_number.set, number)
        task = context.run(self.loop.create_task, work)
        task.add_done_callback(_retrieved)
        return task

    def _restart(self, fault: str, rng: random.Random) -> None:
        keep = fault == "restart"
        if not keep:  # every grant ends, answered yet or not
            self.data_lost.append(self.clock.now)
            self._strike(self.store.owners())
            for number in range(len(self.clients)):
                if isinstance(self.store, SessionStore):
                    self._tell_session_end(number, "was lost with the server's data")
        if isinstance(self.store, RedlockNodes) or self.plan.family == "redlock":
            which = rng.randrange(REDLOCK_NODES)  # one node of them
            self.store.restart(keep, self.clock.now, which)  # type: ignore[call-arg]
            self.say(f"nemesis: node {which} restarts")
        else:
            self.store.restart(keep, self.clock.now)

    def _pause_server(self, seconds: float, rng: random.Random) -> None:
        """The server's process (one Redlock node's) stops (SIGSTOP) for ``seconds``: what
        reaches it waits, its keys expire by its clock meanwhile; then it runs what
        waited, in order."""
        from fencelock.sim.redis_model import RedisModel
        from fencelock.sim.redlock import RedisNodes

        until, which = self.clock.now + seconds, ""
        store = self.store
        if isinstance(store, RedisNodes):
            number = rng.randrange(len(store.models))
            store, which = store.models[number], f" node {number}:"
        assert isinstance(store, RedisModel)
        store.pause(until)
        self.loop.call_later(seconds, store.resume, until, context=self.network.server)
        self.say(f"nemesis:{which} the server paused for {seconds:.3f}s")

    def _kill(self, rng: random.Random) -> None:
        """A client's process dies (nothing in or out, no release) and another starts."""
        alive = [n for n in range(len(self.clients)) if n not in self.network.dead]
        victim = rng.choice(alive)
        self.network.dead.add(victim)
        self.workers[victim].cancel()
        self.say(f"nemesis: client {victim} killed; client {len(self.clients)} starts")
        self._start(random.Random(rng.random()))

    def _start(self, rng: random.Random) -> None:
        """A client process: its own clock, its client, its worker task (every task it
        starts runs in its context, so on its clock)."""
        number = len(self.clients)
        own = ClientClock(self.clock.now, self._rate())
        context = contextvars.copy_context()
        context.run(client_clock.set, own)
        context.run(client_number.set, number)
        self.clocks.append(own)
        backend = self._recording_releases(number, self._backend(number))
        self.clients.append(context.run(AsyncClient, backend))
        self._recording_leases(number, self.clients[-1])
        work = self.worker(number, self.clients[-1], rng)
        self.workers.append(context.run(self.loop.create_task, work))

    def _force_end(self, rng: random.Random) -> None:
        """An operator's forced release (a lease store), or the holder's session killed
        by the server (a session store), which tells its client as it goes."""
        store, now = self.store, self.clock.now
        names = sorted(store.names())
        if not names:
            return
        name = rng.choice(names)
        held = store.holder(name, now)
        ended = store.force_end(name, now)
        if not ended:
            return
        self.data_lost.append(now)
        self._strike(ended)
        if isinstance(store, SessionStore) and isinstance(held, SessionLock):
            backend = store.clients.get(held.session)
            if backend is not None:
                self._tell_session_end(backend.client, "was killed by the server")

    def _strike(self, owners: set[str]) -> None:
        """A fault ended ``owners``' leases on the server, now."""
        for owner in owners:
            self.victims.setdefault(owner, self.clock.now)

    def _tell_session_end(self, number: int, why: str) -> None:
        backend = self.clients[number].internals.backend
        if isinstance(backend, SimSessionBackend) and backend.current is not None:
            session = backend.current
            self.network.push(number, lambda: backend.ended(session, why))

    def _recording_releases(self, number: int, backend: AsyncBackend) -> AsyncBackend:
        """``backend``, each release it sends (a lease's, an eviction's, a primitive's)
        recorded as it goes out and checked when it is answered."""
        sending = backend.release

        async def release(name: str, owner: str) -> bool:
            now = self.clock.now
            granted = self.store.grant_until(name, owner, now) is not None
            taken = self.leases.taken.get((name, owner))  # an eviction's is another's
            lost_before = taken is not None and taken[0] == number and taken[1].lost
            lost_before = lost_before or owner in self.victims
            trusting = tuple(
                (lease.name, lease.owner)
                for lease in self.clients[number].held()
                if self.trusts(number, lease)
            )
            out = self.releases.sent(number, name, owner, now, granted, trusting)
            done = await sending(name, owner)
            self._answered(out, done, lost_before)
            return done

        setattr(backend, "release", release)  # noqa: B010 - this backend's, for the run
        return backend

    def _recording_leases(self, number: int, client: AsyncClient) -> None:
        """Every lease ``client`` takes, known by its name and owner."""
        holdings = client.internals.holdings
        adding = holdings.add

        def add(lease: AsyncLease, holder: object) -> None:
            self.leases.taken[lease.name, lease.owner] = (number, lease)
            adding(lease, holder)

        setattr(holdings, "add", add)  # noqa: B010 - this client's, for the run

    def _answered(self, release: Release, done: bool, lost_before: bool) -> None:
        if self.ended or self.plan.family in QUORUM:
            return
        now = self.clock.now
        still = self.store.grant_until(release.name, release.owner, now) is not None
        still = still and not self._granted_anew(release)
        wrong = self.releases.answered(release, done, lost_before, still)
        if wrong is not None:
            self.violated(wrong)

    def _granted_anew(self, release: Release) -> bool:
        """Whether the server grants the released owner the name again, with another
        token: a try of its acquisition, sent again (a driver's resend) or held up, that
        landed after the release (the lease and session families use one owner value for
        every try of an acquisition)."""
        taken = self.leases.taken.get((release.name, release.owner))
        held = self.store.holder(release.name, self.clock.now)
        token = getattr(held, "token", None)
        return taken is not None and token is not None and token != taken[1].token

    def _backend(self, number: int) -> AsyncBackend:
        if self.plan.family == "redis":
            from fencelock.sim.redis import sim_redis_backend
            from fencelock.sim.redis_model import RedisModel

            assert isinstance(self.store, RedisModel)
            return sim_redis_backend(self.store, self.network, number)
        if self.plan.family == "etcd":
            from fencelock.sim.etcd import EtcdModel, sim_etcd_backend

            assert isinstance(self.store, EtcdModel)
            return sim_etcd_backend(self.store, self.network, number)
        if self.plan.family == "redlock":
            from fencelock.sim.redlock import RedisNodes, sim_redlock_backend

            assert isinstance(self.store, RedisNodes)
            return sim_redlock_backend(self.store)
        if isinstance(self.store, RedlockNodes):
            return SimRedlockBackend(self.store, self.network, number)
        if isinstance(self.store, SessionStore):
            return SimSessionBackend(self.store, self.network, number, self.plan.ttl)
        assert isinstance(self.store, LeaseStore)
        return SimBackend(self.store, self.network, number)

    async def main(self) -> None:
        for _ in range(self.plan.clients):
            self._start(random.Random(self.rng.random()))
        nemesis = self.nemesis(random.Random(self.rng.random())) if self.plan.faults else None
        canceller = None
        if self.plan.cancels:  # its own stream: the other draws are as without it
            cancelling = random.Random(f"{self.plan.seed}/cancels")
            canceller = self.loop.create_task(self.canceller(cancelling))
        try:
            if nemesis is not None:
                await nemesis
            if canceller is not None:
                await canceller
            while not all(task.done() for task in self.workers):  # the killed' replacements too
                await asyncio.gather(*self.workers, return_exceptions=True)
        finally:
            self.ended = True
            for number, client in enumerate(self.clients):
                with contextlib.suppress(FencelockError):
                    await self._closing(number, client)

    async def _closing(self, number: int, client: AsyncClient) -> None:
        """Close ``client`` on its own clock."""
        context = contextvars.copy_context()
        context.run(client_clock.set, self.clocks[number])
        context.run(client_number.set, number)
        await context.run(self.loop.create_task, client.aclose())


def _on_thread(
    thread: int, world_version: Callable[..., T], real: Callable[..., T]
) -> Callable[..., T]:
    """``world_version`` when called on ``thread``, else ``real``."""

    def chosen(*args: Any, **kwargs: Any) -> T:
        if threading.get_ident() == thread:
            return world_version(*args, **kwargs)
        return real(*args, **kwargs)

    return chosen


@contextlib.contextmanager
def _seams(world: World) -> Iterator[None]:
    """The library's one clock, its owner values and the ``random`` module's draws, the
    world's while it runs (in every module that took ``new_owner`` or ``new_identity`` by
    name), on the run's own thread only: a thread outside the world (an earlier test's,
    a driver's) that drew from them would change the run (one drawing ``random.random``
    every 0.5 ms gave six runs of one seed six histories)."""
    here = threading.get_ident()
    owners = random.Random(world.rng.random())
    draws = random.Random(world.rng.random())
    shared = random.random.__self__  # type: ignore[attr-defined]  # the module's instance
    real_now, real_owner = clock.now, lock_module.new_owner
    real_identity = holder.new_identity
    loaded = list(sys.modules.values())
    takers = [m for m in loaded if getattr(m, "new_owner", None) is real_owner]
    renamers = [m for m in loaded if getattr(m, "new_identity", None) is real_identity]
    module_draws = {
        name: drawn
        for name, drawn in vars(random).items()
        if callable(drawn) and getattr(drawn, "__self__", None) is shared
    }
    in_world = functools.partial(_on_thread, here)

    def new_identity(owner: str) -> str:
        _, dot, description = owner.partition(".")
        return f"{owners.getrandbits(160):040x}{dot}{description}"

    def new_owner() -> str:
        return f"{owners.getrandbits(160):040x}"

    clock.now = in_world(world.loop.time, real_now)  # a client's own clock, in its tasks
    for module in takers:
        module.new_owner = in_world(new_owner, real_owner)  # type: ignore[attr-defined]
    for module in renamers:
        module.new_identity = in_world(new_identity, real_identity)  # type: ignore[attr-defined]
    for name, drawn in module_draws.items():
        setattr(random, name, in_world(getattr(draws, name), drawn))
    try:
        yield
    finally:
        clock.now = real_now
        for module in takers:
            module.new_owner = real_owner  # type: ignore[attr-defined]
        for module in renamers:
            module.new_identity = real_identity  # type: ignore[attr-defined]
        for name, drawn in module_draws.items():
            setattr(random, name, drawn)


def run(plan: Plan) -> Outcome:
    """Run ``plan`` to its end or its first violation."""
    world = World(plan)
    world.loop.after_step = world.check
    began = time.process_time()
    with _seams(world), reintroduced(*plan.bugs):
        try:
            world.loop.run_until_complete(world.main())
        except Violation:  # a client's task's, too: kept by the world
            pass
        except Exception as exc:  # the client's code crashed: as much a failure
            if world.violation is None:
                world.violation = f"the client raised {type(exc).__name__}: {exc}"
                world.say(f"VIOLATION: {world.violation}")
        finally:
            world.ended = True
            world.loop.after_step = lambda: None  # what is left unwinds unchecked
            _close(world.loop)
            world.workload.close()
    return Outcome(
        plan,
        world.violation,
        list(world.trace),
        world.loop.steps,
        world.clock.now - 1000.0,
        time.process_time() - began,
        world.acquired,
        world.lease_seconds,
        world.whole.hexdigest(),
    )


def _retrieved(task: asyncio.Task[None]) -> None:
    """Mark ``task``'s end seen: an error left for the garbage collector would be
    reported at a moment the seed does not decide."""
    if not task.cancelled():
        task.exception()


def _close(loop: VirtualLoop) -> None:
    """Cancel what is left (a run ended at a violation) and let it unwind."""
    with contextlib.suppress(Exception):
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    loop.close()
