"""Leader election on the lock: campaign, resign, observe, the term as a fencing token.

The leader is whoever holds the lease on ``name``; its term is that lease's token, so a
resource that checks tokens rejects a deposed leader's writes. Waiting to lead is the
lock's notified wait. The leader's proposal value (``host:port``, a node id) is held as
a second lease whose name carries the value (``NAME.leader/VALUE``, base32), so every
backend that can hold a lock can tell any observer who leads and with what value, and
the value ends with the leadership. A new leader first evicts every announcement left
(only a leader announces: any other is a deposed leader's), and an observer that sees
more than one (for that moment) reports no value. The name carries no term: a backend
keeps a record for every name ever used, and names are bounded by the values used.
Observing polls (see :meth:`Election.observe`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Generic, ParamSpec, TypeVar

from fencelock import clock
from fencelock.backends.base import LockInfo
from fencelock.engine.names import MAX_NAME_LENGTH
from fencelock.engine.timing import validate_interval
from fencelock.errors import ConfigError, FencelockError
from fencelock.holder import Holder
from fencelock.lease import AsyncLease, Lease, LeaseBase
from fencelock.primitives.client_like import AsyncClientLike, ClientLike
from fencelock.primitives.named import Named
from fencelock.stopping import TaskStopper, ThreadStopper

L = TypeVar("L", bound=LeaseBase)
P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Leader:
    """Who leads: the term (the leader's fencing token), its value, its owner id."""

    term: int
    value: str | None  # None: no value proposed, or not yet announced
    owner: str | None
    remaining: float | None


def encode_value(value: str) -> str:
    """``value`` as a name part (base32, unpadded): any text fits a lock name."""
    return base64.b32encode(value.encode()).decode().rstrip("=")


def decode_value(text: str) -> str | None:
    """An announced value from its name part; None if it is not one."""
    try:
        return base64.b32decode(text + "=" * (-len(text) % 8)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


class _Changes:
    """What an observer has told so far, and whether a look is news. A new term seen
    without a value is held back for a moment (a third of the TTL, at most 1 s): a
    leader announces its value right after it wins, and an observer that looked between
    the two would tell the term twice, the first time without its value."""

    def __init__(self, ttl: float) -> None:
        self._told: tuple[int, str | None] | bool | None = False  # False: nothing yet
        self._grace = min(ttl / 3, 1.0)
        self._unnamed_since: tuple[int, float] | None = None  # a new term seen bare, when

    def news(self, leader: Leader | None, now: float) -> bool:
        seen = None if leader is None else (leader.term, leader.value)
        if seen == self._told:
            return False
        if seen is not None and seen[1] is None and self._told is not False:
            term = seen[0]
            if self._unnamed_since is None or self._unnamed_since[0] != term:
                self._unnamed_since = (term, now)
            if now - self._unnamed_since[1] < self._grace:
                return False  # its value may be on its way
        self._told = seen
        return True


@contextlib.contextmanager
def _resigning(
    stopper: TaskStopper | ThreadStopper, failure: BaseException | None
) -> Iterator[None]:
    """Around the resignation that ends :meth:`Election.run` (either variant), after
    ``func`` returned or raised ``failure``: a failed resignation is heard, unless
    something else is; a run stopped by the leadership's loss raises :class:`LeaseLost`."""
    stopped = stopper.leaving(failure)
    try:
        yield
    except FencelockError:
        if stopped is None and failure is None:
            raise
    if stopped is not None:
        raise stopped from failure


class _ElectionBase(Named):
    """The names and what an inspection of them says; no I/O here."""

    @property
    def _announcements(self) -> str:
        return f"{self.name}.leader/"

    def _announcement(self, value: str) -> str:
        prefix = self._announcements
        name = prefix + encode_value(value)
        if len(name) > MAX_NAME_LENGTH:
            room = (MAX_NAME_LENGTH - len(prefix)) * 5 // 8
            raise ConfigError(
                f"election {self.name!r}: a value of {len(value.encode())} bytes is too long "
                f"to announce; at most {room} bytes (UTF-8) fit beside this name"
            )
        return name

    def _check_value(self, value: str | None) -> None:
        if value is not None:
            if not isinstance(value, str):
                raise ConfigError(f"election value must be a str, not {type(value).__name__}")
            self._announcement(value)

    def _leader(self, info: LockInfo | None, announced: list[LockInfo]) -> Leader | None:
        if info is None or not info.held:
            return None
        values = self._values(announced)
        value = values[0] if len(values) == 1 else None  # none yet, or a deposed one's too
        return Leader(info.token, value, info.owner, info.remaining)

    def _values(self, announced: list[LockInfo]) -> list[str]:
        prefix = self._announcements
        values = [
            decode_value(each.name[len(prefix) :])
            for each in announced
            if each.held and each.name.startswith(prefix)
        ]
        return [v for v in values if v is not None]

    def _stale(self, announced: list[LockInfo]) -> list[str]:
        """The announcements to evict when this client has just won."""
        return [each.name for each in announced if each.held]


class _LeadershipBase(Generic[L]):
    """This client leads: the lease on the election's name, and its announcement."""

    def __init__(self, lease: L, announcement: L | None, value: str | None) -> None:
        self.lease = lease
        self.value = value
        self._announcement = announcement

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.lease.name!r} term={self.term}>"

    @property
    def term(self) -> int:
        """The leader's term: its fencing token, greater than every earlier leader's."""
        return self.lease.token

    @property
    def lost(self) -> bool:
        """True once the leadership can no longer be trusted (never False again)."""
        return self.lease.lost

    def check(self) -> None:
        """Raise :class:`LeaseLost` unless this client still leads."""
        self.lease.check()


class Leadership(_LeadershipBase[Lease]):
    """Held leadership (sync API): ``term``, ``check()``, ``resign()``."""

    def resign(self) -> None:
        """Step down: the value goes, then the lease (the next campaigner leads)."""
        if self._announcement is not None:
            with contextlib.suppress(FencelockError):  # it ends with its TTL; the
                self._announcement.release()  # leadership's own release says more
        self.lease.release()

    def wait_lost(self, timeout: float | None = None) -> bool:
        """Block until the leadership is lost (True) or ``timeout`` passes (False)."""
        return self.lease.wait_lost(timeout)


class AsyncLeadership(_LeadershipBase[AsyncLease]):
    """Held leadership (asyncio API)."""

    async def resign(self) -> None:
        """Step down; as :meth:`Leadership.resign`."""
        if self._announcement is not None:
            with contextlib.suppress(FencelockError):
                await self._announcement.release()
        await self.lease.release()

    async def wait_lost(self, timeout: float | None = None) -> bool:
        """Wait until the leadership is lost (True) or ``timeout`` passes (False)."""
        return await self.lease.wait_lost(timeout)


class Election(_ElectionBase):
    """A named election (sync API): ``campaign``, ``leader``, ``observe``."""

    def __init__(self, client: ClientLike, name: str, ttl: float) -> None:
        super().__init__(name, ttl)
        self._client = client

    def campaign(self, value: str | None = None, timeout: float | None = None) -> Leadership:
        """Wait to lead (``timeout=None``: as long as it takes; :class:`LockTimeout`
        after ``timeout``), then announce ``value``; the :class:`Leadership`.
        :class:`LeaseLost` if the leadership is lost before it is announced (a deposed
        campaigner evicts nobody: the announcements it finds may be its successor's)."""
        self._check_value(value)
        lease = self._client.lock(self.name, ttl=self.ttl).acquire(timeout)
        announcement = None
        try:
            for stale in self._stale(self._client.list(self._announcements)):
                lease.check()  # deposed meanwhile: the announcement may be its successor's
                self._client.evict(stale)  # a deposed leader's: only a leader announces
            if value is not None:
                lease.check()
                announce = self._client.lock(self._announcement(value), ttl=self.ttl)
                announcement = announce.acquire(timeout=self.ttl)
        except BaseException:
            lease.release()
            raise
        return Leadership(lease, announcement, value)

    def run(self, func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """Campaign (as long as it takes), call ``func(*args, **kwargs)`` as the leader,
        and resign when it returns or raises; its return value. Leadership lost while
        it runs stops it, as ``stop_on_loss`` does (:mod:`fencelock.stopping`), and
        :class:`LeaseLost` is raised (kazoo's ``Election.run``)."""
        leadership = self.campaign()
        stopper = ThreadStopper(leadership.lease)
        failure: BaseException | None = None
        try:
            return func(*args, **kwargs)
        except BaseException as exc:
            failure = exc
            raise
        finally:
            with _resigning(stopper, failure):
                leadership.resign()

    def leader(self) -> Leader | None:
        """Who leads now, with its term and value; None if nobody does."""
        info = self._client.inspect(self.name)
        if info is None or not info.held:
            return None
        return self._leader(info, self._client.list(self._announcements))

    def candidates(self) -> list[Holder]:
        """The leader (first, if anyone leads), then the campaigners waiting to lead, in
        line order: the contenders of the lock it campaigns with (:meth:`Lock.contenders`,
        the leader alone on a backend that keeps no line of waiters)."""
        return self._client.lock(self.name, ttl=self.ttl).contenders()

    def observe(self, interval: float | None = None) -> Iterator[Leader | None]:
        """The leader now, then each change (a new term or value, or nobody), looking
        every ``interval`` seconds (default: a third of the TTL, at most 1 s)."""
        every = min(self.ttl / 3, 1.0) if interval is None else validate_interval(interval)
        changes = _Changes(self.ttl)
        while True:
            leader = self.leader()
            if changes.news(leader, clock.now()):
                yield leader
            time.sleep(every)


class AsyncElection(_ElectionBase):
    """A named election for asyncio."""

    def __init__(self, client: AsyncClientLike, name: str, ttl: float) -> None:
        super().__init__(name, ttl)
        self._client = client

    async def campaign(
        self, value: str | None = None, timeout: float | None = None
    ) -> AsyncLeadership:
        """Wait to lead, then announce ``value``; as :meth:`Election.campaign`."""
        self._check_value(value)
        lease = await self._client.lock(self.name, ttl=self.ttl).acquire(timeout)
        announcement = None
        try:
            for stale in self._stale(await self._client.list(self._announcements)):
                self._still_leads(lease)  # as in Election.campaign
                await self._client.evict(stale)
            if value is not None:
                self._still_leads(lease)
                announce = self._client.lock(self._announcement(value), ttl=self.ttl)
                announcement = await announce.acquire(timeout=self.ttl)
        except BaseException:
            await lease.release()
            raise
        return AsyncLeadership(lease, announcement, value)

    def _still_leads(self, lease: AsyncLease) -> None:
        """Raise :class:`LeaseLost` if ``lease`` ended: a campaigner deposed meanwhile
        must not evict or announce (the announcements may be its successor's)."""
        lease.check()

    async def run(self, func: Callable[P, Awaitable[R]], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """Campaign, await ``func(*args, **kwargs)`` as the leader, resign; as
        :meth:`Election.run` (a loss cancels it, and :class:`LeaseLost` is raised)."""
        leadership = await self.campaign()
        stopper = TaskStopper(leadership.lease)
        failure: BaseException | None = None
        try:
            return await func(*args, **kwargs)
        except BaseException as exc:
            failure = exc
            raise
        finally:
            with _resigning(stopper, failure):
                await leadership.resign()

    async def leader(self) -> Leader | None:
        """Who leads now; as :meth:`Election.leader`."""
        info = await self._client.inspect(self.name)
        if info is None or not info.held:
            return None
        return self._leader(info, await self._client.list(self._announcements))

    async def candidates(self) -> list[Holder]:
        """The leader, then the campaigners waiting; as :meth:`Election.candidates`."""
        return await self._client.lock(self.name, ttl=self.ttl).contenders()

    async def observe(self, interval: float | None = None) -> AsyncIterator[Leader | None]:
        """The leader now, then each change; as :meth:`Election.observe`."""
        every = min(self.ttl / 3, 1.0) if interval is None else validate_interval(interval)
        changes = _Changes(self.ttl)
        while True:
            leader = await self.leader()
            if changes.news(leader, clock.now()):
                yield leader
            await asyncio.sleep(every)
