"""Redlock waiters: each node's release channel, watched through one pub/sub per node.

Independent masters have no shared queue, so a Redlock release broadcasts on the
lock's channel of every node it held (``redlock_release.lua``), and every waiter of
that lock retries; the first to win a quorum takes it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from fencelock.backends.redis_listener import stop_listening

CONFIRM_TIMEOUT = 2.0


class AsyncReleaseListener:
    """One pub/sub connection per asyncio client; a task fans releases out to waiters."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._pubsub: Any = None
        self._confirmed: dict[str, asyncio.Event] = {}
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._task: asyncio.Task[None] | None = None

    async def watch(self, channel: str, event: asyncio.Event | None = None) -> asyncio.Event:
        """Subscribe (once) and return an event set on the next release of ``channel``."""
        event = event or asyncio.Event()
        if self._pubsub is None:
            self._pubsub = self._client.pubsub()
        if channel not in self._confirmed:
            self._confirmed[channel] = asyncio.Event()
            await self._pubsub.subscribe(channel)
        self._waiters.setdefault(channel, set()).add(event)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._listen())
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._confirmed[channel].wait(), CONFIRM_TIMEOUT)
        return event

    def unwatch(self, channel: str, event: asyncio.Event) -> None:
        self._waiters.get(channel, set()).discard(event)

    async def _listen(self) -> None:
        while True:
            try:
                message = await self._pubsub.get_message(timeout=1.0)
            except asyncio.CancelledError:
                raise
            except Exception:
                self._wake_all()
                await asyncio.sleep(0.1)
                continue
            if message is None:
                continue
            channel = message["channel"]
            if message["type"] == "subscribe" and channel in self._confirmed:
                self._confirmed[channel].set()
            elif message["type"] == "message":
                for event in self._waiters.get(channel, ()):
                    event.set()

    def _wake_all(self) -> None:
        for waiters in self._waiters.values():
            for event in waiters:
                event.set()

    async def close(self) -> None:
        await stop_listening(self._task, self._pubsub)
