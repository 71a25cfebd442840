"""``redis://`` and ``rediss://``: one Redis server (or a primary with replicas).

Acquire is one round trip: ``acquire.lua`` takes the key and issues the token
from the name's counter in the same script, or queues the caller. Release is
compare-and-delete that wakes the oldest waiter only (``free.lua``), through its
client's own pub/sub channel; waiters otherwise wake at the holder's TTL. The
scripts travel pre-packed on connections of their own (:mod:`.wire`).
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Sequence

from redis.exceptions import ResponseError

from fencelock import clock, forking
from fencelock.backends.base import AttemptResult, LockInfo, Renewal
from fencelock.backends.redis import conversations
from fencelock.backends.redis.attempt import (
    UNDO_RETRY,
    UNDO_SETTLE,
    RedisAttempt,
    Undo,
    best_effort,
    undoing,
)
from fencelock.backends.redis.errors import DRIVER_ERRORS, translate
from fencelock.backends.redis.listener import WakeListener
from fencelock.backends.redis.options import RedisOptions, close_client, redis_client
from fencelock.backends.redis.scripts import Command, LockKeys, renew_command
from fencelock.backends.redis.server import RedisServer, Undoing
from fencelock.backends.redis.wire import Wire
from fencelock.engine.urls import ParsedURL
from fencelock.errors import FencelockError


class RedisBackend(RedisServer):
    """Leases on one Redis server."""

    def __init__(self, parsed: ParsedURL, options: RedisOptions | None = None) -> None:
        super().__init__(parsed, options)
        self._connect()
        with self._translated():
            self.wire.talk(conversations.ping())
        forking.register(self)

    def _connect(self) -> None:
        """This process's client, script connections and wake-up listener (none opened yet)."""
        self.redis = redis_client(self.options)
        self.wire = Wire(self.redis)
        self.listener = WakeListener(self.redis, self.where, self.options.timeout)
        self._closed = threading.Event()  # stops this process's undo threads

    def _reset_after_fork(self) -> None:
        """In a forked child: the parent's sockets, channel and threads stay the parent's."""
        forking.abandon(self.redis, self.wire, self.listener)
        self._connect()

    def _talk(self, talk: conversations.Conversation[conversations.T]) -> conversations.T:
        try:
            return self.wire.talk(talk)
        except DRIVER_ERRORS as exc:
            raise translate(exc, self.where, self.options.tls) from exc

    def attempt(
        self, name: str, owner: str, ttl: float, fair: bool = False, renewed: bool = True
    ) -> RedisAttempt:
        return RedisAttempt(self, name, owner, ttl, fair)

    def acquire(self, command: Command, keys: LockKeys, owner: str) -> AttemptResult:
        return self._talk(conversations.acquire(command, keys, owner, self.options))

    def release(self, name: str, owner: str) -> bool:
        return self._talk(conversations.release(self.keys.of(name), owner))

    def renew(self, name: str, owner: str, ttl: float) -> bool:
        return self._talk(conversations.renew(self.keys.of(name), owner, ttl))

    def renew_many(self, renewals: Sequence[Renewal]) -> list[bool]:
        return self._talk(conversations.renew_many(renewals, self.keys))

    def renew_pipelined(self, renewals: Sequence[Renewal]) -> list[bool | FencelockError]:
        """Compare-and-extend each by its own script call, all sent at once (a cluster
        node runs a script on one slot only); an error reply (MOVED) is that one's."""
        commands = [renew_command(self.keys.of(n), owner, ttl) for n, owner, ttl in renewals]
        try:
            replies = self.wire.pipeline(commands)
        except DRIVER_ERRORS as exc:
            raise translate(exc, self.where, self.options.tls) from exc
        return [
            translate(reply, self.where, self.options.tls)
            if isinstance(reply, ResponseError)
            else reply == 1
            for reply in replies
        ]

    def inspect(self, name: str) -> LockInfo | None:
        return self._talk(conversations.inspect(name, self.keys))

    def list(self, prefix: str) -> list[LockInfo]:
        return self._talk(conversations.held(prefix, self.keys))

    def waiters(self, name: str) -> builtins.list[str]:
        return self._talk(conversations.waiters(name, self.keys))

    def undo(self, keys: LockKeys, owner: str, what: Undo, ttl: float) -> None:
        """Give back what a try by ``owner`` left on the server (see :class:`Undo`)."""
        talk = undoing(what, keys, owner, self.listener.channel)
        if talk is not None:
            with best_effort(what):
                self._talk(talk)
        elif what is Undo.LATER:
            undo = self._undo_later(keys, owner, self.listener.channel)
            threading.Thread(
                target=self._undo,
                args=(undo, clock.now() + ttl),
                daemon=True,
                name="fencelock-redis-undo",
            ).start()

    def _undo(self, undo: Undoing, until: float) -> None:
        """Off the caller's thread, once the server answers again: its buffered request
        runs first (UNDO_SETTLE), then the undo."""
        while clock.now() < until and not self._closed.is_set():
            try:
                self.wire.talk(conversations.ping())
                if not self._closed.wait(UNDO_SETTLE):
                    self.wire.talk(undo())
                return
            except DRIVER_ERRORS:
                self._closed.wait(UNDO_RETRY)

    def close(self) -> None:
        self._closed.set()
        self.listener.close()
        self.wire.close()
        close_client(self.redis)
