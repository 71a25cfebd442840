"""The asyncio face of ``redis://``: the same conversations and wake-ups, on ``redis.asyncio``."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections.abc import Sequence

from fencelock import clock, forking
from fencelock.aio import stop
from fencelock.backends.base import AttemptResult, LockInfo, Renewal
from fencelock.backends.redis import conversations
from fencelock.backends.redis.attempt import (
    UNDO_RETRY,
    UNDO_SETTLE,
    AsyncRedisAttempt,
    Undo,
    best_effort,
    undoing,
)
from fencelock.backends.redis.errors import DRIVER_ERRORS, translate
from fencelock.backends.redis.listener import AsyncWakeListener
from fencelock.backends.redis.options import aclose_client, redis_client
from fencelock.backends.redis.scripts import Command, LockKeys
from fencelock.backends.redis.server import RedisServer, Undoing
from fencelock.backends.redis.wire import AsyncWire
from fencelock.engine.urls import ParsedURL


class AsyncRedisBackend(RedisServer):
    """Leases on one Redis server, for asyncio."""

    def __init__(self, parsed: ParsedURL) -> None:
        super().__init__(parsed)
        self._connect()
        forking.register(self)

    def _connect(self) -> None:
        """This process's client, script connections and wake-up listener (none opened yet)."""
        self.redis = redis_client(self.options, asyncio=True)
        self.wire = AsyncWire(self.redis)
        self.listener = AsyncWakeListener(self.redis, self.where, self.options.timeout)
        self._undoing: set[asyncio.Task[None]] = set()

    async def open(self) -> None:
        with self._translated():
            await self.wire.talk(conversations.ping())

    def _reset_after_fork(self) -> None:
        """In a forked child: the parent's connections and tasks (on its loop) stay its own.

        Finalized here, they would unregister their sockets from the parent's epoll set.
        """
        forking.abandon(self.redis, self.wire, self.listener, self._undoing)
        self._connect()

    async def _talk(self, talk: conversations.Conversation[conversations.T]) -> conversations.T:
        try:
            return await self.wire.talk(talk)
        except DRIVER_ERRORS as exc:
            raise translate(exc, self.where, self.options.tls) from exc

    def attempt(
        self, name: str, owner: str, ttl: float, fair: bool = False, renewed: bool = True
    ) -> AsyncRedisAttempt:
        return AsyncRedisAttempt(self, name, owner, ttl, fair)

    async def acquire(self, command: Command, keys: LockKeys, owner: str) -> AttemptResult:
        return await self._talk(conversations.acquire(command, keys, owner, self.options))

    async def release(self, name: str, owner: str) -> bool:
        return await self._talk(conversations.release(self.keys.of(name), owner))

    async def renew(self, name: str, owner: str, ttl: float) -> bool:
        return await self._talk(conversations.renew(self.keys.of(name), owner, ttl))

    async def renew_many(self, renewals: Sequence[Renewal]) -> list[bool]:
        return await self._talk(conversations.renew_many(renewals, self.keys))

    async def inspect(self, name: str) -> LockInfo | None:
        return await self._talk(conversations.inspect(name, self.keys))

    async def list(self, prefix: str) -> list[LockInfo]:
        return await self._talk(conversations.held(prefix, self.keys))

    async def waiters(self, name: str) -> builtins.list[str]:
        return await self._talk(conversations.waiters(name, self.keys))

    async def undo(self, keys: LockKeys, owner: str, what: Undo, ttl: float) -> None:
        """Give back what a try by ``owner`` left on the server (see :class:`Undo`)."""
        talk = undoing(what, keys, owner, self.listener.channel)
        if talk is not None:
            with best_effort(what):
                await self._talk(talk)
        elif what is Undo.LATER:
            undo = self._undo_later(keys, owner, self.listener.channel)
            task = asyncio.get_running_loop().create_task(self._undo(undo, clock.now() + ttl))
            self._undoing.add(task)
            task.add_done_callback(self._undoing.discard)

    async def _undo(self, undo: Undoing, until: float) -> None:
        """In the background, once the server answers again: as the sync backend's."""
        while clock.now() < until:
            try:
                await self.wire.talk(conversations.ping())
                await asyncio.sleep(UNDO_SETTLE)
                await self.wire.talk(undo())
                return
            except DRIVER_ERRORS:
                await asyncio.sleep(UNDO_RETRY)

    async def close(self) -> None:
        for task in list(self._undoing):
            with contextlib.suppress(Exception):
                await stop(task)
        await self.listener.close()
        await self.wire.close()
        await aclose_client(self.redis)
