"""What the simulated clients do, one primitive each, and each primitive's own invariant
(beyond the world's: one trusting holder per name, trust within the server's grant,
losses reported, tokens growing, releases that end only their own lease), the
invariants themselves in :mod:`fencelock.sim.invariants`.

A workload's ``once`` is one round of one client (take, hold, give back); its ``check``
runs after every turn of the loop, from the simulator's omniscient view."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import random
from dataclasses import dataclass, field
from typing import NoReturn, Protocol

from fencelock.client import AsyncClient
from fencelock.engine.lease_state import is_live
from fencelock.errors import FencelockError, LockTimeout, StaleToken
from fencelock.fencing import FencingGuard, MemoryGuard, SQLiteGuard
from fencelock.lease import AsyncLease
from fencelock.primitives.election import AsyncLeadership
from fencelock.primitives.lock import AsyncLock
from fencelock.sim.invariants import Campaigner, Fences, Hold, RWHolds, Terms, Write

NAME = "orders/1"
POOL = "exports"  # the semaphore workload's
SEMAPHORE_PERMITS = 2
LATCH = "gate"
LATCH_COUNT = 3


class Plan(Protocol):
    @property
    def ttl(self) -> float: ...


class World(Protocol):
    """What a workload sees of the world (:class:`fencelock.sim.world.World`)."""

    @property
    def plan(self) -> Plan: ...

    @property
    def trusting(self) -> list[tuple[int, AsyncLease]]:
        """Who trusts which lease now (as of the last check)."""

    def true_now(self) -> float: ...

    def say(self, text: str) -> None: ...

    def violated(self, what: str) -> NoReturn: ...

    def granted(self, number: int, lease: AsyncLease, asked: float) -> None: ...

    async def hold(self, number: int, lease: AsyncLease, rng: random.Random) -> None: ...

    def data_lost_since(self, when: float) -> bool: ...

    def tokens_since(self) -> float:
        """Grants asked for before this are no measure of later tokens (a lost store)."""

    def server_grants(self, name: str, owner: str) -> bool:
        """Whether the server grants ``owner`` the name now."""

    def trusts(self, number: int, lease: AsyncLease) -> bool:
        """Whether client ``number`` trusts ``lease`` now (true time; a fault's victim
        too)."""

    def struck(self, owner: str) -> float | None:
        """When a fault ended ``owner``'s lease on the server (None: none did)."""

    def released_by_victim(self, name: str, owner: str, holding: str) -> bool:
        """Whether a release naming that lease came from a client whose last lease on
        ``holding`` before it a fault had ended."""


class Workload:
    """One client's rounds; subclasses take a primitive."""

    def __init__(self, world: World) -> None:
        self.world = world

    async def once(self, number: int, client: AsyncClient, rng: random.Random) -> None:
        raise NotImplementedError

    def check(self, now: float) -> None:
        """The primitive's invariant, after every turn."""

    def close(self) -> None:
        """The run is over: let go of what the workload keeps outside the world."""

    def exempt(self, name: str) -> bool:
        """Whether a lease on ``name`` is outside the world's per-lease invariants (a
        primitive's own bookkeeping that others end on purpose)."""
        return False

    def _timeout(self, rng: random.Random) -> float:
        return rng.uniform(0.05, 4 * self.world.plan.ttl)

    async def _granted_lock(
        self, number: int, client: AsyncClient, rng: random.Random
    ) -> AsyncLease | None:
        """The lock on ``NAME``, taken within a random timeout and recorded as granted;
        None if it timed out."""
        world, asked = self.world, self.world.true_now()
        try:
            lease = await client.lock(NAME, ttl=world.plan.ttl).acquire(self._timeout(rng))
        except LockTimeout:
            return None
        world.granted(number, lease, asked)
        return lease


class LockWork(Workload):
    """A lock: take it, hold it (an extend perhaps in flight), release it."""

    async def once(self, number: int, client: AsyncClient, rng: random.Random) -> None:
        lease = await self._granted_lock(number, client, rng)
        if lease is not None:
            await self.world.hold(number, lease, rng)


class SemaphoreWork(Workload):
    """Permits of a pool of :data:`SEMAPHORE_PERMITS`: never more trusted at once."""

    bell = f"{POOL}.sem/bell"  # a waiter's wake-up, which the semaphore ends to ring it

    async def once(self, number: int, client: AsyncClient, rng: random.Random) -> None:
        world, asked = self.world, self.world.true_now()
        pool = client.semaphore(POOL, permits=SEMAPHORE_PERMITS, ttl=world.plan.ttl)
        try:
            lease = (await pool.acquire(timeout=self._timeout(rng))).lease
        except LockTimeout:
            return
        world.granted(number, lease, asked)
        await world.hold(number, lease, rng)

    def exempt(self, name: str) -> bool:
        return name == self.bell

    def check(self, now: float) -> None:
        permits = [
            (number, lease)
            for number, lease in self.world.trusting
            if lease.name.startswith(f"{POOL}.sem/p/")
        ]
        if len(permits) > SEMAPHORE_PERMITS:
            who = ", ".join(f"client {n} (token {lease.token})" for n, lease in permits)
            self.world.violated(f"{len(permits)} permits of {SEMAPHORE_PERMITS} trusted: {who}")


class RWLockWork(Workload):
    """A read-write lock: many readers or one writer, never both; a writer's token above
    every hold's granted before it."""

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.modes: dict[AsyncLease, Hold] = {}
        self.holds = RWHolds()

    async def once(self, number: int, client: AsyncClient, rng: random.Random) -> None:
        world, asked = self.world, self.world.true_now()
        mode = "write" if rng.random() < 0.4 else "read"
        rw = client.rw_lock(NAME, ttl=world.plan.ttl)
        side = rw.write() if mode == "write" else rw.read()
        try:
            hold = await side.acquire(self._timeout(rng))
        except LockTimeout:
            return
        self.modes[hold.lease] = Hold(number, mode, hold.token)
        world.granted(number, hold.lease, asked)
        # a hold lost as it came (its gate ran out meanwhile), or one a fault ended, is
        # no writer's: counted among those granted, not checked
        checked = not hold.lease.lost and world.struck(hold.lease.owner) is None
        wrong = self.holds.granted(
            NAME, self.modes[hold.lease], asked, world.true_now(), world.tokens_since(), checked
        )
        if wrong is not None:
            world.violated(wrong)
        try:
            await world.hold(number, hold.lease, rng)
        finally:
            self.modes.pop(hold.lease, None)

    def check(self, now: float) -> None:
        holds = [self.modes[lease] for _, lease in self.world.trusting if lease in self.modes]
        wrong = RWHolds.trusted(holds)
        if wrong is not None:
            self.world.violated(wrong)


class ElectionWork(Workload):
    """A leader election: one leader at a time (the world's one holder per name), each
    client announcing its value; announcements of earlier leaders are evicted on
    purpose. A client acting as leader holds its term and its announcement on the
    server; two are never announced while both trust their terms; terms grow."""

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.terms = Terms()
        self.leading: dict[int, tuple[AsyncLeadership, float]] = {}  # and when it announced

    async def once(self, number: int, client: AsyncClient, rng: random.Random) -> None:
        world, asked = self.world, self.world.true_now()
        election = client.election(NAME, ttl=world.plan.ttl)
        try:
            leadership = await election.campaign(f"client-{number}", self._timeout(rng))
        except LockTimeout:
            return
        world.granted(number, leadership.lease, asked)
        lease, now = leadership.lease, world.true_now()
        checked = not lease.lost and world.struck(lease.owner) is None
        wrong = self.terms.won(
            NAME, number, leadership.term, asked, now, world.tokens_since(), checked
        )
        if wrong is not None:
            world.violated(wrong)
        self.leading[number] = (leadership, now)
        try:
            await world.hold(number, leadership.lease, rng)
            with contextlib.suppress(FencelockError):
                await leadership.resign()
        finally:
            del self.leading[number]

    def exempt(self, name: str) -> bool:
        return name.startswith(f"{NAME}.leader/")

    def check(self, now: float) -> None:
        world, standing = self.world, []
        for number, (leadership, announced_at) in sorted(self.leading.items()):
            lease, announcement = leadership.lease, leadership._announcement
            leases = [lease] if announcement is None else [lease, announcement]
            struck = [at for each in leases if (at := world.struck(each.owner)) is not None]
            announced = announcement is not None and world.server_grants(
                announcement.name, announcement.owner
            )
            # evicted by a client a fault misled (its own term ended on the server unseen)
            misled = (
                announcement is not None
                and not announced
                and world.released_by_victim(announcement.name, announcement.owner, NAME)
            )
            standing.append(
                Campaigner(
                    client=number,
                    term=leadership.term,
                    trusts=world.trusts(number, lease),
                    leads=world.server_grants(lease.name, lease.owner),
                    announced=announced,
                    trusts_announcement=announcement is not None
                    and world.trusts(number, announcement),
                    struck=bool(struck) or misled,
                    struck_first=any(at <= announced_at for at in struck),
                )
            )
        wrong = Terms.standing(standing)
        if wrong is not None:
            world.violated(wrong)


@dataclass
class _Call:
    """A latch call: when it began and ended (None: not yet), and how it came out."""

    began: float
    ended: float | None = None
    outcome: bool | None = None  # None: raised or never answered (it may have counted)


@dataclass
class _Arming:
    call: _Call
    downs: list[_Call] = field(default_factory=list)


class LatchWork(Workload):
    """A count-down latch of :data:`LATCH_COUNT`: a waiter passes only once the latch it
    waited on was counted down that many times (or was never armed)."""

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.armings: list[_Arming] = []
        self.downs: list[_Call] = []

    async def once(self, number: int, client: AsyncClient, rng: random.Random) -> None:
        latch, roll = client.latch(LATCH), rng.random()
        if roll < 0.2:
            arming = _Arming(self._begin())
            self.armings.append(arming)
            await self._end(arming.call, latch.try_set_count(LATCH_COUNT), number, "armed")
        elif roll < 0.6:
            await self._end(self._begin(self.downs), latch.count_down(), number, "counted down")
        else:
            waiting = self._begin()
            passed = await self._end(waiting, latch.wait(self._timeout(rng)), number, "waited")
            if passed:
                self._check_pass(number, waiting)
        await asyncio.sleep(rng.uniform(0.0, self.world.plan.ttl))

    def _begin(self, into: list[_Call] | None = None) -> _Call:
        call = _Call(self.world.true_now())
        if into is not None:
            into.append(call)
        return call

    async def _end(self, call: _Call, doing: object, number: int, what: str) -> bool:
        try:
            outcome = await doing  # type: ignore[misc]
        except FencelockError as exc:
            self.world.say(f"client {number}: latch {what}: {type(exc).__name__}")
            call.ended = self.world.true_now()
            return False
        call.ended, call.outcome = self.world.true_now(), bool(outcome)
        self.world.say(f"client {number}: latch {what} -> {call.outcome}")
        return call.outcome

    def _check_pass(self, number: int, waiting: _Call) -> None:
        """The latch last armed for sure before the wait began, counted down fewer times
        than its count by every call that may have counted: the wait passed it closed."""
        armed = [a for a in self.armings if a.call.outcome and a.call.ended <= waiting.began]  # type: ignore[operator]
        if not armed or self.world.data_lost_since(armed[-1].call.began):
            return
        since = armed[-1].call.began
        maybe = [
            down
            for down in self.downs
            if down.outcome is not False
            and (down.ended is None or down.ended > since)
            and down.began < (waiting.ended or self.world.true_now())
        ]
        if len(maybe) < LATCH_COUNT:
            self.world.violated(
                f"client {number}'s wait passed a latch counted down at most {len(maybe)} "
                f"of {LATCH_COUNT} times since it was armed"
            )

    def exempt(self, name: str) -> bool:
        return name.startswith(f"{LATCH}.latch/")


class BarrierWork(LatchWork):
    """A barrier of :data:`LATCH_COUNT` parties: each arrival counts its latch down (arming
    it when it is open) and waits for it, so the latch's invariant holds its passes: every
    call the barrier makes on its latch is recorded as the latch workload's own are."""

    async def once(self, number: int, client: AsyncClient, rng: random.Random) -> None:
        barrier = client.barrier(LATCH, parties=LATCH_COUNT)
        latch, work = barrier._latch, self

        class Recorded:
            async def count_down(self) -> bool:
                return await work._end(
                    work._begin(work.downs), latch.count_down(), number, "counted down"
                )

            async def try_set_count(self, count: int) -> bool:
                arming = _Arming(work._begin())
                work.armings.append(arming)
                return await work._end(arming.call, latch.try_set_count(count), number, "armed")

            async def wait(self, timeout: float | None = None) -> bool:
                waiting = work._begin()
                passed = await work._end(waiting, latch.wait(timeout), number, "waited")
                if passed:
                    work._check_pass(number, waiting)
                return passed

        barrier._latch = Recorded()  # type: ignore[assignment]
        passed = await barrier.wait(self._timeout(rng))
        self.world.say(f"client {number}: passed the barrier -> {passed}")
        await asyncio.sleep(rng.uniform(0.0, self.world.plan.ttl))


class ReentrantWork(Workload):
    """A re-entrant lock taken by short-lived tasks of one client. A task that holds it
    may enter it again, 2 or 3 deep, and leaves in order, the outer hold last; a task may
    end still holding it (a thread that dies holding a lock). While a task holds it at
    any depth (or ended holding it) no other task enters it: another task of the same
    client that tries meanwhile gets the lease only once it is given back or lost."""

    DEEPEST = 3

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.taker: dict[AsyncLease, asyncio.Task[None]] = {}
        self.reentered = 0  # entries of a held lease by its holder (nested, not new)

    async def once(self, number: int, client: AsyncClient, rng: random.Random) -> None:
        world = self.world
        lock = client.lock(NAME, ttl=world.plan.ttl, reentrant=True)
        left: list[AsyncLease] = []

        async def take(dies_holding: bool, nests: int) -> None:
            asked = world.true_now()
            try:
                lease = await lock.acquire(self._timeout(rng))
            except LockTimeout:
                return
            me = asyncio.current_task()
            assert me is not None
            self._entering(number, lease, me)
            world.granted(number, lease, asked)
            if dies_holding:
                world.say(f"client {number}: a task ends holding token {lease.token}")
                left.append(lease)
                return
            try:
                if nests:
                    await self._nest(number, lock, lease, nests, rng)
                await world.hold(number, lease, rng)
            finally:
                if self.taker.get(lease) is me:
                    del self.taker[lease]

        roll = rng.random()
        nests = rng.choice((1, 1, 2)) if roll >= 0.3 and rng.random() < 0.6 else 0
        holding = asyncio.ensure_future(take(roll < 0.3, nests))
        holding.add_done_callback(_retrieved)  # its error is raised by the await below
        try:
            if nests and rng.random() < 0.5:  # another task tries while it is held, nested
                await asyncio.sleep(rng.uniform(0.0, 0.3 * self.world.plan.ttl))
                await asyncio.ensure_future(take(False, 0))
            await holding
        finally:
            holding.cancel()  # the client was killed meanwhile: its task ends with it
        if left:  # another task of this client tries while the lease is left held
            await asyncio.ensure_future(take(False, 0))
            await asyncio.sleep(rng.uniform(0.0, self.world.plan.ttl))
            for lease in left:  # then the client gives back what the ended task left
                with contextlib.suppress(FencelockError):
                    await lease.release()
                self.taker.pop(lease, None)

    def _entering(self, number: int, lease: AsyncLease, me: asyncio.Task[None]) -> None:
        """A task got ``lease`` anew: no other task may hold, at any depth, a live lease
        of this client's on the name, nor have taken this very lease."""
        before = self.taker.get(lease)
        if before is not None and before is not me:
            self.world.violated(
                f"client {number}: a new task entered the lease (token {lease.token}) "
                "that a task which ended holding it took"
            )
        trusted = [other for _, other in self.world.trusting]  # as of the last check
        others = [
            other
            for other, task in self.taker.items()
            if task is not me and other is not lease and other.name == lease.name
        ]
        for other in others:
            if any(other is held for held in trusted) and not other._given_back:
                self.world.violated(
                    f"client {number}: a task entered {lease.name} (token {lease.token}) "
                    f"while another holds token {other.token} at depth {other.depth}"
                )
        self.taker[lease] = me

    async def _nest(
        self, number: int, lock: AsyncLock, lease: AsyncLease, deeper: int, rng: random.Random
    ) -> None:
        """The holder enters ``lease`` again (``deeper`` more levels at most), works a
        while, and leaves it in order: each inner release keeps the lease held."""
        depth, live, asked = lease.depth, is_live(lease.state), self.world.true_now()
        again = await lock.acquire(self._timeout(rng))
        if again is not lease:
            if live:  # taken once more while live: it is the same lease, deeper
                self.world.violated(
                    f"client {number}: re-entering token {lease.token} gave another lease "
                    f"(token {again.token})"
                )
            self.world.say(f"client {number}: token {lease.token} was lost: took another")
            self.world.granted(number, again, asked)
            await self.world.hold(number, again, rng)
            return
        if lease.depth != depth + 1:
            self.world.violated(
                f"client {number}: re-entering token {lease.token} left its depth at "
                f"{lease.depth}, not {depth + 1}"
            )
        self.reentered += 1
        self.world.say(f"client {number}: re-entered token {lease.token}, depth {lease.depth}")
        try:
            await asyncio.sleep(rng.uniform(0.0, 0.4 * self.world.plan.ttl))
            if deeper > 1:
                await self._nest(number, lock, lease, deeper - 1, rng)
        finally:
            with contextlib.suppress(FencelockError):
                await lease.release()  # the inner hold only
            self.world.say(f"client {number}: left token {lease.token} to depth {lease.depth}")
            if lease.depth != depth and not lease.lost:
                self.world.violated(
                    f"client {number}: leaving a nested hold of token {lease.token} left "
                    f"its depth at {lease.depth}, not {depth}"
                )
            if not lease.lost and lease._given_back:
                self.world.violated(
                    f"client {number}: leaving a nested hold gave token {lease.token} back "
                    "while its outer hold is on"
                )


class FencedWork(Workload):
    """A lock whose holders write to a resource that checks their tokens itself, through
    each of :mod:`fencelock.fencing`'s guards (in memory, SQLite's, and Redis's script
    run on a model of Redis). A holder writes while it trusts its lease, but a write may
    reach the resource late (a pause between the check and the write), after a later
    holder's: the guards refuse a token below one they accepted, and only that."""

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.fences = Fences()
        self.guards: list[tuple[str, FencingGuard]] = []
        self.refused = 0  # late writes the guards refused (each guard's, counted once)

    def _guards(self) -> list[tuple[str, FencingGuard]]:
        """Made on the first write: in the run, with any bug put back."""
        if not self.guards:
            self.guards = [("memory", MemoryGuard()), ("sqlite", SQLiteGuard(":memory:"))]
            if importlib.util.find_spec("lupa") is not None:
                from fencelock.sim.redis_model import model_redis_guard

                self.guards.append(("redis", model_redis_guard(self.world.true_now)))
        return self.guards

    async def once(self, number: int, client: AsyncClient, rng: random.Random) -> None:
        lease = await self._granted_lock(number, client, rng)
        if lease is None:
            return
        for each in range(rng.choice((1, 1, 2, 3))):
            allow_equal = each > 0 or rng.random() < 0.5  # one lease writes again
            writing = self._write(number, lease, allow_equal, random.Random(rng.random()))
            asyncio.ensure_future(writing).add_done_callback(_retrieved)
        await self.world.hold(number, lease, rng)

    async def _write(
        self, number: int, lease: AsyncLease, allow_equal: bool, rng: random.Random
    ) -> None:
        """A write at a moment of the hold, by a holder that checked its lease first and
        then (now and then) paused before the write went out."""
        ttl = self.world.plan.ttl
        await asyncio.sleep(rng.uniform(0.0, ttl))
        if not self.world.trusts(number, lease):
            return
        late = rng.random() < 0.3
        await asyncio.sleep(rng.uniform(0.2, 3.0) * ttl if late else rng.uniform(0.0, 0.005))
        write, verdicts = Write(number, NAME, lease.token, allow_equal), []
        for name, guard in self._guards():
            try:
                guard.accept(write.key, write.token, allow_equal=allow_equal)
            except StaleToken:
                verdicts.append(False)
            else:
                verdicts.append(True)
            wrong = self.fences.offered(name, write, verdicts[-1], guard.last(write.key))
            if wrong is not None:
                self.world.violated(wrong)
        self.refused += not all(verdicts)
        shown = "accepted" if all(verdicts) else "refused" if not any(verdicts) else verdicts
        self.world.say(f"client {number}: wrote with token {lease.token}: {shown}")

    def close(self) -> None:
        for _, guard in self.guards:
            if isinstance(guard, SQLiteGuard):
                guard.close()


def _retrieved(task: asyncio.Future[None]) -> None:
    """Mark ``task``'s error retrieved: else asyncio reports it when the task is garbage
    collected, at a moment the seed does not decide."""
    if not task.cancelled():
        task.exception()


WORKLOADS: dict[str, type[Workload]] = {
    "lock": LockWork,
    "semaphore": SemaphoreWork,
    "rwlock": RWLockWork,
    "election": ElectionWork,
    "latch": LatchWork,
    "barrier": BarrierWork,
    "reentrant": ReentrantWork,
    "fenced": FencedWork,
}
