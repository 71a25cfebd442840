"""One pub/sub connection per client, shared by every waiter of that client.

A waiter *watches* a lock's release channel before it retries, so a release
between its failed attempt and its wait cannot be missed; the listener thread
sets the waiter's event when a release is published. Channels stay subscribed
while idle (up to ``MAX_IDLE``) so a busy lock costs one subscription, not one
per wait.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

MAX_IDLE = 256
CONFIRM_TIMEOUT = 2.0


@dataclass
class _Channel:
    confirmed: threading.Event = field(default_factory=threading.Event)
    waiters: set[threading.Event] = field(default_factory=set)


class ReleaseListener:
    """Fans release notifications out to waiting attempts (sync client)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._pubsub: Any = None
        self._channels: OrderedDict[str, _Channel] = OrderedDict()
        self._guard = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def watch(self, channel: str) -> threading.Event:
        """Subscribe (once) and return an event set on the next release of ``channel``."""
        event = threading.Event()
        with self._guard:
            if self._pubsub is None:
                self._pubsub = self._client.pubsub()
            state = self._channels.get(channel)
            if state is None:
                state = self._channels[channel] = _Channel()
                self._pubsub.subscribe(channel)
            self._channels.move_to_end(channel)
            state.waiters.add(event)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._listen, daemon=True, name="fencelock-redis-listener"
                )
                self._thread.start()
        state.confirmed.wait(CONFIRM_TIMEOUT)
        return event

    def unwatch(self, channel: str, event: threading.Event) -> None:
        with self._guard:
            state = self._channels.get(channel)
            if state is not None:
                state.waiters.discard(event)
            self._prune()

    def _prune(self) -> None:
        idle = [c for c, s in self._channels.items() if not s.waiters]
        for channel in idle[: max(len(idle) - MAX_IDLE, 0)]:
            del self._channels[channel]
            with contextlib.suppress(Exception):
                self._pubsub.unsubscribe(channel)

    def _listen(self) -> None:
        while not self._closed:
            try:
                message = self._pubsub.get_message(timeout=0.2)
            except Exception:
                self._wake_all()  # the waiters retry and meet the error themselves
                time.sleep(0.1)
                continue
            if message is not None:
                self._dispatch(message)

    def _dispatch(self, message: dict[str, Any]) -> None:
        with self._guard:
            state = self._channels.get(message["channel"])
            if state is None:
                return
            if message["type"] == "subscribe":
                state.confirmed.set()
            elif message["type"] == "message":
                for event in state.waiters:
                    event.set()

    def _wake_all(self) -> None:
        with self._guard:
            for state in self._channels.values():
                state.confirmed.clear()
                for event in state.waiters:
                    event.set()

    def close(self) -> None:
        self._closed = True
        if self._thread is not None:
            self._thread.join(2)
        if self._pubsub is not None:
            with contextlib.suppress(Exception):
                self._pubsub.close()
