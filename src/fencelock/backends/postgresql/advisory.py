"""``postgresql+advisory://``: PostgreSQL's own lock manager (session advisory locks).

Each lease is an advisory lock held by a :class:`~.session.LockSession`: one
connection per TTL for renewed leases (renewals keep it from idling out), one of its
own for a lease that is not renewed (the server ends it ``ttl`` after its last
statement). The key is the name's 64-bit hash; the name is recorded with the key, so
two names that share a key are reported, not merged; the token is drawn from the
sequence while the lock is held. Waiters queue and wake as on ``postgresql://``.

PostgreSQL would let one session take the same advisory lock twice (it counts them):
a second lease of the same name in one session is made to wait its turn instead.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from dataclasses import dataclass
from typing import Any

import psycopg

from fencelock import forking
from fencelock.backends import base
from fencelock.backends.postgresql.advisory_statements import AdvisoryStatements, advisory_key
from fencelock.backends.postgresql.backend import info_from_row, release_mark
from fencelock.backends.postgresql.connections import STEPS, Connections
from fencelock.backends.postgresql.listener import Listener
from fencelock.backends.postgresql.options import postgres_options
from fencelock.backends.postgresql.session import LockSession
from fencelock.backends.postgresql.waiters import WaiterPlace
from fencelock.blocking_call import CallEnded
from fencelock.engine import barging
from fencelock.engine.barging import busy_wait, starvation_bound
from fencelock.engine.urls import ParsedURL
from fencelock.errors import BackendUnavailable, ConfigError

# The oldest server whose idle_session_timeout lets a silent client's locks go.
MIN_SERVER_VERSION = 140000


@dataclass(frozen=True)
class _Held:
    session: LockSession
    key: int
    own_session: bool


class AsyncAdvisoryBackend(base.RenewsEach, base.EndsWithItsSession):
    """The asyncio advisory-lock backend; the sync one runs it on a shared loop."""

    capabilities = base.Capabilities(
        fair=True,
        renews_in_batches=True,  # each on its own session, all in one loop trip
        keeps=True,  # a name kept after its lock: a row of the lease table
        keeps_announced=True,  # a keep ended early wakes the name's waiters (NOTIFY)
        steps=STEPS,  # the blocking client steps it (fencelock/blocking_call.py)
    )

    def __init__(self, parsed: ParsedURL) -> None:
        self.options = postgres_options(parsed)
        self.url = parsed.redacted
        self.request_bound = parsed.request_bound
        self.statements = AdvisoryStatements(self.options.schema)
        self.connections = Connections(self.options, self.url, self.statements)
        self.listener = Listener(self.connections)
        self._sessions: dict[float, LockSession] = {}  # shared, by TTL
        self._opening: asyncio.Lock | None = None
        self._own: set[LockSession] = set()
        self._held: dict[str, _Held] = {}  # owner -> its lock
        self._version_checked = False
        forking.register(self)

    def _reset_after_fork(self) -> None:
        for session in [*self._sessions.values(), *self._own]:
            session.forget()
        self._sessions, self._own, self._held, self._opening = {}, set(), {}, None
        self.connections.forget()
        self.listener.forget()

    async def open(self) -> None:
        await self.connections.ensure_schema()
        await self._check_version()

    async def _check_version(self) -> None:
        if self._version_checked:
            return
        rows = await self.connections.fetchall("SHOW server_version_num", {})
        if int(rows[0][0]) < MIN_SERVER_VERSION:
            raise ConfigError(
                f"{self.url}: postgresql+advisory:// needs PostgreSQL 14 or newer (its "
                f"idle_session_timeout ends a silent client's locks); this server is "
                f"{int(rows[0][0]) // 10000}. Use postgresql:// (the lease table) instead"
            )
        self._version_checked = True

    async def session(self, ttl: float, shared: bool) -> LockSession:
        """The live session for leases of ``ttl``, or a new one of the lease's own."""
        if not shared:
            own = await LockSession.open(self.connections, ttl)
            self._own.add(own)
            return own
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            current = self._sessions.get(ttl)
            if current is None or current.ended:
                current = self._sessions[ttl] = await LockSession.open(self.connections, ttl)
            return current

    async def drop_own(self, session: LockSession) -> None:
        self._own.discard(session)
        await session.close()

    def attempt(
        self, name: str, owner: str, ttl: float, fair: bool = False, renewed: bool = True
    ) -> AdvisoryAttempt:
        return AdvisoryAttempt(self, name, owner, ttl, starvation_bound(fair), renewed)

    def hold(self, owner: str, held: _Held) -> None:
        self._held[owner] = held
        held.session.held[held.key] = owner

    async def release(self, name: str, owner: str) -> bool:
        held = self._held.pop(owner, None)
        if held is None:
            return await self._evict(name, owner)
        if held.session.ended:
            return False
        session = held.session
        try:
            rows = await session.run(self.statements.unlock, {"key": held.key, "name": name})
        except Exception as exc:
            raise self._failed(exc) from exc
        finally:
            session.held.pop(held.key, None)
            if held.own_session:
                await self.drop_own(session)
        return bool(rows and rows[0][0])

    async def keep(self, name: str, owner: str, seconds: float) -> bool:
        """Keep ``name`` taken ``seconds`` more (a lease-table row, by the server's clock),
        then let the lock go: in that order, so no acquire finds it free between."""
        held = self._held.get(owner)
        if held is None or held.session.ended:
            self._held.pop(owner, None)
            return False
        params = {"key": held.key, "name": name, "owner": owner, "seconds": seconds}
        try:
            kept = await held.session.run(self.statements.keep, params)
        except Exception as exc:
            raise self._failed(exc) from exc
        return await self.release(name, owner) and bool(kept)

    async def renew(self, name: str, owner: str, ttl: float) -> bool:
        """Whether the session still holds the lock; it is kept for at least ``ttl`` of
        silence from now (a shared session's timeout only grows: its other leases
        trust it for theirs; a lease's own session takes ``ttl`` as it is)."""
        held = self._held.get(owner)
        if held is None or held.session.ended:
            return False
        session = held.session
        timeout = ttl if held.own_session else max(ttl, session.ttl)
        try:
            rows = await session.run(
                self.statements.holds,
                {
                    "key": held.key,
                    "owner": owner,
                    "timeout": timeout,
                    "timeout_ms": str(max(1, round(timeout * 1000))),
                },
            )
        except Exception as exc:
            raise self._failed(exc) from exc
        session.ttl = timeout
        return bool(rows[0][0])

    async def _evict(self, name: str, owner: str) -> bool:
        """Another client's lease: end the session that holds it (the database can let
        an advisory lock go no other way; that session's other locks go with it), or
        the name's keep."""
        rows = await self.connections.fetchall(
            self.statements.evict, {"key": advisory_key(name), "owner": owner}
        )
        if any(row[0] for row in rows):
            return True
        ended = await self.connections.fetchall(
            self.statements.leases.release,
            {"name": name, "owner": owner, "mark": release_mark()},
        )
        return bool(ended)

    def _failed(self, exc: Exception) -> Exception:
        return self.connections.translated(exc) if isinstance(exc, psycopg.Error) else exc

    async def inspect(self, name: str) -> base.LockInfo | None:
        rows = await self.connections.fetchall(
            self.statements.inspect, {"key": advisory_key(name), "name": name}
        )
        info = info_from_row(rows[0]) if rows else None
        if info is not None and info.held:
            return info
        kept = await self.connections.fetchall(self.statements.leases.inspect, {"name": name})
        if kept and kept[0][1] is not None:  # a name kept after its lock
            return info_from_row(kept[0])
        return info

    async def list(self, prefix: str) -> list[base.LockInfo]:
        rows = await self.connections.fetchall(self.statements.list, {"prefix": prefix})
        held = {row[0]: info_from_row(row) for row in rows}
        kept = await self.connections.fetchall(self.statements.leases.list, {"prefix": prefix})
        for row in kept:  # names kept after their lock (and not held again)
            held.setdefault(row[0], info_from_row(row))
        return [held[name] for name in sorted(held)]

    async def waiters(self, name: str) -> builtins.list[str]:
        """The owners waiting for ``name``, in line order."""
        rows = await self.connections.fetchall(self.statements.leases.waiters, {"name": name})
        return [str(waiter) for (waiter,) in rows]

    async def close(self) -> None:
        sessions = [*self._sessions.values(), *self._own]
        self._sessions, self._own, self._held = {}, set(), {}
        for session in sessions:
            await session.close()
        await self.listener.close()
        await self.connections.close()


class AdvisoryAttempt:
    """One contender: its session, its place in the line and its bell."""

    def __init__(
        self,
        backend: AsyncAdvisoryBackend,
        name: str,
        owner: str,
        ttl: float,
        bound: float,
        renewed: bool,
    ) -> None:
        self._backend, self._name, self._owner = backend, name, owner
        self._ttl, self._bound, self._renewed = ttl, bound, renewed
        self._key = advisory_key(name)
        self._session: LockSession | None = None
        self._place = WaiterPlace(backend.listener, backend.connections, name, owner)
        self._granted = False
        # The session an acquire statement was cancelled on in flight: it may hold the
        # key for this attempt now, which close() gives back.
        self._unanswered: LockSession | None = None

    async def try_acquire(self) -> base.AttemptResult:
        backend = self._backend
        await backend.open()
        try:
            session, mine, rows = await self._ask()
        except BackendUnavailable as exc:
            if self._session is None or not self._session.ended or isinstance(exc, CallEnded):
                raise  # (a call cut off at its end has no time left to ask again)
            # The session died idle (a waiter's session outlives no TTL of silence):
            # whatever the statement did died with it. Ask again on a live one.
            session, mine, rows = await self._ask()
        taken, token, recorded, kept_for = rows[0]
        if not taken:
            if not mine:
                session.held.pop(self._key, None)
            return base.Busy(busy_wait(None if kept_for is None else float(kept_for)))
        self._place.granted()  # the statement that took it dequeued it
        if token is None:  # the key is another name's: let it go, and say so
            session.held.pop(self._key, None)
            with contextlib.suppress(Exception):
                await session.run(backend.statements.unlock, {"key": self._key, "name": recorded})
            raise ConfigError(
                f"lock names {self._name!r} and {recorded!r} share the advisory key "
                f"{self._key} in {backend.url}: rename one of them (the names are "
                f"recorded in {backend.statements.table} so this is never silent)"
            )
        self._granted = True
        backend.hold(self._owner, _Held(session, self._key, own_session=not self._renewed))
        return base.Acquired(int(token), session=session.news)

    async def _give_back(self) -> None:
        """Let go of the key an acquire cancelled in flight may have taken, and the claim."""
        session, self._unanswered = self._unanswered, None
        if session is None:
            return
        try:
            if not session.ended:
                params = {"key": self._key, "name": self._name}
                await session.run(self._backend.statements.give_back, params)
        except Exception as exc:
            raise self._backend._failed(exc) from exc
        finally:
            session.held.pop(self._key, None)

    async def _ask(self) -> tuple[LockSession, bool, list[tuple[Any, ...]]]:
        """The acquire statement on this attempt's session (a live one)."""
        backend = self._backend
        session = self._session
        if session is None or session.ended:
            session = self._session = await backend.session(self._ttl, shared=self._renewed)
        listener = self._place.before_asking()
        mine = self._key in session.held  # this session holds it, or is taking it
        if not mine:
            session.held[self._key] = self._owner  # claimed: a sibling attempt waits
        try:
            rows = await session.run(
                backend.statements.acquire,
                {
                    "name": self._name,
                    "owner": self._owner,
                    "key": self._key,
                    "mine": mine,
                    "ttl": self._ttl,
                    "bound": self._bound,
                    "liveness": barging.WAITER_LIVENESS,
                    "listener": session.pid if listener is None else listener,
                },
            )
        except BaseException as exc:
            if mine:
                pass
            elif isinstance(exc, Exception) or session.ended:
                session.held.pop(self._key, None)
            else:  # cancelled in flight on a live session: the claim stays until close()
                self._unanswered = session
            if isinstance(exc, Exception):
                raise backend._failed(exc) from exc
            raise
        return session, mine, rows

    @property
    def idle(self) -> bool:
        """Whether :meth:`close` has nothing to do: the blocking face then skips a hop."""
        own_left = self._session is None or self._renewed or self._granted
        return self._place.left and own_left and self._unanswered is None

    async def wait(self, timeout: float) -> None:
        await self._place.wait(timeout, self._backend)

    async def close(self) -> None:
        backend = self._backend
        await self._give_back()
        await self._place.leave(backend.statements.leases)
        session, self._session = self._session, None
        if session is not None and not self._renewed and not self._granted:
            await backend.drop_own(session)
