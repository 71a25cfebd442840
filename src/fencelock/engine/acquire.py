"""The acquire loop, written once as a sans-I/O generator.

The flow yields the operations it needs (:class:`TryAcquire`, :class:`Wait`) and
receives their results (:class:`Tried`, :class:`Waited`), which carry the time
the driver read from its clock. A sync driver and an asyncio driver run it; the
policy (deadline, when to wake, jitter) lives only here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from dataclasses import dataclass

from fencelock.engine.backoff import Backoff
from fencelock.engine.deadline import deadline_after, time_left
from fencelock.engine.outcomes import Acquired, AttemptResult, Busy
from fencelock.engine.session import SharedSession
from fencelock.engine.timing import trusted_until

# When the holder's remaining TTL is unknown, waits back off between these bounds.
MIN_BACKOFF = 0.005
MAX_BACKOFF = 0.5
# Retries through an outage back off up to this (a restart takes seconds).
MAX_OUTAGE_BACKOFF = 1.0
# Both with equal jitter: a wait is never under half its window (these retries poll).
BUSY = Backoff(MIN_BACKOFF, MAX_BACKOFF, spread=0.5)
OUTAGE = Backoff(MIN_BACKOFF, MAX_OUTAGE_BACKOFF, spread=0.5)
# Waiters woken by an expiry spread over this window so they do not all collide.
EXPIRY_JITTER = 0.005
# A queued waiter (``Busy(notified=True)``) looks again after this long without a
# notice: a bound against a lost notification, not a polling interval.
NOTICE_LIVENESS = 5.0


@dataclass(frozen=True)
class TryAcquire:
    """Ask the backend to take the lease once (and enqueue us if it is busy)."""


@dataclass(frozen=True)
class Wait:
    """Block until the lease may have become free, or ``timeout`` seconds pass."""

    timeout: float


@dataclass(frozen=True)
class Tried:
    result: AttemptResult
    started: float
    finished: float


@dataclass(frozen=True)
class Waited:
    now: float


@dataclass(frozen=True)
class Unreachable:
    """The try (or the wait) failed: the server could not be reached (``error``)."""

    error: Exception
    started: float
    finished: float


@dataclass(frozen=True, kw_only=True)
class Granted:
    token: int
    started: float
    trusted_until: float
    owner: str | None = None
    session: SharedSession | None = None
    attempts: int = 1  # tries it took: 1 uncontended; each wake-up adds one
    # The shortest TTL a try of this acquisition left unanswered may still set, should it
    # land late (a backend that grants its holder's own try again: PostgreSQL's lease
    # table): as an unanswered renewal's, it bounds every later grant (engine/trust.py).
    ttl_floor: float = math.inf


@dataclass(frozen=True)
class GaveUp:
    waited: float
    attempts: int


Operation = TryAcquire | Wait
Reply = Tried | Waited | Unreachable
AcquireFlow = Generator[Operation, Reply, Granted | GaveUp]


def ttl_floor(ttl: float, *, unanswered: bool) -> float:
    """A grant's :attr:`Granted.ttl_floor`: ``ttl`` when one of its acquisition's tries
    went unanswered (it may still land, after an extend to a shorter TTL), else none."""
    return ttl if unanswered else math.inf


def acquire_flow(
    ttl: float, timeout: float | None, now: float, random: Callable[[], float]
) -> AcquireFlow:
    """Try, then wait for a release or the holder's expiry, until granted or the deadline.

    ``timeout=None`` waits for as long as it takes; ``0`` tries exactly once.
    ``random`` returns floats in [0, 1) and spreads retries (jitter).
    """
    deadline = deadline_after(now, timeout)
    retry = 0  # the backoff's step: reset when a notice or the holder's TTL says when
    attempts = 0
    reached = False  # a try was answered: the server exists and takes us
    unanswered = False  # a try got no answer: it may still land
    while True:
        tried = yield TryAcquire()
        if isinstance(tried, Unreachable):
            unanswered = True
            # An outage (a restart, a failover) while we wait: within the caller's time,
            # keep waiting through it, with the one backoff. A server never reached
            # (a wrong URL) is said at once.
            remaining = time_left(deadline, tried.finished)
            if not reached or (remaining is not None and remaining <= 0):
                raise tried.error
            pause, retry = OUTAGE.delay(retry, random), retry + 1
            yield Wait(pause if remaining is None else min(pause, remaining))
            continue
        assert isinstance(tried, Tried)
        reached = True
        attempts += 1
        if isinstance(tried.result, Acquired):
            result = tried.result
            since = tried.started if result.as_of is None else min(tried.started, result.as_of)
            granted_until = trusted_until(since, ttl)
            return Granted(
                token=result.token,
                started=tried.started,
                trusted_until=granted_until,
                owner=result.owner,
                session=result.session,
                attempts=attempts,
                ttl_floor=ttl_floor(ttl, unanswered=unanswered),
            )
        remaining = time_left(deadline, tried.finished)
        if remaining is not None and remaining <= 0:
            return GaveUp(tried.finished - now, attempts)
        pause, retry = next_wait(tried.result, retry, random)
        if remaining is not None:
            pause = min(pause, remaining)
        yield Wait(pause)


def next_wait(busy: Busy, retry: int, random: Callable[[], float]) -> tuple[float, int]:
    """How long to wait after ``busy`` (at step ``retry`` of the backoff), and the step
    to use next time.

    A queued waiter waits for its notice; with a known holder TTL we wait exactly
    until it runs out (a release wakes us earlier); without one, the :data:`BUSY`
    backoff (equal jitter).
    """
    if busy.notified:
        return NOTICE_LIVENESS, 0
    if busy.retry_after is not None:
        return max(busy.retry_after, 0.0) + EXPIRY_JITTER * random(), 0
    return BUSY.delay(retry, random), retry + 1
