"""Wake-ups for waiters of a sync Redis client: one pub/sub channel per client.

A waiter that finds the lease busy is queued on the server as ``owner@channel``
(``acquire.lua``). A release publishes the oldest waiter's owner on that waiter's
client channel (``free.lua``), so a release wakes one waiter in one process, not
every waiter everywhere. The client's listener thread sets that waiter's event. A
wake-up that arrives before its waiter asks for it is kept, not lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Generic, Protocol, TypeVar

from redis.exceptions import ResponseError

from fencelock.backends.redis.errors import subscribing, subscription_refused
from fencelock.backends.redis.scripts import KEY_PREFIX
from fencelock.errors import BackendUnavailable

CONFIRM_TIMEOUT = 2.0
MAX_EARLY = 1024


def new_channel() -> str:
    """A channel name of the client's own (random: clients never share one)."""
    return f"{KEY_PREFIX}wake:{secrets.token_hex(8)}"


class Settable(Protocol):
    def set(self) -> None: ...


E = TypeVar("E", bound=Settable)


class Wakeups(Generic[E]):
    """Waiting attempts by owner, and wake-ups that came before their waiter asked.

    A wake-up can overtake its waiter: the waiter is queued by its acquire attempt,
    and a release may publish before that attempt's reply is even read.
    """

    def __init__(self, new_event: Callable[[], E], guard: AbstractContextManager[object]) -> None:
        self._new_event = new_event
        self._guard = guard
        self._waiters: dict[str, E] = {}
        self._early: OrderedDict[str, None] = OrderedDict()

    def expect(self, owner: str) -> E:
        """An event set when ``owner`` is woken (already set if it was woken before)."""
        event = self._new_event()
        with self._guard:
            self._waiters[owner] = event
            if self._early.pop(owner, 0) is None:
                event.set()
        return event

    def forget(self, owner: str) -> None:
        with self._guard:
            self._waiters.pop(owner, None)
            self._early.pop(owner, None)

    def wake(self, owner: str) -> None:
        with self._guard:
            event = self._waiters.get(owner)
            if event is not None:
                event.set()
                return
            self._early[owner] = None
            if len(self._early) > MAX_EARLY:
                self._early.popitem(last=False)

    def wake_all(self) -> None:
        """After a lost connection: every waiter retries, and meets the error or the lease."""
        with self._guard:
            for event in self._waiters.values():
                event.set()


def on_message(message: dict[str, Any], subscribed: Settable, wakeups: Wakeups[Any]) -> None:
    """Handle one pub/sub message of a client's wake-up channel."""
    if message["type"] == "subscribe":
        subscribed.set()
    elif message["type"] == "message":
        wakeups.wake(message["data"])


class WakeListener:
    """The sync client's subscription to its own channel, and its waiters by owner."""

    def __init__(self, client: Any, where: str, timeout: float = CONFIRM_TIMEOUT) -> None:
        self._client, self._where, self._timeout = client, where, timeout
        self.channel = new_channel()
        self._pubsub: Any = None
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()
        self._changed = threading.Condition()
        self._subscribed = threading.Event()
        self._error: BaseException | None = None
        self.wakeups = Wakeups(threading.Event, threading.Lock())
        self._closed = False

    def ensure_listening(self) -> bool:
        """Subscribe if not subscribed; True if it was not (a wake-up may have been missed).

        Raises BackendUnavailable if the server refuses the subscription (ACL) or
        does not confirm it within the client's timeout.
        """
        if self._subscribed.is_set():
            return False
        with self._changed:
            self._error = None  # wait for this subscription's outcome, not an older one
        with self._guard:
            if self._pubsub is None:
                pubsub = self._client.pubsub()
                with subscribing(self._where):
                    pubsub.subscribe(self.channel)
                self._pubsub = pubsub
                self._thread = threading.Thread(
                    target=self._listen,
                    args=(pubsub,),
                    daemon=True,
                    name="fencelock-redis-listener",
                )
                self._thread.start()
        deadline = time.monotonic() + self._timeout
        with self._changed:
            while not self._subscribed.is_set():
                if self._error is not None:
                    raise subscription_refused(self._error, self._where) from self._error
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BackendUnavailable(
                        f"{self._where} did not confirm the wake-up subscription "
                        f"within {self._timeout:g}s"
                    )
                self._changed.wait(left)
        return True

    def _listen(self, pubsub: Any) -> None:
        while not self._closed:
            try:
                message = pubsub.get_message(timeout=0.2)
            except Exception as exc:
                refused = isinstance(exc, ResponseError)  # ACL: asking again will not help
                if refused:  # the next waiter subscribes afresh (and gets the error)
                    with self._guard:
                        self._pubsub = self._thread = None
                    with contextlib.suppress(Exception):
                        pubsub.close()
                with self._changed:
                    self._subscribed.clear()
                    self._error = exc
                    self._changed.notify_all()
                self.wakeups.wake_all()
                if refused:
                    return
                time.sleep(0.1)
                continue
            if message is not None:
                on_message(message, self._subscribed, self.wakeups)
                if message["type"] == "subscribe":
                    with self._changed:
                        self._changed.notify_all()

    def close(self) -> None:
        self._closed = True
        if self._thread is not None:
            self._thread.join(2)
        if self._pubsub is not None:
            with contextlib.suppress(Exception):
                self._pubsub.close()


async def stop_listening(task: asyncio.Task[None] | None, pubsub: Any) -> None:
    """Stop an asyncio listener task and close its pub/sub connection."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    if pubsub is not None:
        with contextlib.suppress(Exception):
            await pubsub.aclose()
