"""Leases: what you hold while you hold a lock.

Everything that moves a lease's trusted time (a renewal by the renewer, an
``extend()`` by the caller) goes through one method per sync/async variant,
``_renew_on_server``, which sends one request at a time per lease and settles
its outcome in :meth:`LeaseBase._settle` under :mod:`fencelock.engine.trust`'s
rules, so the client never trusts a lease longer than the server granted it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from fencelock import clock
from fencelock.aio import TIMEOUTS, within
from fencelock.backends.base import (
    Renewal,
    async_batch_renewing,
    async_keeping,
    batch_renewing,
    keeping,
    leaves_names_taken,
)
from fencelock.backends.bounds import bounded_or_detach
from fencelock.backends.shared_loop import release_within
from fencelock.engine import timing, trust
from fencelock.engine.lease_state import LeaseEvent, LeaseState, is_live, transition
from fencelock.engine.outcomes import RenewedAsOf
from fencelock.engine.renewal import Outcome
from fencelock.engine.session import SessionNews, SharedSession
from fencelock.errors import ConfigError, FencelockError, LeaseLost
from fencelock.log import log
from fencelock.metrics import REGISTRY

if TYPE_CHECKING:
    from fencelock.backends.base import AsyncBackend, Backend

L = TypeVar("L", bound="LeaseBase")
L_contra = TypeVar("L_contra", bound="LeaseBase", contravariant=True)


class Tracker(Protocol[L_contra]):
    """Where a lease reports itself: the client's renewer and its list of holdings."""

    def track(self, lease: L_contra) -> None:
        """Keep ``lease`` renewed and listed."""

    def forget(self, lease: L_contra) -> None:
        """Stop renewing and listing ``lease`` (it was released or lost)."""


@dataclass
class _Request:
    """A renew or extend request in flight: what it asks, when it left, what it came to."""

    ttl: float
    live: bool  # False: the lease was lost or released already; nothing is sent
    started: float
    outcome: Outcome = False


@dataclass
class _Release:
    """A release: whether to send it, whether the lease was lost before, what came back."""

    send: bool
    lost_before: bool
    outcome: bool | FencelockError = False


@dataclass(frozen=True, kw_only=True)
class LeaseTerms:
    """What an acquisition granted: who, which token, for how long, trusted until when."""

    name: str
    owner: str
    token: int
    ttl: float
    renew: bool
    trusted_until: float
    max_hold: float | None = None  # seconds from the acquire request: never trusted past it
    hold_until: float = math.inf
    session: SharedSession | None = None  # the backend session it is held in, if shared
    attempts: int = 1  # tries the acquire took
    reentrant: bool = False  # its holder may take it again (counted; see ``depth``)
    entry: str = "lock"  # "read", "write" or "permit": an entry in a native shared line
    ttl_floor: float = math.inf  # the TTL a try left unanswered may still set (trust.py)


def renewed_since(started: float, renewed: Literal[True] | RenewedAsOf) -> float:
    """When a renewal sent at ``started`` took effect at the latest: its trust counts from
    then (never from its reply, which may come after the server applied it)."""
    return started if renewed is True else min(started, renewed.at)


def loss_cause(event: LeaseEvent, reason: str | None) -> str:
    """The metrics' name for why a lease was lost."""
    if event is LeaseEvent.RENEW_REJECTED:
        return "taken_over"
    if event is LeaseEvent.SESSION_ENDED:
        return "session_ended"
    if event is LeaseEvent.FORKED:
        return "forked"
    return "max_hold" if (reason or "").startswith("held longer than max_hold") else "expired"


class LeaseBase:
    """State shared by :class:`Lease` and :class:`AsyncLease`; no I/O here."""

    def __init__(self, terms: LeaseTerms) -> None:
        self.name = terms.name
        self.owner = terms.owner
        self.token = terms.token
        self.ttl = terms.ttl
        self.renews = terms.renew
        self.max_hold = terms.max_hold
        self.attempts = terms.attempts  # tries the acquire took: 1 if the lock was free
        self.reentrant = terms.reentrant
        self._since = clock.now()  # granted: its hold time is counted from here
        self._entry = terms.entry
        self.depth = 1  # acquisitions by its holder not yet released (re-entrant leases)
        self._trust = trust.Trust(
            min(terms.trusted_until, terms.hold_until),
            ttl_floor=terms.ttl_floor,
            hold_until=terms.hold_until,
        )
        self.trusted_until = self._trust.until  # read on every check
        self.lost_reason: str | None = None
        self._last_failure: str | None = None
        self._state = LeaseState.HELD
        self._given_back = False  # release() was called (a lost lease stays LOST)
        self._guard = threading.Lock()
        self._callbacks: list[Callable[[], object]] = []  # on_lost's, bound to this lease
        self._lost_event: threading.Event | None = None  # made by lost_event
        self._inherited = False  # a forked child's copy of its parent's lease
        # Set before listening: a session that ended already reports it at once.
        self._stop_listening: Callable[[], None] | None = None
        if terms.session is not None:
            stop = terms.session.listen(self._session_news)
            if is_live(self._state):
                self._stop_listening = stop

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self.name!r} token={self.token} "
            f"owner={self.owner[:8]} {self.state.value}>"
        )

    @property
    def state(self) -> LeaseState:
        """Held, at risk, lost or released (``fencelock/engine/lease_state.py``)."""
        self._notice_expiry()
        return self._state

    @property
    def lost(self) -> bool:
        """True once the lease can no longer be trusted. It never becomes False again."""
        return self.state is LeaseState.LOST

    @property
    def released(self) -> bool:
        """True once the lease was given back (before any loss)."""
        return self._state is LeaseState.RELEASED

    def remaining(self) -> float:
        """Seconds it is still safe to act on this lease (0 once lost or released)."""
        if not is_live(self.state):
            return 0.0
        return max(self.trusted_until - clock.now(), 0.0)

    def check(self) -> None:
        """Raise :class:`LeaseLost` unless the lease is held and inside its safe time.

        No request: what the lease knows (its renewals' answers and the local clock).
        Call it before each step that writes under the lock.

        :raises LeaseLost: the lease is lost (with the reason) or was released.
        """
        state = self.state
        if state is LeaseState.LOST:
            raise LeaseLost(f"lease on {self.name!r} (token {self.token}) lost: {self.lost_reason}")
        if state is LeaseState.RELEASED:
            raise LeaseLost(f"lease on {self.name!r} (token {self.token}) was released")

    @property
    def lost_event(self) -> threading.Event:
        """A :class:`threading.Event` set the moment the lease is lost.

        Hand it to worker threads: ``while not lease.lost_event.is_set(): ...``, or
        ``lease.lost_event.wait(timeout)`` between steps instead of ``time.sleep``.
        """
        with self._guard:
            if self._lost_event is None:
                self._lost_event = threading.Event()
                self._callbacks.append(self._lost_event.set)
            event = self._lost_event
        if self.lost:  # lost already (the callbacks ran before it existed), or just now
            event.set()
        return event

    def on_lost(self: L, callback: Callable[[L], object]) -> None:
        """Call ``callback(lease)`` once when the lease is lost (now, if it already is).

        Callbacks run on whichever thread notices the loss first: the renewer,
        or a caller of ``lost``/``check()``. Keep them short; exceptions are logged.
        """
        bound = functools.partial(callback, self)
        with self._guard:
            if self._state is not LeaseState.LOST:
                self._callbacks.append(bound)
                return
        self._run_callback(bound)

    def _apply(self, event: LeaseEvent, reason: str | None = None) -> None:
        """Move through the lease state table; on entering LOST, run the callbacks."""
        with self._guard:
            before = self._state
            self._state = transition(before, event)
            newly_lost = self._state is LeaseState.LOST and before is not LeaseState.LOST
            if newly_lost:
                self.lost_reason = reason or event.value
                callbacks, self._callbacks = self._callbacks, []
            stop_listening = None
            ended = is_live(before) and not is_live(self._state)
            if not is_live(self._state):  # ended: its session has nothing more to say
                stop_listening, self._stop_listening = self._stop_listening, None
        if stop_listening is not None:
            stop_listening()
        if ended:
            REGISTRY.ended(self.name, clock.now() - self._since)
        if newly_lost:
            REGISTRY.lost(self.name, loss_cause(event, self.lost_reason))
        if newly_lost:
            log.warning(
                "fencelock: lease on %r (token %d) lost: %s",
                self.name,
                self.token,
                self.lost_reason,
            )
            for callback in callbacks:
                self._run_callback(callback)

    def _expired(self, how: str) -> None:
        """The safe time ran out; ``how`` says when it was noticed."""
        if trust.held_too_long(self._trust, clock.now()):
            how = f"held longer than max_hold ({self.max_hold:g}s), so no longer renewed"
        elif self._last_failure:
            how += f" (last renewal failed: {self._last_failure})"
        self._apply(LeaseEvent.SAFE_TIME_PASSED, how)

    def _session_news(self, news: SessionNews, reason: str) -> None:
        """What the backend's session reports: suspended (at risk) or ended (lost)."""
        if news is SessionNews.ENDED:
            self._apply(LeaseEvent.SESSION_ENDED, reason)
        else:
            self._apply(LeaseEvent.RENEW_FAILED, reason)

    def _sending(self, started: float, ttl: float) -> None:
        """A renew or extend request for ``ttl`` goes out at ``started``: trust no more
        than it would leave, should the server apply it before its answer is read. With
        :meth:`_settle`, the only places the trusted time moves (one request at a time)."""
        with self._guard:
            if is_live(self._state):
                self._trust = trust.sending(self._trust, started, ttl)
                self.trusted_until = self._trust.until

    def _settle(self, started: float, ttl: float, outcome: Outcome) -> None:
        """Record what a renew or extend request sent at ``started`` came to.

        With :meth:`_sending`, the only place the trusted time moves; called with one
        request in flight.
        """
        REGISTRY.renewed(self.name, outcome is True or isinstance(outcome, RenewedAsOf))
        if outcome is True or isinstance(outcome, RenewedAsOf):
            since = renewed_since(started, outcome)
            with self._guard:
                if is_live(self._state):
                    self.ttl = ttl
                    self._trust = trust.granted(self._trust, since, ttl)
                    self.trusted_until = self._trust.until
            self._apply(LeaseEvent.RENEWED)
        elif outcome is False:
            self._apply(LeaseEvent.RENEW_REJECTED, "the server says another owner has it")
        else:
            self._unanswered(started, ttl, str(outcome))

    def _unanswered(self, started: float, ttl: float, why: str) -> None:
        with self._guard:
            self._trust = trust.unanswered(self._trust, started, ttl)
            self.trusted_until = self._trust.until
            first = self._last_failure is None and is_live(self._state)
            self._last_failure = why
        if first:
            log.warning("fencelock: renewal of %r failed (will retry): %s", self.name, why)
        self._apply(LeaseEvent.RENEW_FAILED, why)

    def _reset_after_fork(self) -> None:
        """In a forked child (called by the client's holdings, which hold every lease
        not yet released): the parent holds this lease, this process does not.

        It is lost here, without running the parent's callbacks, and neither renewed
        nor released from here.
        """
        self._guard = threading.Lock()  # a parent thread may have held it
        self._callbacks, self._inherited = [], True
        self._lost_event = None
        self._stop_listening = None  # the parent's session: its backend starts afresh
        if is_live(self._state):
            self._state = transition(self._state, LeaseEvent.FORKED)
            self.lost_reason = (
                f"held by process {os.getppid()}; a process forked from it holds none of its leases"
            )

    @contextlib.contextmanager
    def _request(self, ttl: float | None) -> Iterator[_Request]:
        """One renew or extend request, settled however it ends (the caller sends it).

        A fencelock error is its outcome; anything else (an interrupt, a cancellation)
        leaves it unanswered and propagates.
        """
        request = _Request(self.ttl if ttl is None else ttl, is_live(self.state), clock.now())
        if request.live:
            self._sending(request.started, request.ttl)
        try:
            yield request
        except FencelockError as exc:
            request.outcome = exc
        except BaseException:
            self._unanswered(request.started, request.ttl, "renewal interrupted")
            raise
        if request.live:
            self._settle(request.started, request.ttl, request.outcome)

    def _notice_expiry(self) -> None:
        if is_live(self._state) and clock.now() >= self.trusted_until:
            self._expired("its TTL ran out before it was renewed")

    def _run_callback(self, callback: Callable[[], object]) -> None:
        try:
            callback()
        except Exception:
            log.exception("fencelock: on_lost callback for %r failed", self.name)

    def _extend_ttl(self, ttl: float | None) -> float:
        new_ttl = self.ttl if ttl is None else timing.validate_ttl(ttl)
        self.check()
        return new_ttl

    def _extended(self, outcome: Outcome) -> None:
        if isinstance(outcome, FencelockError):
            raise outcome
        self.check()  # raises if the server said another owner has it

    @contextlib.contextmanager
    def _releasing(self: L, tracker: Tracker[L]) -> Iterator[_Release]:
        """One release (the caller sends it if ``send``), settled however it ends.

        Not twice; an inherited lease (a forked child's) stays the parent's.
        """
        first = self._begin_release()
        if first:
            tracker.forget(self)
        release = _Release(first and not self._inherited, self.lost)
        try:
            yield release
        except FencelockError as exc:
            release.outcome = exc
        if first:
            self._finish_release(release.outcome, release.lost_before)

    def _refuse_expire_in(self, backend: Backend | AsyncBackend, seconds: float) -> float:
        """``seconds`` checked for :meth:`Lease.expire_in`; ConfigError where a lease left
        to its TTL would end with the client anyway, and the backend keeps no name."""
        if not leaves_names_taken(backend, self.renews):
            hint = " (one taken with renew=False does)" if backend.outlives_client(False) else ""
            raise ConfigError(
                f"lease on {self.name!r}: expire_in() needs a lease that outlives its "
                f"client, and on this backend this one ends with the client's session or "
                f"connection{hint} (see docs/primitives.md)"
            )
        return timing.validate_ttl(seconds, "expire_in")

    def _left_to_expire(self: L, tracker: Tracker[L]) -> None:
        """After the extend of ``expire_in``: forgotten here, released in name only."""
        with self._releasing(tracker) as release:
            release.outcome = True  # nothing sent: the server ends it by its TTL

    def _enter_again(self) -> None:
        """Its holder took it once more (a re-entrant lock): one more release to come."""
        with self._guard:
            self.depth += 1

    def _leave_nested(self) -> bool:
        """True if this release only ends a nested hold (the outer one keeps the lease);
        raises :class:`LeaseLost` then if the lease was lost meanwhile."""
        if not self.reentrant:  # the usual release: no lock taken on its way
            return False
        with self._guard:
            nested = self.depth > 1
            if nested:
                self.depth -= 1
        if nested and self.lost:
            raise self._lost_before_release()
        return nested

    def _begin_release(self) -> bool:
        """Whether to go on releasing (not twice); the caller then stops tracking it."""
        with self._guard:
            first, self._given_back = not self._given_back, True
        return first

    def _finish_release(self, outcome: bool | FencelockError, lost_before: bool) -> None:
        """Raise :class:`LeaseLost` when the work under the lease was not protected."""
        if outcome is False and not lost_before:
            self._apply(LeaseEvent.RENEW_REJECTED, "another owner had it at release")
        self._apply(LeaseEvent.RELEASED)
        if lost_before or outcome is False:
            raise self._lost_before_release() from (
                outcome if isinstance(outcome, FencelockError) else None
            )
        if isinstance(outcome, FencelockError):
            log.warning(
                "fencelock: could not release %r (token %d): %s; it expires by its TTL",
                self.name,
                self.token,
                outcome,
            )

    def _lost_before_release(self) -> LeaseLost:
        return LeaseLost(
            f"lease on {self.name!r} (token {self.token}) was lost before release: "
            f"{self.lost_reason}; the work done under it was not protected"
        )


class Lease(LeaseBase):
    """A held lease (sync API). ``token`` is the fencing token to pass to resources."""

    def __init__(self, backend: Backend, tracker: Tracker[Lease], terms: LeaseTerms) -> None:
        super().__init__(terms)
        self._backend, self._tracker = backend, tracker
        self._one_request = threading.Lock()

    def extend(self, ttl: float | None = None) -> None:
        """Extend the lease to ``ttl`` seconds from now (default: its TTL).

        Waits for a renewal already in flight. Raises :class:`LeaseLost` if it is
        already lost or another owner has it, :class:`BackendUnavailable` if the
        server did not answer (the lease is then trusted no longer than before).

        :param ttl: seconds from now; None: the lease's own TTL.
        :raises LeaseLost: the lease is lost or released, or another owner has it.
        :raises BackendUnavailable: the server did not answer.
        :raises ConfigError: ``ttl`` is not a positive number of seconds.
        """
        self._extended(self._renew_on_server(self._extend_ttl(ttl)))
        self._tracker.track(self)

    def expire_in(self, seconds: float) -> None:
        """Leave the lease to end on the server ``seconds`` from now, and let it go here.

        One extend sets what is left of it, then the client forgets it as if released:
        the name stays taken, for everyone, until then (ShedLock's lock-at-least-for).
        Where a lease ends with its client (ZooKeeper, MySQL, PostgreSQL advisory) the
        lease ends now and a mark or row that the server's clock ends keeps the name.
        :class:`ConfigError` on etcd for a renewed lease (it lives in the client's
        session lease; one taken with ``renew=False`` outlives it); :class:`LeaseLost`
        as :meth:`extend`.
        """
        seconds = self._refuse_expire_in(self._backend, seconds)
        keeper = keeping(self._backend)
        if keeper is not None and not self._backend.outlives_client(self.renews):
            with self._releasing(self._tracker) as release:  # the release that keeps the name
                if release.send:
                    release.outcome = keeper.keep(self.name, self.owner, seconds)
            return
        self.extend(seconds)
        leave = getattr(self._backend, "leave_to_ttl", None)  # sqlite: its process may exit
        if leave is not None:
            with contextlib.suppress(FencelockError):
                leave(self.name, self.owner)
        self._left_to_expire(self._tracker)

    def release(self) -> None:
        """Give the lease back. Releasing twice is a no-op.

        Raises :class:`LeaseLost` if the lease had been lost before this call:
        the work done under it was not protected by the lock. If the server
        cannot be reached but the lease was still safe, the failure is logged
        and the lease expires by its TTL. A re-entrant lease taken ``depth``
        times is given back by the last of its ``depth`` releases.

        :raises LeaseLost: the lease had been lost before this call.
        """
        if self._leave_nested():
            return
        with self._releasing(self._tracker) as release:
            if release.send and release.lost_before:  # a courtesy: bounded
                bound = self._backend.request_bound
                release.outcome = release_within(self._backend, self.name, self.owner, bound)
            elif release.send:
                release.outcome = self._backend.release(self.name, self.owner)

    def wait_lost(self, timeout: float | None = None) -> bool:
        """Block until the lease is lost (True) or ``timeout`` passes (False)."""
        event = self.lost_event
        return event.wait(timeout) or self.lost

    def _renew_on_server(self, ttl: float | None = None) -> Outcome:
        """Renew (``ttl=None``: by the lease's TTL) or extend: one request at a time."""
        with self._one_request, self._request(ttl) as request:
            if request.live:
                request.outcome = self._backend.renew(self.name, self.owner, request.ttl)
        return request.outcome


class AsyncLease(LeaseBase):
    """A held lease (asyncio API)."""

    def __init__(
        self, backend: AsyncBackend, tracker: Tracker[AsyncLease], terms: LeaseTerms
    ) -> None:
        super().__init__(terms)
        self._backend, self._tracker = backend, tracker
        self._one_request: asyncio.Lock | None = None
        self._requests: set[asyncio.Task[Outcome]] = set()

    async def extend(self, ttl: float | None = None) -> None:
        """Extend the lease to ``ttl`` seconds from now; raises :class:`LeaseLost`.

        As :meth:`Lease.extend`. Cancelling the caller does not cancel the request.
        """
        new_ttl = self._extend_ttl(ttl)
        self._extended(await asyncio.shield(self._renewal(new_ttl)))
        self._tracker.track(self)

    async def expire_in(self, seconds: float) -> None:
        """Leave the lease to end on the server ``seconds`` from now; as
        :meth:`Lease.expire_in`."""
        seconds = self._refuse_expire_in(self._backend, seconds)
        keeper = async_keeping(self._backend)
        if keeper is not None and not self._backend.outlives_client(self.renews):
            with self._releasing(self._tracker) as release:
                if release.send:
                    release.outcome = await keeper.keep(self.name, self.owner, seconds)
            return
        await self.extend(seconds)
        leave = getattr(self._backend, "leave_to_ttl", None)  # sqlite: its process may exit
        if leave is not None:
            with contextlib.suppress(FencelockError):
                await leave(self.name, self.owner)
        self._left_to_expire(self._tracker)

    async def release(self) -> None:
        """Give the lease back; as :meth:`Lease.release`."""
        if self._leave_nested():
            return
        with self._releasing(self._tracker) as release:
            if release.send:
                sent = self._backend.release(self.name, self.owner)
                if release.lost_before:  # a courtesy: bounded
                    url = self._backend.url
                    bound = self._backend.request_bound
                    sent = bounded_or_detach(bound, sent, url, "a release", bound)
                release.outcome = await sent

    async def wait_lost(self, timeout: float | None = None) -> bool:
        """Wait until the lease is lost (True) or ``timeout`` passes (False)."""
        loop = asyncio.get_running_loop()
        noticed: asyncio.Future[bool] = loop.create_future()

        def settle() -> None:
            if not noticed.done():
                noticed.set_result(True)

        def wake(_lease: LeaseBase) -> None:
            loop.call_soon_threadsafe(settle)

        self.on_lost(wake)
        try:
            return await within(timeout, noticed)
        except TIMEOUTS:
            return self.lost

    def _renewal(self, ttl: float | None = None) -> asyncio.Task[Outcome]:
        """The request as a task of its own: it runs to its end even if nobody waits."""
        task = asyncio.get_running_loop().create_task(self._renew_on_server(ttl))
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)
        return task

    def _one_at_a_time(self) -> contextlib.AbstractAsyncContextManager[object]:
        """What a renew or extend request holds while it is in flight: one at a time."""
        if self._one_request is None:
            self._one_request = asyncio.Lock()
        return self._one_request

    async def _renew_on_server(self, ttl: float | None) -> Outcome:
        async with self._one_at_a_time():
            with self._request(ttl) as request:
                if request.live:
                    request.outcome = await self._backend.renew(self.name, self.owner, request.ttl)
        return request.outcome


def renew_together(leases: Sequence[Lease]) -> dict[Lease, Outcome]:
    """Renew leases of one client in one request to its backend (one that renews in
    batches), each settled in its own one place, as :meth:`Lease._renew_on_server`
    settles one. A lease with a request of its own in flight (an ``extend``) is renewed
    after it, alone."""
    backend = batch_renewing(leases[0]._backend)
    assert backend is not None, "the renewer batches only for a backend that can"
    taken = [lease for lease in leases if lease._one_request.acquire(blocking=False)]
    try:
        with _batch(taken) as batch:
            if batch.requests:
                batch.outcomes = backend.renew_many(batch.renewals)
    finally:
        for lease in taken:
            lease._one_request.release()
    settled: dict[Lease, Outcome] = batch.settled
    for lease in leases:
        if lease not in settled:
            settled[lease] = lease._renew_on_server()
    return settled


async def arenew_together(leases: Sequence[AsyncLease]) -> dict[AsyncLease, Outcome]:
    """:func:`renew_together` for the asyncio client."""
    backend = async_batch_renewing(leases[0]._backend)
    assert backend is not None, "the renewer batches only for a backend that can"
    taken, locks = [], []
    for lease in leases:  # no await between the look and the take: no task comes between
        lock = lease._one_request = lease._one_request or asyncio.Lock()
        if not lock.locked():
            await lock.acquire()
            taken.append(lease)
            locks.append(lock)
    try:
        with _batch(taken) as batch:
            if batch.requests:
                batch.outcomes = await backend.renew_many(batch.renewals)
    finally:
        for lock in locks:
            lock.release()
    settled: dict[AsyncLease, Outcome] = batch.settled
    for lease in leases:
        if lease not in settled:
            settled[lease] = await lease._renewal()
    return settled


@dataclass
class _Batch:
    """One request renewing many leases: each live lease's part, and what came back."""

    requests: list[tuple[LeaseBase, _Request]]
    outcomes: Sequence[Outcome] = ()
    settled: dict[Any, Outcome] = field(default_factory=dict)

    @property
    def renewals(self) -> list[Renewal]:
        return [(lease.name, lease.owner, request.ttl) for lease, request in self.requests]


@contextlib.contextmanager
def _batch(leases: Sequence[LeaseBase]) -> Iterator[_Batch]:
    """A batch of renewals (the caller sends it, holding each lease's one request),
    settled however it ends, each in its lease's one place (:meth:`LeaseBase._settle`),
    as :meth:`LeaseBase._request` settles one; a lease not live is not sent (False)."""
    started = clock.now()
    live = [(lease, _Request(lease.ttl, True, started)) for lease in leases if is_live(lease.state)]
    for lease, request in live:
        lease._sending(request.started, request.ttl)
    batch = _Batch(live)
    try:
        yield batch
    except FencelockError as exc:
        batch.outcomes = [exc] * len(live)
    except BaseException:
        for lease, request in live:
            lease._unanswered(request.started, request.ttl, "renewal interrupted")
        raise
    batch.settled = dict.fromkeys(leases, False)
    for (lease, request), outcome in zip(live, batch.outcomes, strict=True):
        lease._settle(request.started, request.ttl, outcome)
        batch.settled[lease] = outcome


__all__ = ["AsyncLease", "Lease", "LeaseBase", "LeaseTerms", "arenew_together", "renew_together"]
