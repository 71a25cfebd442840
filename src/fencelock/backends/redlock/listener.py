"""Redlock waiters: each node's release channels, on a pub/sub connection of fencelock's own.

Independent masters have no shared queue, so a Redlock release broadcasts on the
lock's channel of every node it held (``redlock_release.lua``), and the waiters of
that lock retry; the first to win a quorum takes it.

Each node has one pub/sub connection per client, shared by every name waited for.
It is a :class:`NodeLink` like the scripts' one: no task reads it, the loop hands it
each message as it arrives, and a ``SUBSCRIBE`` is a request answered by its
confirmation (or failed) within the per-node timeout. All of a connection's
subscriptions are made on it in order, so none is lost to a second connection (as
redis-py's ``PubSub`` did when several names were first waited for at once: each
opened a connection of its own, and only the last one was read).
"""

from __future__ import annotations

import asyncio
import functools
from collections import OrderedDict

from fencelock.backends.redis.options import RedisOptions
from fencelock.backends.redis.resp import RawReply, pack
from fencelock.backends.redlock.node import NodeLink
from fencelock.errors import BackendUnavailable

# Channels nobody waits for stay subscribed (their lock is likely contended again
# soon), up to this many per node; beyond it the least recently used is unsubscribed.
IDLE_SUBSCRIPTIONS = 256


def _ignore(reply: RawReply) -> None:
    pass


class Waiters:
    """A client's waiters for each release channel, oldest first.

    A release wakes the oldest only: one attempt per lock and client retries, not
    every waiter of the process (with hundreds of tasks, that herd kept the loop
    too busy to read replies within the per-node timeout). The others wait for
    their turn or for the holder's TTL. A waiter that leaves without the lease
    passes a wake-up it did not use on to the next one; when a connection is
    lost, every waiter retries (a release may have gone unheard).
    """

    def __init__(self) -> None:
        self._queues: dict[bytes, dict[asyncio.Event, None]] = {}

    def add(self, channel: bytes, event: asyncio.Event) -> None:
        """Queue ``event`` (a waiter already queued keeps its place)."""
        self._queues.setdefault(channel, {})[event] = None

    def remove(self, channel: bytes, event: asyncio.Event, pass_on: bool) -> bool:
        """Unqueue ``event``; True if nobody waits on ``channel`` any more."""
        queue = self._queues.get(channel)
        if queue is None or event not in queue:
            return False
        del queue[event]
        if not queue:
            del self._queues[channel]
            return True
        if pass_on and event.is_set():
            next(iter(queue)).set()
        return False

    def wake_first(self, channel: bytes) -> None:
        queue = self._queues.get(channel)
        if queue:
            next(iter(queue)).set()

    def wake_all(self) -> None:
        for queue in self._queues.values():
            for event in queue:
                event.set()


class ReleaseListener:
    """One node's subscriptions to release channels; its messages wake ``waiters``."""

    def __init__(self, options: RedisOptions, waiters: Waiters) -> None:
        self.link = NodeLink(options, on_push=self._on_push, on_end=self._on_end)
        self._waiters = waiters
        # Subscriptions of the current connection: confirmed (True), refused (False) or
        # asked for (pending). Cleared when the connection ends.
        self._subscribed: dict[bytes, asyncio.Future[bool]] = {}
        self._idle: OrderedDict[bytes, None] = OrderedDict()

    def subscribe(self, channel: bytes) -> asyncio.Future[bool] | None:
        """Subscribe to ``channel``, if not yet: None if confirmed already, else the future
        of its confirmation (True) or failure (False), decided within the per-node timeout.
        Until it is confirmed, a release on this node may go unheard.
        """
        self._idle.pop(channel, None)
        confirmation = self._subscribed.get(channel)
        if confirmation is not None and not (confirmation.done() and not confirmation.result()):
            return None if confirmation.done() else confirmation
        confirmation = asyncio.get_running_loop().create_future()
        self._subscribed[channel] = confirmation
        done = functools.partial(self._confirm, channel, confirmation)
        self.link.send(pack([b"SUBSCRIBE", channel]), done)
        return confirmation

    def idle(self, channel: bytes) -> None:
        """Nobody waits on ``channel`` now; unsubscribe the oldest idle beyond the bound."""
        self._idle[channel] = None
        if len(self._idle) > IDLE_SUBSCRIPTIONS:
            oldest, _ = self._idle.popitem(last=False)
            if self._subscribed.pop(oldest, None) is not None:
                self.link.send(pack([b"UNSUBSCRIBE", oldest]), _ignore)

    def _confirm(self, channel: bytes, confirmation: asyncio.Future[bool], reply: RawReply) -> None:
        if confirmation.done():
            return  # the connection ended first
        ok = isinstance(reply, list) and len(reply) == 3 and reply[0] == b"subscribe"
        if not ok and self._subscribed.get(channel) is confirmation:
            del self._subscribed[channel]  # the next waiter asks again
        confirmation.set_result(ok)

    def _on_push(self, message: list[RawReply]) -> None:
        if message[0] == b"message" and len(message) == 3:
            self._waiters.wake_first(message[1])

    def _on_end(self, error: BackendUnavailable) -> None:
        subscribed, self._subscribed = self._subscribed, {}
        for confirmation in subscribed.values():
            if not confirmation.done():
                confirmation.set_result(False)
        self._waiters.wake_all()  # they retry, and subscribe again on a new connection

    async def close(self) -> None:
        await self.link.close()
