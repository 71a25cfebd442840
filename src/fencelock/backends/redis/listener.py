"""The client's subscription to its wake-up channel: a thread (sync) or a task (asyncio).

Both only read messages and hand them to :class:`~.wakeups.Subscription`, which
decides what they mean; see :mod:`.wakeups` for how a release wakes one waiter.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

import redis
import redis.asyncio
import redis.asyncio.client
import redis.client

from fencelock.aio import TIMEOUTS, stop, within
from fencelock.backends.redis.errors import subscribing
from fencelock.backends.redis.wakeups import Subscription, Wakeups, new_channel
from fencelock.blocking_call import time_left

CONFIRM_TIMEOUT = 2.0
RETRY_AFTER = 0.1  # after a failed read of the channel, before reading it again


class WakeListener:
    """The sync client's subscription to its own channel, and its waiters by owner."""

    def __init__(self, client: redis.Redis, where: str, timeout: float = CONFIRM_TIMEOUT) -> None:
        self._client = client
        self.channel = new_channel()
        self._state = Subscription(where, timeout)
        self._pubsub: redis.client.PubSub | None = None
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()
        self._changed = threading.Condition()
        self.wakeups = Wakeups(threading.Event, threading.Lock())
        self._closed = False

    def ensure_listening(self) -> bool:
        """Subscribe if not subscribed; True if it was not (a wake-up may have been missed).

        Raises BackendUnavailable if the server refuses the subscription (ACL) or
        does not confirm it within the client's timeout.
        """
        if self._state.confirmed:
            return False
        with self._changed:
            self._state.restart()
        with self._guard:
            if self._pubsub is None:
                self._start()
        patience = self._state.timeout
        call_left = time_left()  # an acquire's time, plus one request, cuts it shorter
        if call_left is not None:
            patience = min(patience, max(call_left, 0.0))
        deadline = time.monotonic() + patience
        with self._changed:
            while (left := self._state.time_left(deadline, time.monotonic())) is not None:
                self._changed.wait(left)
        return True

    def _start(self) -> None:
        pubsub = self._client.pubsub()  # type: ignore[no-untyped-call]  # redis-py: unannotated
        with subscribing(self._state.where):
            pubsub.subscribe(self.channel)
        self._pubsub = pubsub
        self._thread = threading.Thread(
            target=self._listen, args=(pubsub,), daemon=True, name="fencelock-redis-listener"
        )
        self._thread.start()

    def _listen(self, pubsub: redis.client.PubSub) -> None:
        while not self._closed:
            try:
                message = pubsub.get_message(timeout=0.2)
            except Exception as exc:
                if self._failed(pubsub, exc):
                    return
                time.sleep(RETRY_AFTER)
                continue
            if message is not None and self._state.on_message(message, self.wakeups):
                with self._changed:
                    self._changed.notify_all()

    def _failed(self, pubsub: redis.client.PubSub, exc: Exception) -> bool:
        """Record a failed read; True if this listener is done (refused for good)."""
        refused = isinstance(exc, redis.ResponseError)
        if refused:
            with self._guard:
                self._pubsub = self._thread = None
            with contextlib.suppress(Exception):
                pubsub.close()
        with self._changed:
            self._state.on_error(exc, self.wakeups)
            self._changed.notify_all()
        return refused

    def close(self) -> None:
        self._closed = True
        if self._thread is not None:
            self._thread.join(2)
        if self._pubsub is not None:
            with contextlib.suppress(Exception):
                self._pubsub.close()


class AsyncWakeListener:
    """:class:`WakeListener` for an asyncio client: a task reads the channel."""

    def __init__(
        self, client: redis.asyncio.Redis, where: str, timeout: float = CONFIRM_TIMEOUT
    ) -> None:
        self._client = client
        self.channel = new_channel()
        self._state = Subscription(where, timeout)
        self._pubsub: redis.asyncio.client.PubSub | None = None
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self.wakeups = Wakeups(asyncio.Event, contextlib.nullcontext())

    async def ensure_listening(self) -> bool:
        """As :meth:`WakeListener.ensure_listening`."""
        if self._state.confirmed:
            return False
        self._state.restart()
        if self._pubsub is None:
            await self._start()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._state.timeout
        while (left := self._state.time_left(deadline, loop.time())) is not None:
            self._changed.clear()
            with contextlib.suppress(*TIMEOUTS):
                await within(left, self._changed.wait())
        return True

    async def _start(self) -> None:
        pubsub = self._client.pubsub()
        self._pubsub = pubsub
        try:
            with subscribing(self._state.where):
                await within(self._state.timeout, pubsub.subscribe(self.channel))
        except BaseException:
            self._pubsub = None
            with contextlib.suppress(Exception):
                await pubsub.aclose()  # type: ignore[no-untyped-call]
            raise
        self._task = asyncio.get_running_loop().create_task(self._listen(pubsub))

    async def _listen(self, pubsub: redis.asyncio.client.PubSub) -> None:
        while True:
            try:
                message = await pubsub.get_message(timeout=1.0)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if await self._failed(pubsub, exc):
                    return
                await asyncio.sleep(RETRY_AFTER)
                continue
            if message is not None and self._state.on_message(message, self.wakeups):
                self._changed.set()

    async def _failed(self, pubsub: redis.asyncio.client.PubSub, exc: Exception) -> bool:
        refused = isinstance(exc, redis.ResponseError)
        if refused:
            self._pubsub = self._task = None
            with contextlib.suppress(Exception):
                await pubsub.aclose()  # type: ignore[no-untyped-call]
        self._state.on_error(exc, self.wakeups)
        self._changed.set()
        return refused

    async def close(self) -> None:
        if self._task is not None:
            await stop(self._task)
        if self._pubsub is not None:
            with contextlib.suppress(Exception):
                await self._pubsub.aclose()  # type: ignore[no-untyped-call]
