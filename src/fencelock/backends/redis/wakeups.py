"""Wake-ups for the waiters of a Redis client (no I/O): one pub/sub channel per client.

A waiter that finds the lease busy is queued on the server as ``owner@channel``
(``acquire.lua``). A release publishes the oldest waiter's owner on that waiter's
client channel (``free.lua``), so a release wakes one waiter in one process, not
every waiter everywhere. The client's listener (:mod:`.listener`, a thread or a task)
feeds the channel's messages to :class:`Subscription`, which sets that waiter's event
in :class:`Wakeups`. A wake-up that arrives before its waiter asks for it is kept.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Generic, Protocol, TypeVar

from redis.exceptions import ResponseError

from fencelock.backends.redis.errors import subscription_refused
from fencelock.backends.redis.scripts import KEY_PREFIX
from fencelock.errors import BackendUnavailable

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


class Subscription:
    """Whether a client's wake-up channel is subscribed, and what went wrong last (pure).

    A listener thread or task feeds it the channel's messages and failures; a waiter
    asks it how long to wait on for the confirmation, and gets the error if refused.
    """

    def __init__(self, where: str, timeout: float) -> None:
        self.where, self.timeout = where, timeout
        self.confirmed = False
        self.error: BaseException | None = None

    def restart(self) -> None:
        """A waiter waits for this subscription's outcome, not an older one."""
        self.error = None

    def on_message(self, message: dict[str, Any], wakeups: Wakeups[Any]) -> bool:
        """Handle one pub/sub message; True if it confirmed the subscription."""
        if message["type"] == "subscribe":
            self.confirmed = True
            return True
        if message["type"] == "message":
            wakeups.wake(message["data"])
        return False

    def on_error(self, exc: BaseException, wakeups: Wakeups[Any]) -> bool:
        """The pub/sub connection failed; True if refused for good (ACL: asking again will
        not help, the next waiter subscribes afresh and meets the error)."""
        self.confirmed = False
        self.error = exc
        wakeups.wake_all()
        return isinstance(exc, ResponseError)

    def time_left(self, deadline: float, now: float) -> float | None:
        """How long a waiter waits on for the confirmation: None once confirmed.

        Raises BackendUnavailable if the server refused the subscription (ACL) or has
        not confirmed it by ``deadline``.
        """
        if self.confirmed:
            return None
        if self.error is not None:
            raise subscription_refused(self.error, self.where) from self.error
        if deadline <= now:
            raise BackendUnavailable(
                f"{self.where} did not confirm the wake-up subscription within {self.timeout:g}s"
            )
        return deadline - now
