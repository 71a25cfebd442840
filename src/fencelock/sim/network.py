"""The simulated network between clients and a model server: each request and each
reply travels for a random time and may be lost; a request whose reply was lost may be
applied again later (a driver resending it), and a paused client sends and hears
nothing until it resumes. Every draw comes from the run's one
seeded generator, in an order the virtual loop makes deterministic."""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from fencelock.errors import BackendUnavailable
from fencelock.sim.loop import server_side

T = TypeVar("T")


def shown(value: object) -> str:
    """``repr(value)`` for the trace, a set's members sorted (by their repr) at any depth:
    a set's own order follows ``PYTHONHASHSEED``, and the trace is the seed's alone."""
    if isinstance(value, (set, frozenset)) and value:
        return "{" + ", ".join(sorted(shown(item) for item in value)) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{shown(k)}: {shown(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(shown(item) for item in value) + "]"
    if isinstance(value, tuple):
        last = "," if len(value) == 1 else ""
        return "(" + ", ".join(shown(item) for item in value) + last + ")"
    return repr(value)


@dataclass(frozen=True)
class NetworkConditions:
    """How the network behaves: one-way delays and the odds of each mishap."""

    delay: tuple[float, float] = (0.0005, 0.005)
    slow: float = 0.02  # odds that a message takes ``slow_delay`` instead
    slow_delay: tuple[float, float] = (0.05, 0.8)
    drop: float = 0.01  # a request or a reply lost
    duplicate: float = 0.3  # odds that a request whose reply was lost lands again later


class Network:
    def __init__(
        self, rng: random.Random, conditions: NetworkConditions, now: Callable[[], float]
    ) -> None:
        # ``now``: true time. A client's loop.time() is its own clock's; the network's
        # and the servers' work runs on true time (each callback in a server context).
        self.rng, self.conditions, self.now = rng, conditions, now
        self.server = server_side()
        self.paused_until: dict[int, float] = {}
        self.dead: set[int] = set()  # clients whose process was killed: nothing in or out
        # A link (one TCP connection: Redlock's one per node) delivers in order: when its
        # last message in each direction arrives.
        self._last: dict[tuple[object, str], float] = {}
        self.messages = 0
        self.log: Callable[[str], None] = lambda line: None

    def _delay(self) -> float:
        w = self.conditions
        low, high = w.slow_delay if self.rng.random() < w.slow else w.delay
        return self.rng.uniform(low, high)

    def _resumes(self, client: int, now: float) -> float:
        """How long until ``client`` can send or hear again (0: now)."""
        return max(self.paused_until.get(client, 0.0) - now, 0.0)

    def pause(self, client: int, now: float, seconds: float) -> None:
        self.paused_until[client] = max(self.paused_until.get(client, 0.0), now + seconds)

    def push(self, client: int, deliver: Callable[[], None]) -> None:
        """A message from the server to ``client`` (a session's end): delayed, perhaps
        lost, held while the client is paused."""
        loop = asyncio.get_running_loop()

        def arrive() -> None:
            if client in self.dead:
                return
            late = self._resumes(client, self.now())
            if late > 0:
                loop.call_later(late, arrive, context=self.server)
            else:
                deliver()

        if self.rng.random() >= self.conditions.drop:
            loop.call_later(self._delay(), arrive, context=self.server)

    def _in_order(self, link: object | None, way: str, now: float, delay: float) -> float:
        """``delay``, or longer so as not to overtake what ``link`` sent before."""
        if link is None:
            return delay
        # after the last, strictly: timers due at one instant may run in either order
        at = max(now + delay, math.nextafter(self._last.get((link, way), 0.0), math.inf))
        self._last[link, way] = at
        return at - now

    async def call(
        self,
        client: int,
        apply: Callable[[], T],
        timeout: float,
        what: str,
        link: object | None = None,
    ) -> T:
        """``apply()`` on the server once the request arrives; its result once the reply
        does, or :class:`BackendUnavailable` after ``timeout`` seconds. Messages on one
        ``link`` arrive in the order they were sent; others may overtake each other."""
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[T] = loop.create_future()
        self.messages += 1
        if self.rng.random() >= self.conditions.drop and client not in self.dead:
            now = self.now()
            delay = self._in_order(link, "in", now, self._resumes(client, now) + self._delay())
            loop.call_later(
                delay, self._arrive, client, apply, reply, what, link, context=self.server
            )
        try:
            return await asyncio.wait_for(reply, timeout)
        except asyncio.TimeoutError:
            unanswered = f"simulated server: no answer to {what} in {timeout}s"
            raise BackendUnavailable(unanswered) from None

    def _arrive(
        self,
        client: int,
        apply: Callable[[], T],
        reply: asyncio.Future[T],
        what: str,
        link: object | None,
    ) -> None:
        """The request reaches the server: applied; its reply sent, lost, or lost and the
        request sent again later (a driver resending it)."""
        result = apply()
        self.log(f"server: {what} from client {client} -> {shown(result)}")
        loop = asyncio.get_running_loop()
        if self.rng.random() >= self.conditions.drop:
            delay = self._in_order(link, "out", self.now(), self._delay())
            loop.call_later(delay, self._answer, client, reply, result, what, context=self.server)
        elif link is None and self.rng.random() < self.conditions.duplicate:
            loop.call_later(self._delay(), self._again, client, apply, what, context=self.server)

    def _again(self, client: int, apply: Callable[[], object], what: str) -> None:
        self.log(f"server: {what} from client {client}, sent again -> {shown(apply())}")

    def _answer(self, client: int, reply: asyncio.Future[T], result: T, what: str) -> None:
        if client in self.dead:
            return
        loop = asyncio.get_running_loop()
        late = self._resumes(client, self.now())
        if late > 0:  # a paused client reads it when it resumes
            loop.call_later(late, self._answer, client, reply, result, what, context=self.server)
        elif not reply.done():
            self.log(f"client {client}: reply to {what}: {shown(result)}")
            reply.set_result(result)

    def carry(
        self, client: int, to_server: bool, deliver: Callable[[], None], reliable: bool = False
    ) -> bool:
        """One message of a connection of ``client``'s (to the server, or from it):
        ``deliver()`` once it arrives, in a server context. False if it is lost (a
        ``reliable`` one never is: a connection's reset). A paused client sends and hears
        nothing until it resumes; a dead one, nothing at all. Messages may overtake each
        other: the ends of a connection put them back in order."""
        if to_server and client in self.dead:
            return True  # never sent; its sender will never know
        self.messages += 1
        if not reliable and self.rng.random() < self.conditions.drop:
            return False
        loop = asyncio.get_running_loop()
        now = self.now()
        delay = (self._resumes(client, now) if to_server else 0.0) + self._delay()

        def arrive() -> None:
            if to_server:  # what a client sent before it died still arrives
                deliver()
                return
            if client in self.dead:
                return
            late = self._resumes(client, self.now())
            if late > 0:  # a paused client reads it when it resumes
                loop.call_later(late, arrive, context=self.server)
            else:
                deliver()

        loop.call_later(delay, arrive, context=self.server)
        return True
