"""Group membership on the lock: members kept alive by a lease, the live members, their
changes, and :func:`assign` to split work among them (tooz's and Curator's groups).

A member is two leases, as an election's leader is: ``NAME.members/MEMBER`` (one live
holder per member id: a second ``join`` of the id waits, as for any lock) and
``NAME.data/MEMBER.DATA``, which carries the member's data (both parts base32, so any
text fits a name). A member is listed once both are held, and stops being listed the
moment either ends: it left, its process died (its leases end with their TTL), or its
lease was lost. A joiner first evicts any data lease its id left behind (only the holder
of the member lease announces data). Watching looks again as the server pushes news of
the group's names (etcd's watch, ZooKeeper's), and polls elsewhere, as
:meth:`Election.observe` does.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Generic, TypeVar

from fencelock.backends.base import LockInfo, async_name_watching, name_watching
from fencelock.engine.names import MAX_NAME_LENGTH
from fencelock.engine.timing import validate_interval
from fencelock.errors import ConfigError, FencelockError, LockTimeout
from fencelock.lease import AsyncLease, Lease, LeaseBase
from fencelock.primitives.client_like import AsyncClientLike, ClientLike
from fencelock.primitives.election import decode_value, encode_value
from fencelock.primitives.named import Named

L = TypeVar("L", bound=LeaseBase)
T = TypeVar("T")
NO_DATA = "0"  # not a base32 letter: a member that joined without data
# Where the server pushes changes, a watcher still looks this often (in seconds): a
# change whose news a broken watch lost is seen within it.
PUSHED_RELOOK = 30.0


@dataclass(frozen=True)
class Member:
    """A live member: its id, its data, and its membership lease's token."""

    name: str
    data: str | None
    token: int
    remaining: float | None


@dataclass(frozen=True)
class GroupChange:
    """The members now, and who joined or left since the last change told."""

    members: tuple[Member, ...]
    joined: tuple[str, ...]
    left: tuple[str, ...]


def assign(items: Iterable[T], members: Iterable[str | Member]) -> dict[str, list[T]]:
    """Split ``items`` among ``members`` by rendezvous hashing: each item goes to the member
    whose hash with it is highest, so a member that joins or leaves moves only its own
    share. Every member is a key (possibly with no items); items keep their order.
    An item is hashed by ``str(item)``."""
    names = sorted({m.name if isinstance(m, Member) else m for m in members})
    if not names:
        raise ConfigError("assign() needs at least one member to give the items to")
    shares: dict[str, list[T]] = {name: [] for name in names}
    for item in items:
        key = str(item).encode()
        owner = max(names, key=lambda name: _weight(name, key))
        shares[owner].append(item)
    return shares


def _weight(member: str, item: bytes) -> bytes:
    return hashlib.blake2b(item, key=member.encode()[:64], digest_size=8).digest()


class _GroupBase(Named):
    """The names, and what a listing of them says; no I/O here."""

    @property
    def _members(self) -> str:
        return f"{self.name}.members/"

    @property
    def _data(self) -> str:
        return f"{self.name}.data/"

    @property
    def _prefixes(self) -> tuple[str, str]:
        return self._members, self._data

    def _every(self, interval: float | None, pushed: bool) -> float:
        """How long a watcher waits at most between two looks."""
        if interval is not None:
            return validate_interval(interval)
        return PUSHED_RELOOK if pushed else min(self.ttl / 3, 1.0)

    def _names(self, member: str, data: str | None) -> tuple[str, str, str]:
        """The member's lease, the prefix of its data leases, and its data lease."""
        if not isinstance(member, str) or not member:
            raise ConfigError(f"group {self.name!r}: a member is a non-empty str, got {member!r}")
        if data is not None and not isinstance(data, str):
            raise ConfigError(f"group {self.name!r}: data must be a str, not {type(data)}")
        tagged = encode_value(member)
        own_data = f"{self._data}{tagged}."
        announced = own_data + (encode_value(data) if data else NO_DATA)
        if max(len(announced), len(self._members + tagged)) > MAX_NAME_LENGTH:
            room = (MAX_NAME_LENGTH - len(self._data) - 1) * 5 // 8
            raise ConfigError(
                f"group {self.name!r}: member and data take {len(member.encode())} + "
                f"{len((data or '').encode())} bytes; at most {room} bytes together (UTF-8) "
                "fit beside this name"
            )
        return self._members + tagged, own_data, announced

    def _live(self, members: list[LockInfo], data: list[LockInfo]) -> tuple[Member, ...]:
        said: dict[str, list[str | None]] = {}
        for each in data:
            tagged, _, value = each.name[len(self._data) :].partition(".")
            if each.held:
                said.setdefault(tagged, []).append(
                    None if value == NO_DATA else decode_value(value)
                )
        live = []
        for each in members:
            tagged = each.name[len(self._members) :]
            member = decode_value(tagged)
            values = said.get(tagged, [])
            if each.held and member is not None and len(values) == 1:  # announced, once
                live.append(Member(member, values[0], each.token, each.remaining))
        return tuple(sorted(live, key=lambda m: m.name))


class _Changes:
    """What a watcher has told so far."""

    def __init__(self) -> None:
        self._told: dict[str, Member] | None = None

    def news(self, members: tuple[Member, ...]) -> GroupChange | None:
        now = {m.name: m for m in members}
        before = self._told
        if before is not None and {n: (m.data, m.token) for n, m in now.items()} == {
            n: (m.data, m.token) for n, m in before.items()
        }:
            return None
        self._told = now
        before = before or {}
        joined = [n for n, m in now.items() if n not in before or before[n].token != m.token]
        left = [n for n, m in before.items() if n not in now or now[n].token != m.token]
        return GroupChange(members, tuple(sorted(joined)), tuple(sorted(left)))


class _MembershipBase(Generic[L]):
    """This client is a member: its lease, and the lease that carries its data."""

    def __init__(self, group: str, member: str, data: str | None, lease: L, said: L) -> None:
        self.group, self.member, self.data = group, member, data
        self.lease, self._said = lease, said

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.member!r} of {self.group!r}>"

    @property
    def token(self) -> int:
        """The membership's fencing token."""
        return self.lease.token

    @property
    def lost(self) -> bool:
        """True once the membership can no longer be trusted (never False again)."""
        return self.lease.lost or self._said.lost

    def check(self) -> None:
        """Raise :class:`LeaseLost` unless this client is still a member."""
        self.lease.check()
        self._said.check()


class Membership(_MembershipBase[Lease]):
    """A member of a group (sync API): ``leave()``, or leave the ``with`` block."""

    def leave(self) -> None:
        """Leave the group: the data goes, then the membership."""
        try:
            self._said.release()
        except FencelockError:
            self.lease.release()  # the membership's own release says more
            raise
        self.lease.release()

    def wait_lost(self, timeout: float | None = None) -> bool:
        """Block until the membership is lost (True) or ``timeout`` passes (False)."""
        return self.lease.wait_lost(timeout)

    def __enter__(self) -> Membership:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.leave()
        except FencelockError:
            if exc is None:
                raise


class AsyncMembership(_MembershipBase[AsyncLease]):
    """A member of a group (asyncio API)."""

    async def leave(self) -> None:
        """Leave the group; as :meth:`Membership.leave`."""
        try:
            await self._said.release()
        except FencelockError:
            await self.lease.release()
            raise
        await self.lease.release()

    async def wait_lost(self, timeout: float | None = None) -> bool:
        """Wait until the membership is lost (True) or ``timeout`` passes (False)."""
        return await self.lease.wait_lost(timeout)

    async def __aenter__(self) -> AsyncMembership:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self.leave()
        except FencelockError:
            if exc is None:
                raise


def _taken(group: str, member: str) -> LockTimeout:
    return LockTimeout(
        f"member {member!r} of group {group!r} is already joined by another client "
        "(one live holder per member id)"
    )


class Group(_GroupBase):
    """A named group (sync API): ``join``, ``members``, ``watch``."""

    def __init__(self, client: ClientLike, name: str, ttl: float) -> None:
        super().__init__(name, ttl)
        self._client = client

    def join(self, member: str, data: str | None = None, timeout: float = 0) -> Membership:
        """Join as ``member`` with ``data`` (a short text: an address, a capacity), kept
        alive by a renewed lease until :meth:`Membership.leave`. Another live holder of
        the id makes it wait up to ``timeout`` seconds, then raise :class:`LockTimeout`."""
        held, own_data, announced = self._names(member, data)
        try:
            lease = self._client.lock(held, ttl=self.ttl).acquire(timeout)
        except LockTimeout as exc:
            raise _taken(self.name, member) from exc
        try:
            for stale in self._client.list(own_data):
                self._client.evict(stale.name)  # a previous holder's of this id
            said = self._client.lock(announced, ttl=self.ttl).acquire(timeout=self.ttl)
        except BaseException:
            lease.release()
            raise
        return Membership(self.name, member, data, lease, said)

    def members(self) -> tuple[Member, ...]:
        """The live members, by id."""
        return self._live(self._client.list(self._members), self._client.list(self._data))

    def watch(self, interval: float | None = None) -> Iterator[GroupChange]:
        """The members now, then each change (who joined, who left). Where the server
        pushes changes (etcd, ZooKeeper) it looks as each arrives, and at least every
        ``interval`` seconds (default 30); elsewhere every ``interval`` seconds
        (default: a third of the TTL, at most 1 s)."""
        backend = name_watching(self._client.internals.backend)
        pushed = None if backend is None else backend.watch_names(self._prefixes)
        every = self._every(interval, pushed is not None)
        changes = _Changes()
        try:
            if pushed is not None:
                pushed.changed(0)  # watching from before the first look
            while True:
                change = changes.news(self.members())
                if change is not None:
                    yield change
                if pushed is None:
                    time.sleep(every)
                else:
                    pushed.changed(every)
        finally:
            if pushed is not None:
                pushed.close()


class AsyncGroup(_GroupBase):
    """A named group for asyncio."""

    def __init__(self, client: AsyncClientLike, name: str, ttl: float) -> None:
        super().__init__(name, ttl)
        self._client = client

    async def join(
        self, member: str, data: str | None = None, timeout: float = 0
    ) -> AsyncMembership:
        """Join as ``member``; as :meth:`Group.join`."""
        held, own_data, announced = self._names(member, data)
        try:
            lease = await self._client.lock(held, ttl=self.ttl).acquire(timeout)
        except LockTimeout as exc:
            raise _taken(self.name, member) from exc
        try:
            for stale in await self._client.list(own_data):
                await self._client.evict(stale.name)
            said = await self._client.lock(announced, ttl=self.ttl).acquire(timeout=self.ttl)
        except BaseException:
            await lease.release()
            raise
        return AsyncMembership(self.name, member, data, lease, said)

    async def members(self) -> tuple[Member, ...]:
        """The live members, by id."""
        return self._live(
            await self._client.list(self._members), await self._client.list(self._data)
        )

    async def watch(self, interval: float | None = None) -> AsyncIterator[GroupChange]:
        """The members now, then each change; as :meth:`Group.watch`."""
        backend = async_name_watching(self._client.internals.backend)
        pushed = None if backend is None else backend.watch_names(self._prefixes)
        every = self._every(interval, pushed is not None)
        changes = _Changes()
        try:
            if pushed is not None:
                await pushed.changed(0)  # watching from before the first look
            while True:
                change = changes.news(await self.members())
                if change is not None:
                    yield change
                if pushed is None:
                    await asyncio.sleep(every)
                else:
                    await pushed.changed(every)
        finally:
            if pushed is not None:
                await pushed.close()


__all__: Sequence[str] = (
    "AsyncGroup",
    "AsyncMembership",
    "Group",
    "GroupChange",
    "Member",
    "Membership",
    "assign",
)
