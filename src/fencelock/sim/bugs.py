"""Every bug the simulator can put back (``--bug NAME``; :data:`KNOWN` lists them and
:func:`reintroduced` puts some back), each a patch of the code under test: the library's
historical bugs (:mod:`fencelock.sim.historical`, and the SQLite backend's dead-holder
guess in :mod:`fencelock.sim.sqlite_guess`), one Redis bug and, here, broken variants
that never shipped, one for each invariant that no historical bug breaks (release
semantics, a read-write lock's tokens, an election's announcements, the fencing
guards): each shows that its invariant can fail."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from fencelock.sim import historical, sqlite_guess  # noqa: F401 - they register theirs
from fencelock.sim.put_back import KNOWN, patched, put_back_by, reintroduced

__all__ = ["KNOWN", "reintroduced"]

REDIS_REUSED_OWNER = "redis-reused-owner"
REDIS_RELEASE_UNCHECKED = "redis-release-unchecked"
ELECTION_EVICTS_FIRST = "election-evicts-first"
FENCE_EQUAL_WAVES_ALL = "fence-equal-waves-all"
RWLOCK_OWN_LEASE_TOKEN = "rwlock-own-lease-token"
ELECTION_DEPOSED_EVICTS = "election-deposed-evicts"


def _reused_owner() -> contextlib.AbstractContextManager[None]:
    """Redis before 1631548: every try of an acquisition stored the attempt's one owner
    value, also after a try went unanswered; that try's undo, once the server answered
    again, named the same owner and deleted the grant of a later try."""
    from fencelock.backends.redis.attempt import UndoTracker

    def keep_owner(tracker: UndoTracker) -> str | None:
        return None  # no fresh owner, nothing handed over: the unanswered flag stays

    return patched(UndoTracker, "before_try", keep_owner)


put_back_by(
    REDIS_REUSED_OWNER,
    "a Redis try after an unanswered one storing the same owner, whose late undo deleted it",
    _reused_owner,
)


# The owner check of free.lua's release, which the bug leaves out.
_OWNER_CHECK = """  if redis.call('GET', KEYS[1]) ~= ARGV[2] then
    return 0
  end
"""


def _release_unchecked() -> contextlib.AbstractContextManager[None]:
    """A Redis release deleting the lock's key whoever holds it (a ``DEL`` where a
    compare-and-delete belongs): a release that lands late, after the lease ran out and
    another client took the lock, ends that client's lease."""
    from fencelock.backends.redis import conversations
    from fencelock.backends.redis.resp import Script
    from fencelock.backends.redis.scripts import LockKeys, lua

    source = lua("free")
    assert _OWNER_CHECK in source, "free.lua changed: update the bug put back"
    unchecked = Script(source.replace(_OWNER_CHECK, ""))

    def release_command(keys: LockKeys, owner: str) -> tuple[Script, bytes]:
        return unchecked, unchecked.call(keys.waking, [b"release", owner])

    return patched(conversations, "release_command", release_command)


def _evicts_first() -> contextlib.AbstractContextManager[None]:
    """An asyncio campaign clearing the announcements before it has won, not after: a
    campaigner still waiting evicts the sitting leader's announcement, which that
    leader goes on trusting (and observers see no value for its term)."""
    from fencelock.primitives.election import AsyncElection

    won: Callable[..., Any] = AsyncElection.campaign

    async def campaign(
        self: AsyncElection, value: str | None = None, timeout: float | None = None
    ) -> Any:
        for stale in self._stale(await self._client.list(self._announcements)):
            await self._client.evict(stale)
        return await won(self, value, timeout)

    return patched(AsyncElection, "campaign", campaign)


def _deposed_evicts() -> contextlib.AbstractContextManager[None]:
    """An asyncio campaign as it was before the simulator's announcement invariant: it
    evicted the announcements it listed, and announced, without looking whether it
    still led, so a campaigner deposed while it listed (paused, its lease run out)
    evicted its successor's announcement."""
    from fencelock.lease import AsyncLease
    from fencelock.primitives.election import AsyncElection

    def without_looking(self: AsyncElection, lease: AsyncLease) -> None:
        return None

    return patched(AsyncElection, "_still_leads", without_looking)


def _equal_waves_all() -> contextlib.AbstractContextManager[None]:
    """The memory guard's test grouped as ``(token < last or token == last) and not
    allow_equal``: a write that allows its own token again passes whatever its token,
    so a deposed holder's late write lands over its successor's."""
    from fencelock.fencing import MemoryGuard

    def accept(self: MemoryGuard, key: str, token: int, *, allow_equal: bool = False) -> None:
        with self._guard:
            last = self._last.get(key)
            if last is not None and (token < last or token == last) and not allow_equal:
                raise self._reject(key, token, last)
            self._last[key] = token

    return patched(MemoryGuard, "accept", accept)


def _own_lease_token() -> contextlib.AbstractContextManager[None]:
    """An asyncio read hold's token taken from its own reader lease, not from the gate
    as it entered: readers' and writers' tokens then come from counters of different
    names, which need not order against each other (a store with a counter per name,
    Redlock's nodes on their own clocks), so a writer may get a token below a reader's
    before it."""
    from fencelock.primitives.rwlock import AsyncReadWriteSide, AsyncRWLease

    through_gate: Callable[..., Any] = AsyncReadWriteSide.acquire

    async def acquire(self: AsyncReadWriteSide, timeout: float | None = None) -> AsyncRWLease:
        hold: AsyncRWLease = await through_gate(self, timeout)
        if hold.mode == "write":
            return hold
        return AsyncRWLease(hold.name, hold.mode, hold.lease, hold.lease.token)

    return patched(AsyncReadWriteSide, "acquire", acquire)


put_back_by(
    ELECTION_DEPOSED_EVICTS,
    "a campaign deposed while it listed evicting its successor's announcement",
    _deposed_evicts,
)
put_back_by(
    REDIS_RELEASE_UNCHECKED,
    "a Redis release deleting the lock whoever holds it, not only its owner's",
    _release_unchecked,
)
put_back_by(
    ELECTION_EVICTS_FIRST,
    "a campaign evicting the announcements before it won, the sitting leader's too",
    _evicts_first,
)
put_back_by(
    FENCE_EQUAL_WAVES_ALL,
    "a memory guard letting any token through when a write allows an equal one",
    _equal_waves_all,
)
put_back_by(
    RWLOCK_OWN_LEASE_TOKEN,
    "a read hold's token taken from its own reader lease, not the gate's at entry",
    _own_lease_token,
)
