"""The count-down latch's flows, without I/O, over leases left on the server.

A latch on ``NAME`` is ``NAME.latch/closed`` plus one lease per count,
``NAME.latch/c/<k>``, all *left to expire* in a year (:meth:`Lease.expire_in`), so they
outlive the client that armed the latch and any that crashes. Counting down evicts one
count lease; the one that evicts the last also evicts ``closed``. A waiter waits for
``closed`` to be released as any waiter waits for a lock (notified, no polling), and
gives it straight back. Only waiters ever take ``closed`` besides the armer, and
nobody but the armer takes a count, so counting down never removes a waiter's hold.

**Crash-safe at every step.** Arming takes ``closed`` *briefly* (a TTL that ends soon
unless it is left for a year), then each count (left for a year at once), and leaves
``closed`` for a year last: an armer that dies midway leaves a brief ``closed`` that
runs out by itself. So every state a crash can leave is one a later call finishes or
rolls back (:func:`_repair`, at the start of every flow): counts with no ``closed``
(an arming that died) are evicted; a lasting ``closed`` with no count left (a count-down
that died between its two evictions) is evicted, opening the latch as it would have.
An arming that has taken ``closed`` evicts the counts still there (an arming's that lost
its ``closed`` after the repair looked) and gives up if a count is refused it; every
eviction of what a call saw ends that holder only (its owner), never one since.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from fencelock.engine import operations
from fencelock.engine.deadline import deadline_after, time_left
from fencelock.engine.operations import AwaitRelease, Holding, ListHeld
from fencelock.errors import ConfigError

ARM_WAIT = 2.0  # seconds to wait for a waiter that holds ``closed`` for a moment
ARM_SLICE = 0.1  # seconds of that wait between two looks at whether another armed it
BRIEF = 10.0  # the TTL of what arming takes before it is left for a year
BRIEF_PER_COUNT = 0.1  # ``closed`` is taken briefly for this much more per count


@dataclass(frozen=True)
class LatchNames:
    name: str

    @property
    def closed(self) -> str:
        return f"{self.name}.latch/closed"

    @property
    def counts(self) -> str:
        return f"{self.name}.latch/c/"

    def count(self, k: int) -> str:
        return f"{self.counts}{k}"


@dataclass(frozen=True)
class Take:
    """Take ``name`` within ``timeout`` for ``ttl`` seconds (no renewal): brief, until
    it is left (:class:`Leave`). Granted if taken."""

    name: str
    timeout: float
    ttl: float


@dataclass(frozen=True)
class Leave:
    """Leave the lease taken on ``name`` to last a year; nothing if none was taken."""

    name: str


@dataclass(frozen=True)
class Evict:
    """End the lease on ``name``: ``owner``'s only, if given (one seen earlier, which a
    new holder's is not), else whoever's. Granted if one was ended."""

    name: str
    owner: str | None = None


@dataclass(frozen=True)
class Held:
    """Whether ``name`` is held now, and whether it was left to last (a year)."""

    name: str


@dataclass(frozen=True)
class Reply(operations.Reply):
    """What a step came to; for :class:`Held`, also whether the name was left to last,
    and who holds it."""

    lasting: bool = False
    owner: str | None = None


Op = ListHeld | Take | Leave | Evict | Held | AwaitRelease
LatchFlow = Generator[Op, Reply, bool]


def validate_count(count: object) -> int:
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ConfigError(f"a latch's count must be an int >= 1, got {count!r}")
    if count > 10_000:
        raise ConfigError(f"a latch's count is at most 10000 (one lease each), got {count}")
    return count


def _repair(names: LatchNames) -> Generator[Op, Reply, tuple[Reply, tuple[str, ...]]]:
    """Finish or roll back what a crashed call left: ``closed``'s state and the counts."""
    listed = (yield ListHeld(names.counts)).held
    counts = tuple(h.name for h in listed)
    closed = yield Held(names.closed)
    if counts and not closed.granted:  # an arming that died: its brief ``closed`` ran out
        # Only the counts listed: a later arming may have taken ``closed`` and a count of
        # the same name since, which is not ours to end.
        yield from _evict(listed)
        counts = ()
    elif closed.lasting and not counts:
        # A count-down that died before it opened the latch, or an arming that finished
        # between the two reads: ``closed`` left lasting means every count was taken
        # before it, so counts listed now, after it, tell them apart.
        counts = yield from counts_now(names)
        if not counts:
            yield Evict(names.closed, closed.owner)
            closed = Reply(closed.now, granted=False)
    return closed, counts


def counts_now(names: LatchNames) -> Generator[Op, Reply, tuple[str, ...]]:
    """The counts held now (listed afresh, not taken from a list read earlier)."""
    return (yield ListHeld(names.counts)).names


def _evict(listed: tuple[Holding, ...]) -> Generator[Op, Reply, None]:
    for held in listed:
        yield Evict(held.name, held.owner)


def set_count_flow(names: LatchNames, count: int) -> LatchFlow:
    """Arm the latch with ``count`` if it is open; False if it is counting already, or
    another client is arming it."""
    ttl = BRIEF + BRIEF_PER_COUNT * count
    waited = 0.0
    while True:
        closed, counts = yield from _repair(names)
        if closed.lasting and counts:
            return False  # counting already
        if waited >= ARM_WAIT:
            return False  # another client is arming it, or holds it too long to tell
        # In slices: a client that arms it meanwhile keeps ``closed`` for good, and a
        # whole ARM_WAIT spent waiting for it would only end in the same False.
        reply = yield Take(names.closed, ARM_SLICE, ttl)
        if reply.granted:
            break
        waited += ARM_SLICE
    # ``closed`` is ours, briefly: a count still there is an arming's that lost its own
    # (it died, or failed, after the repair above looked), and must not pass for ours.
    yield from _evict((yield ListHeld(names.counts)).held)
    for k in range(count):
        taken = yield Take(names.count(k), ARM_WAIT, BRIEF)
        if not taken.granted:
            # Another arming whose ``closed`` ran out holds it: give up; what we left is
            # under no lasting ``closed``, which the next call's repair evicts.
            return False
        yield Leave(names.count(k))
    yield Leave(names.closed)
    return True


def count_down_flow(names: LatchNames) -> LatchFlow:
    """Take one count away; open the latch if it was the last. False if it was open."""
    closed, counts = yield from _repair(names)
    if not closed.lasting:
        return False  # open (or still being armed)
    for name in counts:
        evicted = yield Evict(name)
        if evicted.granted:
            left = yield ListHeld(names.counts)
            if not left.names:
                yield Evict(names.closed, closed.owner)
            return True
    return False


def wait_flow(names: LatchNames, timeout: float | None, now: float) -> LatchFlow:
    """True once the latch is open; False if ``timeout`` passed first."""
    closed, _ = yield from _repair(names)
    if not closed.granted:
        return True
    reply = yield AwaitRelease(names.closed, time_left(deadline_after(now, timeout), closed.now))
    return reply.granted
