"""A waiter's place in the line, shared by ``postgresql://`` and ``+advisory``: its
bell on the listener and its row in the waiters' table.

The bell is subscribed before the first look and cleared before each one, so a release
between a look and the wait still rings it. The row is put there by the acquire
statement itself; :meth:`leave` takes it out again (and passes a free lease on).
"""

from __future__ import annotations

import asyncio
import contextlib

from fencelock.aio import within
from fencelock.backends.postgresql.connections import Connections
from fencelock.backends.postgresql.listener import Listener
from fencelock.backends.postgresql.statements import Statements


class WaiterPlace:
    def __init__(self, listener: Listener, connections: Connections, name: str, owner: str):
        self._listener, self._connections = listener, connections
        self._name, self._owner = name, owner
        self._bell: asyncio.Event | None = None
        self.queued = False  # a row may be in the table: leave() takes it out

    async def before_asking(self) -> None:
        """Listen (once) and clear the bell; from here on a release rings it, and the
        statement about to be sent may queue this waiter."""
        if self._bell is None:
            self._bell = await self._listener.subscribe(self._name, self._owner)
        self._bell.clear()
        self.queued = True

    async def wait(self, timeout: float) -> None:
        """Until a release names this waiter, or ``timeout``."""
        if self._bell is None:
            return
        with contextlib.suppress(TimeoutError):
            await within(timeout, self._bell.wait())

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
