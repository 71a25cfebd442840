"""A waiter's place in the line, shared by ``postgresql://`` and ``+advisory``: its
bell on the listener and its row in the waiters' table.

The row is put there by the acquire statement itself, alive while the session named
in it is (``_ALIVE``); :meth:`leave` takes it out again (and passes a free lease on).
The bell is subscribed before a look, so a release between the look and the wait
rings it, and cleared before each look. Only where the client listens already,
though: a look never waits for the listening connection to open, so an acquire that
never waits (``timeout=0``) opens none. Such a first look names the statement's own
session in its row; the first wait then listens, and looks whether a release meanwhile
was this waiter's (the lease free, the waiter first in line) before it waits on the bell.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from typing import Protocol

from fencelock import clock
from fencelock.aio import within
from fencelock.backends.base import LockInfo
from fencelock.backends.postgresql.connections import Connections
from fencelock.backends.postgresql.listener import Listener
from fencelock.backends.postgresql.statements import Statements


class Line(Protocol):
    """What a wait reads of the backend when its notice may have gone unheard."""

    async def inspect(self, name: str) -> LockInfo | None: ...

    async def waiters(self, name: str) -> builtins.list[str]: ...


class WaiterPlace:
    def __init__(self, listener: Listener, connections: Connections, name: str, owner: str):
        self._listener, self._connections = listener, connections
        self._name, self._owner = name, owner
        self._bell: asyncio.Event | None = None
        self.queued = False  # a row may be in the table: leave() takes it out

    def before_asking(self) -> int | None:
        """Before a look, which may queue this waiter: the server process whose session
        keeps its row alive, the listener's (its bell cleared: from here on a release
        rings it), or None while this client listens to nothing (the statement's own)."""
        self.queued = True
        if self._bell is None:
            self._bell = self._listener.subscribed(self._name, self._owner)
            if self._bell is None:
                return None
        self._bell.clear()
        return self._listener.pid

    async def wait(self, timeout: float, line: Line) -> None:
        """Until a release names this waiter, or ``timeout``. If the last look was made
        before the client listened, listen now, and return at once if a release came
        meanwhile for this waiter (its notice went unheard)."""
        ends = clock.now() + timeout
        if self._bell is None:
            self._bell = await self._listener.subscribe(self._name, self._owner)
            if await self._missed(line):
                return
        with contextlib.suppress(TimeoutError):
            await within(max(ends - clock.now(), 0.0), self._bell.wait())

    async def _missed(self, line: Line) -> bool:
        """Whether this waiter is first in line, and then the lease free: a release
        announces the name to the head of its line alone. In that order, as a free
        lease seen first may go to the waiter then ahead before this one is first."""
        waiting = await line.waiters(self._name)
        if waiting and waiting[0] != self._owner:
            return False
        info = await line.inspect(self._name)
        return info is None or not info.held

    @property
    def left(self) -> bool:
        """Whether nothing is left to undo: not listening, and no row in the line."""
        return self._bell is None and not self.queued

    def granted(self) -> None:
        """The statement that granted the lease dequeued us; stop listening (no I/O),
        so closing the attempt has nothing to do."""
        self.queued = False
        if self._bell is not None:
            self._bell = None
            self._listener.unsubscribe(self._name, self._owner)

    async def leave(self, statements: Statements) -> None:
        """Stop listening, and take the row out of the line if one may be there."""
        if self._bell is not None:
            self._bell = None
            self._listener.unsubscribe(self._name, self._owner)
        if self.queued:
            self.queued = False
            await self._connections.fetchall(
                statements.leave, {"name": self._name, "owner": self._owner}
            )
