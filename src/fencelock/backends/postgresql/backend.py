"""``postgresql://``: leases in a table, tokens from a sequence, expiry by the database's
clock, waiters woken by ``NOTIFY``.

A lease is one row per lock name. Taking it is one ``INSERT … ON CONFLICT DO UPDATE``
that succeeds only when the name is free or its lease has expired by
``clock_timestamp()``, and draws the token from the sequence in the same statement.
Renewal and release compare the owner and the expiry; a release announces the name
on the schema's channel, and waiters listening there look again (no polling: a waiter
otherwise sleeps until the holder's lease would expire). The statements are in
:mod:`.sql`.
"""

from __future__ import annotations

import builtins
import secrets
from collections.abc import Sequence
from typing import Any

from fencelock import forking
from fencelock.backends.base import Acquired, AttemptResult, Busy, Capabilities, LockInfo, Renewal
from fencelock.backends.postgresql.connections import STEPS, Connections
from fencelock.backends.postgresql.listener import Listener
from fencelock.backends.postgresql.options import postgres_options
from fencelock.backends.postgresql.statements import Statements
from fencelock.backends.postgresql.waiters import WaiterPlace
from fencelock.engine import barging
from fencelock.engine.barging import busy_wait, starvation_bound
from fencelock.engine.urls import ParsedURL


class AsyncPostgresBackend:
    """The asyncio PostgreSQL backend; the sync one runs it on a shared loop."""

    capabilities = Capabilities(
        fair=True,
        renews_in_batches=True,
        steps=STEPS,  # the blocking client steps it (fencelock/blocking_call.py)
    )

    def outlives_client(self, renewed: bool) -> bool:
        """Whether a lease left to its TTL stays on the server after the client closes."""
        return True

    def __init__(self, parsed: ParsedURL) -> None:
        self.options = postgres_options(parsed)
        self.url = parsed.redacted
        self.request_bound = parsed.request_bound
        self.connections = Connections(self.options, self.url)
        self.statements = Statements(self.options.schema)
        self.listener = Listener(self.connections)
        forking.register(self)

    def _reset_after_fork(self) -> None:
        """In a forked child: the parent's connections stay the parent's."""
        self.connections.forget()
        self.listener.forget()

    async def open(self) -> None:
        await self.connections.ensure_schema()

    def attempt(
        self, name: str, owner: str, ttl: float, fair: bool = False, renewed: bool = True
    ) -> PostgresAttempt:
        return PostgresAttempt(self, name, owner, ttl, starvation_bound(fair))

    async def release(self, name: str, owner: str) -> bool:
        mark = release_mark()
        rows = await self.connections.fetchall(
            self.statements.release, {"name": name, "owner": owner, "mark": mark}
        )
        return bool(rows)

    async def renew(self, name: str, owner: str, ttl: float) -> bool:
        rows = await self.connections.fetchall(
            self.statements.renew, {"name": name, "owner": owner, "ttl": ttl}
        )
        return bool(rows)

    async def renew_many(self, renewals: Sequence[Renewal]) -> list[bool]:
        params = {
            "names": [name for name, _, _ in renewals],
            "owners": [owner for _, owner, _ in renewals],
            "ttls": [ttl for _, _, ttl in renewals],
        }
        rows = await self.connections.fetchall(self.statements.renew_many, params)
        renewed = {(name, owner) for name, owner in rows}
        return [(name, owner) in renewed for name, owner, _ in renewals]

    async def inspect(self, name: str) -> LockInfo | None:
        rows = await self.connections.fetchall(self.statements.inspect, {"name": name})
        return info_from_row(rows[0]) if rows else None

    async def list(self, prefix: str) -> list[LockInfo]:
        rows = await self.connections.fetchall(self.statements.list, {"prefix": prefix})
        return [info_from_row(row) for row in rows]

    async def waiters(self, name: str) -> builtins.list[str]:
        """The owners waiting for ``name``, in line order."""
        rows = await self.connections.fetchall(self.statements.waiters, {"name": name})
        return [str(waiter) for (waiter,) in rows]

    async def close(self) -> None:
        await self.listener.close()
        await self.connections.close()


def release_mark() -> float:
    """A release's own instant in January 1970 (seconds, whole microseconds): see
    ``Statements.release``."""
    return secrets.randbelow(10**12) / 10**6


def info_from_row(row: tuple[Any, ...]) -> LockInfo:
    """A lock's row: name, owner, token, remaining seconds, waiters, and when the lease
    was taken (Unix time; NULL where not recorded)."""
    name, owner, token, remaining, waiters, since = row
    left = None if remaining is None or owner is None else max(float(remaining), 0.0)
    taken = None if since is None or left is None else float(since)
    return LockInfo(name, owner, int(token), left, int(waiters), taken)


class PostgresAttempt:
    """One contender: its place among the waiters (:class:`~.waiters.WaiterPlace`)."""

    def __init__(
        self, backend: AsyncPostgresBackend, name: str, owner: str, ttl: float, bound: float
    ) -> None:
        self._backend, self._name, self._owner = backend, name, owner
        self._ttl, self._bound = ttl, bound
        self._place = WaiterPlace(backend.listener, backend.connections, name, owner)
        # An acquire statement went out and its answer was never read (cancelled or
        # cut off in flight): it may have taken the lease, which close() gives back.
        self._unanswered = False

    async def try_acquire(self) -> AttemptResult:
        backend = self._backend
        await backend.connections.ensure_schema()
        listener = self._place.before_asking()
        self._unanswered = True
        rows = await backend.connections.fetchall(
            backend.statements.acquire,
            {
                "name": self._name,
                "owner": self._owner,
                "ttl": self._ttl,
                "bound": self._bound,
                "liveness": barging.WAITER_LIVENESS,
                "listener": listener,
            },
            own_pid="listener" if listener is None else None,
        )
        self._unanswered = False
        token, remaining = rows[0]
        if token is not None:
            self._place.granted()
            return Acquired(int(token))
        return Busy(busy_wait(None if remaining is None else float(remaining)))

    @property
    def idle(self) -> bool:
        """Whether :meth:`close` has nothing to do (granted, or never asked): the
        blocking face then skips a hop onto the loop."""
        return self._place.left and not self._unanswered

    async def wait(self, timeout: float) -> None:
        await self._place.wait(timeout, self._backend)

    async def close(self) -> None:
        await self._place.leave(self._backend.statements)
        if self._unanswered:  # nobody will hold a Lease for what it may have taken
            self._unanswered = False
            await self._backend.release(self._name, self._owner)
