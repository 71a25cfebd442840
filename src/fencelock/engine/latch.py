"""The count-down latch's flows, without I/O, over leases left on the server.

A latch on ``NAME`` is ``NAME.latch/closed`` plus one lease per count,
``NAME.latch/c/<k>``, all *left to expire* in a year (:meth:`Lease.expire_in`), so they
outlive the client that armed the latch and any that crashes. Counting down evicts one
count lease; the one that evicts the last also evicts ``closed``. A waiter waits for
``closed`` to be released as any waiter waits for a lock (notified, no polling), and
gives it straight back. Only waiters ever take ``closed`` besides the armer, and
nobody but the armer takes a count, so counting down never removes a waiter's hold.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from fencelock.errors import ConfigError

ARM_WAIT = 2.0  # seconds to wait for a waiter that holds ``closed`` for a moment


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
class Count:
    """The count leases held now."""

    prefix: str


@dataclass(frozen=True)
class Arm:
    """Take ``name`` within ``timeout`` and leave it on the server (no renewal)."""

    name: str
    timeout: float


@dataclass(frozen=True)
class Evict:
    """End the lease on ``name``, whoever holds it; granted if one was ended."""

    name: str


@dataclass(frozen=True)
class Held:
    """Whether ``name`` is held now."""

    name: str


@dataclass(frozen=True)
class Await:
    """Wait (at most ``timeout``; None: as long as it takes) for ``name`` to be let go;
    take it and give it straight back. Granted if it was let go in time."""

    name: str
    timeout: float | None


@dataclass(frozen=True)
class Reply:
    now: float
    granted: bool = True
    names: tuple[str, ...] = ()


Op = Count | Arm | Evict | Held | Await
LatchFlow = Generator[Op, Reply, bool]


def validate_count(count: object) -> int:
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ConfigError(f"a latch's count must be an int >= 1, got {count!r}")
    if count > 10_000:
        raise ConfigError(f"a latch's count is at most 10000 (one lease each), got {count}")
    return count


def set_count_flow(names: LatchNames, count: int) -> LatchFlow:
    """Arm the latch with ``count`` if it is open; False if it is counting already."""
    reply = yield Count(names.counts)
    if reply.names:
        return False
    reply = yield Arm(names.closed, ARM_WAIT)
    if not reply.granted:
        return False  # another client armed it first
    for k in range(count):
        yield Arm(names.count(k), ARM_WAIT)  # held already: it counts all the same
    return True


def count_down_flow(names: LatchNames) -> LatchFlow:
    """Take one count away; open the latch if it was the last. False if it was open."""
    reply = yield Count(names.counts)
    for name in reply.names:
        evicted = yield Evict(name)
        if evicted.granted:
            left = yield Count(names.counts)
            if not left.names:
                yield Evict(names.closed)
            return True
    return False


def wait_flow(names: LatchNames, timeout: float | None, now: float) -> LatchFlow:
    """True once the latch is open; False if ``timeout`` passed first."""
    reply = yield Held(names.closed)
    if not reply.granted:
        return True
    left = None if timeout is None else max(0.0, now + timeout - reply.now)
    reply = yield Await(names.closed, left)
    return reply.granted
