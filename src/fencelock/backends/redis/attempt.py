"""One acquisition on ``redis://``: what it may have left on the server, and its undoing.

:class:`UndoTracker` (no I/O) follows each acquire request: answered busy (we are
queued), unanswered (timed out: the server may run it later), or abandoned (the
caller was cancelled or interrupted while it was out: it may have run). ``close()``
asks it what to undo. The two attempts below only send and wait.

A try that went unanswered may still run, whenever the server gets to it: the next
try stores an owner value of its own, and the unanswered one's is given back once
the server answers again. An undo names only the owner of the try it undoes, so it
can never delete the grant of a later try (nor can the late try be mistaken for one).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Protocol

from fencelock.backends.base import Acquired, AttemptResult, Busy
from fencelock.backends.redis import conversations
from fencelock.backends.redis.errors import unanswered
from fencelock.backends.redis.listener import AsyncWakeListener, WakeListener
from fencelock.backends.redis.scripts import Command, KeyStyle, LockKeys, acquire_command
from fencelock.backends.wakeup import await_then_rearm, wait_then_rearm
from fencelock.errors import BackendUnavailable, FencelockError
from fencelock.holder import new_identity

# Once a server that timed out answers again, wait this long before undoing what an
# unanswered acquire may have taken: its buffered request runs first, then the undo.
UNDO_SETTLE = 0.1
UNDO_RETRY = 0.5


class Undo(enum.Enum):
    """What closing an attempt must do on the server."""

    NOTHING = enum.auto()
    LEAVE_QUEUE = enum.auto()  # we were answered busy: our place in the queue
    NOW = enum.auto()  # abandoned: a lease or a place may be ours; give both back now
    LATER = enum.auto()  # unanswered: the server is slow; once it answers, give both back


class UndoTracker:
    """What an attempt's requests may have left on the server (pure).

    ``owner`` is the owner value the next try stores: the attempt's own until a try
    goes unanswered, then a fresh one per try (:meth:`before_try`).
    """

    queued = False
    unanswered = False
    abandoned = False

    def __init__(self, owner: str) -> None:
        self.owner = self._first_owner = owner

    def before_try(self) -> str | None:
        """Before each try: if the last one went unanswered (it may still run), this try
        stores a fresh owner, and the stale one is returned, for the caller to undo once
        the server answers; else None."""
        if not self.unanswered:
            return None
        stale, self.owner = self.owner, new_identity(self.owner)
        # What the stale owner left (its place in the queue too) goes with its undo.
        self.unanswered = self.queued = False
        return stale

    def sending(self) -> UndoTracker:
        """Around one acquire request: notes a failure that may leave something behind."""
        return self

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if isinstance(exc, BackendUnavailable):
            self.unanswered = self.unanswered or unanswered(exc)
        elif exc is not None and not isinstance(exc, Exception):
            self.abandoned = True  # cancelled or interrupted: the reply was never read

    def answered(self, result: AttemptResult) -> AttemptResult:
        self.queued = isinstance(result, Busy)
        if isinstance(result, Acquired) and self.owner != self._first_owner:
            return replace(result, owner=self.owner)  # the lease's owner is this try's
        return result

    def undo(self) -> Undo:
        """What to undo of the last try (its owner is ``owner``) now that the attempt
        ends; after it, nothing is left to undo."""
        undo = (
            Undo.NOW
            if self.abandoned
            else Undo.LATER
            if self.unanswered
            else Undo.LEAVE_QUEUE
            if self.queued
            else Undo.NOTHING
        )
        self.queued = self.unanswered = self.abandoned = False
        return undo


class Acquirer(Protocol):
    """What a sync attempt uses of its backend (:class:`RedisBackend` is one)."""

    @property
    def listener(self) -> WakeListener:
        """The wake-up subscription of the backend's connection."""

    @property
    def keys(self) -> KeyStyle:
        """Where the server keeps its locks."""

    def acquire(self, command: Command, keys: LockKeys, owner: str) -> AttemptResult:
        """Run the acquire script once."""

    def undo(self, keys: LockKeys, owner: str, what: Undo, ttl: float) -> None:
        """Give back what a try by ``owner`` may have left."""


class AsyncAcquirer(Protocol):
    """What an asyncio attempt uses of its backend (:class:`AsyncRedisBackend` is one)."""

    @property
    def listener(self) -> AsyncWakeListener:
        """The wake-up subscription of the backend's connection."""

    @property
    def keys(self) -> KeyStyle:
        """Where the server keeps its locks."""

    async def acquire(self, command: Command, keys: LockKeys, owner: str) -> AttemptResult:
        """Run the acquire script once."""

    async def undo(self, keys: LockKeys, owner: str, what: Undo, ttl: float) -> None:
        """Give back what a try by ``owner`` may have left."""


class _AttemptBase(UndoTracker):
    def __init__(self, channel: str, keys: LockKeys, owner: str, ttl: float, fair: bool) -> None:
        super().__init__(owner)
        self.ttl, self.keys = ttl, keys
        self._channel, self._fair = channel, fair
        self._command = acquire_command(self.keys, owner, ttl, channel, fair)

    def _next_owner(self) -> str | None:
        """:meth:`before_try`, with this try's command and wake-up following the owner."""
        stale = self.before_try()
        if stale is not None:
            self._command = acquire_command(
                self.keys, self.owner, self.ttl, self._channel, self._fair
            )
        return stale


class RedisAttempt(_AttemptBase):
    def __init__(self, backend: Acquirer, name: str, owner: str, ttl: float, fair: bool) -> None:
        super().__init__(backend.listener.channel, backend.keys.of(name), owner, ttl, fair)
        self._backend = backend
        self._event: threading.Event | None = None

    def try_acquire(self) -> AttemptResult:
        result = self._take()
        if isinstance(result, Busy) and self._event is None:
            self._event = self._backend.listener.wakeups.expect(self.owner)
            if self._backend.listener.ensure_listening():
                # We were queued before the subscription: look again, a wake-up may be gone.
                result = self._take()
        return result

    def _take(self) -> AttemptResult:
        stale = self._next_owner()
        if stale is not None:
            self._backend.undo(self.keys, stale, Undo.LATER, self.ttl)
            if self._event is not None:
                self._backend.listener.wakeups.forget(stale)
                self._event = self._backend.listener.wakeups.expect(self.owner)
        with self.sending():
            return self.answered(self._backend.acquire(self._command, self.keys, self.owner))

    def wait(self, timeout: float) -> None:
        wait_then_rearm(self._event, timeout)

    def interrupt(self) -> None:
        event = self._event
        if event is not None:
            event.set()

    def close(self) -> None:
        if self._event is not None:
            self._backend.listener.wakeups.forget(self.owner)
            self._event = None
        what = self.undo()
        if what is not Undo.NOTHING:
            self._backend.undo(self.keys, self.owner, what, self.ttl)


class AsyncRedisAttempt(_AttemptBase):
    def __init__(
        self, backend: AsyncAcquirer, name: str, owner: str, ttl: float, fair: bool
    ) -> None:
        super().__init__(backend.listener.channel, backend.keys.of(name), owner, ttl, fair)
        self._backend = backend
        self._event: asyncio.Event | None = None

    async def try_acquire(self) -> AttemptResult:
        result = await self._take()
        if isinstance(result, Busy) and self._event is None:
            self._event = self._backend.listener.wakeups.expect(self.owner)
            if await self._backend.listener.ensure_listening():
                result = await self._take()
        return result

    async def _take(self) -> AttemptResult:
        stale = self._next_owner()
        if stale is not None:
            await self._backend.undo(self.keys, stale, Undo.LATER, self.ttl)
            if self._event is not None:
                self._backend.listener.wakeups.forget(stale)
                self._event = self._backend.listener.wakeups.expect(self.owner)
        with self.sending():
            return self.answered(await self._backend.acquire(self._command, self.keys, self.owner))

    async def wait(self, timeout: float) -> None:
        await await_then_rearm(self._event, timeout)

    async def close(self) -> None:
        if self._event is not None:
            self._backend.listener.wakeups.forget(self.owner)
            self._event = None
        what = self.undo()
        if what is not Undo.NOTHING:
            await self._backend.undo(self.keys, self.owner, what, self.ttl)


def undoing(
    what: Undo, keys: LockKeys, owner: str, channel: str
) -> conversations.Conversation[None] | None:
    """The conversation that undoes ``what`` at once (None: nothing to say now)."""
    if what is Undo.NOW:
        return conversations.undo(keys, owner, channel)
    if what is Undo.LEAVE_QUEUE:
        return conversations.leave(keys, owner, channel)
    return None


@contextlib.contextmanager
def best_effort(what: Undo) -> Iterator[None]:
    """An abandoned attempt's undoing must not replace the cancellation that abandoned it."""
    if what is not Undo.NOW:
        yield
        return
    with contextlib.suppress(FencelockError):
        yield
