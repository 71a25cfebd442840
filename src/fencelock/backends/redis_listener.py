"""Wake-ups for waiters of a sync Redis client: one pub/sub channel per client.

A waiter that finds the lease busy is queued on the server as ``owner@channel``
(``acquire.lua``). A release publishes the oldest waiter's owner on that waiter's
client channel (``free.lua``), so a release wakes one waiter in one process, not
every waiter everywhere. The client's listener thread sets that waiter's event. A
wake-up that arrives before its waiter asks for it is kept, not lost.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections import OrderedDict
from typing import Any

from fencelock.backends.redis_common import KEY_PREFIX

CONFIRM_TIMEOUT = 2.0
MAX_EARLY = 1024


def new_channel() -> str:
    """A channel name of the client's own (random: clients never share one)."""
    return f"{KEY_PREFIX}wake:{secrets.token_hex(8)}"


class EarlyWakeups:
    """Wake-ups for owners nobody waits for yet: the waiter may still be on its way."""

    def __init__(self) -> None:
        self._owners: OrderedDict[str, None] = OrderedDict()

    def add(self, owner: str) -> None:
        self._owners[owner] = None
        if len(self._owners) > MAX_EARLY:
            self._owners.popitem(last=False)

    def take(self, owner: str) -> bool:
        return self._owners.pop(owner, 0) is None


class WakeListener:
    """The sync client's subscription to its own channel, and its waiters by owner."""

    def __init__(self, client: Any) -> None:
        self.channel = new_channel()
        self._client = client
        self._pubsub: Any = None
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()
        self._subscribed = threading.Event()
        self._waiters: dict[str, threading.Event] = {}
        self._early = EarlyWakeups()
        self._closed = False

    def expect(self, owner: str) -> threading.Event:
        """An event set when ``owner`` is woken (already set if it was woken before)."""
        event = threading.Event()
        with self._guard:
            self._waiters[owner] = event
            if self._early.take(owner):
                event.set()
        return event

    def forget(self, owner: str) -> None:
        with self._guard:
            self._waiters.pop(owner, None)
            self._early.take(owner)

    def ensure_listening(self) -> bool:
        """Subscribe if not subscribed; True if it was not (a wake-up may have been missed)."""
        if self._subscribed.is_set():
            return False
        with self._guard:
            if self._pubsub is None:
                self._pubsub = self._client.pubsub()
                self._pubsub.subscribe(self.channel)
                self._thread = threading.Thread(
                    target=self._listen, daemon=True, name="fencelock-redis-listener"
                )
                self._thread.start()
        self._subscribed.wait(CONFIRM_TIMEOUT)
        return True

    def _listen(self) -> None:
        while not self._closed:
            try:
                message = self._pubsub.get_message(timeout=0.2)
            except Exception:
                self._lost_connection()
                time.sleep(0.1)
                continue
            if message is None:
                continue
            if message["type"] == "subscribe":
                self._subscribed.set()
            elif message["type"] == "message":
                self._wake(message["data"])

    def _wake(self, owner: str) -> None:
        with self._guard:
            event = self._waiters.get(owner)
            if event is None:
                self._early.add(owner)
            else:
                event.set()

    def _lost_connection(self) -> None:
        """Wake every waiter: each retries, and meets the error or takes the lease."""
        self._subscribed.clear()
        with self._guard:
            for event in self._waiters.values():
                event.set()

    def close(self) -> None:
        self._closed = True
        if self._thread is not None:
            self._thread.join(2)
        if self._pubsub is not None:
            with contextlib.suppress(Exception):
                self._pubsub.close()
