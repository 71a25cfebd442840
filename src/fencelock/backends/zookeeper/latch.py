"""A count-down latch kept in one persistent node (``<base>/NAME.latch``, its data the
count), so it outlives every client, as Curator's and Redisson's latches do.

Arming creates the node (or re-arms one left at 0); counting down is a compare-and-set
on the node's version, and the last count deletes the node, which wakes every waiter
watching it. A waiter reads the node with a watch and waits for the watch (or its
session's end, or its timeout); an absent node or a count of 0 is an open latch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from kazoo import exceptions as kz

from fencelock import clock
from fencelock.backends.base import LockInfo

if TYPE_CHECKING:
    from fencelock.backends.zookeeper.session import ZkSession

SESSION = 30  # the shared session a latch's requests go through (as ``open()``'s)


def latch_path(queue: str) -> str:
    return f"{queue}.latch"


def listed(name: str, data: bytes, czxid: int) -> list[LockInfo]:
    """An armed latch as ``list`` shows the generic one's parts (``NAME.latch/closed``,
    one ``NAME.latch/c/<k>`` per count left), so ``status`` folds it the same way."""
    count = decode_count(data)
    if count == 0:
        return []
    parts = [f"{name}/closed", *(f"{name}/c/{k}" for k in range(count))]
    return [LockInfo(part, "latch", czxid, None) for part in parts]


def decode_count(data: bytes) -> int:
    """The count a latch node holds (anything unreadable counts as open)."""
    try:
        return max(0, int(data or b"0"))
    except ValueError:
        return 0


class Sessions(Protocol):
    """What a latch uses of its backend (:class:`AsyncZooKeeperBackend` is one)."""

    def queue(self, name: str) -> str:
        """The path under which ``name``'s nodes live."""

    async def session(self, timeout: int, shared: bool) -> ZkSession:
        """A live session of ``timeout`` seconds."""


class ZooKeeperLatch:
    """The latch on one name, over the backend's shared session."""

    def __init__(self, backend: Sessions, name: str) -> None:
        self._backend, self._path = backend, latch_path(backend.queue(name))

    async def _session(self) -> ZkSession:
        return await self._backend.session(SESSION, shared=True)

    async def _read(self, session: ZkSession, watch: object = None) -> tuple[int, int] | None:
        """The count and the node's version; None if there is no node (open)."""
        try:
            data, stat = await session.call(session.client.get_async(self._path, watch=watch))
        except kz.NoNodeError:
            return None
        return decode_count(data), int(stat.version)

    async def try_set_count(self, count: int) -> bool:
        """Arm with ``count``; False if it is counting down already."""
        session = await self._session()
        try:
            await session.call(
                session.client.create_async(self._path, str(count).encode(), makepath=True)
            )
            return True
        except kz.NodeExistsError:
            pass
        read = await self._read(session)
        if read is None or read[0] > 0:
            return read is None and await self.try_set_count(count)
        try:
            await session.call(
                session.client.set_async(self._path, str(count).encode(), version=read[1])
            )
        except (kz.BadVersionError, kz.NoNodeError):
            return False  # another client armed it (or counted it out) first
        return True

    async def count_down(self) -> bool:
        """Take one count away; the last deletes the node. False if it was open."""
        session = await self._session()
        while True:
            read = await self._read(session)
            if read is None or read[0] == 0:
                return False
            count, version = read
            try:
                if count == 1:
                    await session.call(session.client.delete_async(self._path, version=version))
                else:
                    value = str(count - 1).encode()
                    await session.call(session.client.set_async(self._path, value, version))
                return True
            except (kz.BadVersionError, kz.NoNodeError):
                continue  # counted down by another client meanwhile: read again

    async def count(self) -> int:
        read = await self._read(await self._session())
        return 0 if read is None else read[0]

    async def wait(self, timeout: float | None) -> bool:
        """True once the latch is open; False if ``timeout`` passes first."""
        deadline = None if timeout is None else clock.now() + timeout
        while True:
            opened = await self._watch_once(deadline)
            if opened is not None:
                return opened

    async def _watch_once(self, deadline: float | None) -> bool | None:
        """Read the count with a watch and wait for it to fire: True (open), False (the
        deadline passed), None (something changed: read again)."""
        session = await self._session()
        with session.watching() as watch:
            read = await self._read(session, watch=watch.callback)
            if read is None or read[0] == 0:
                return True
            left = None if deadline is None else deadline - clock.now()
            if left is not None and left <= 0:
                return False
            await watch.fired(left)
            return None
