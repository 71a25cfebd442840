"""An asyncio event loop whose clock is virtual: when every task waits, time jumps to
the next timer instead of passing. The loop's selector is a stand-in that never has a
socket ready; the simulated network is timers too.

Each client reads a clock of its own (:class:`ClientClock`: a rate off true time, and
jumps): a task started in a client's context sees ``loop.time()`` (and so
``fencelock.clock.now``) on that clock, and its timers are set by it; the loop itself
and the model servers keep true time."""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import math
import selectors
from collections.abc import Awaitable, Callable, Mapping
from typing import Any


class Stalled(RuntimeError):
    """Every task waits and no timer is set: nothing can ever happen again."""


class VirtualClock:
    """The simulation's one true time, in seconds."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def advance(self, seconds: float) -> None:
        if seconds > 0:  # by one step of the float at least: a wait always ends
            self.now = max(self.now + seconds, math.nextafter(self.now, math.inf))


class ClientClock:
    """A client's own clock: it reads ``start + (true - start) * rate + jumped``."""

    def __init__(self, start: float, rate: float = 1.0) -> None:
        self.start, self.rate, self.jumped = start, rate, 0.0
        self.jumped_at = start  # true time of the last jump

    def reading(self, true_now: float) -> float:
        return self.start + (true_now - self.start) * self.rate + self.jumped

    def true_at(self, reading: float) -> float:
        """The first true time at which this clock reads ``reading`` or more (with no
        later jump): rounded up, so a timer set by this clock is never early by it."""
        true = self.start + (reading - self.start - self.jumped) / self.rate
        while self.reading(true) < reading:
            true = math.nextafter(true, math.inf)
        return true


# The clock of the client whose task is running; None: the loop's or a server's (true).
client_clock: contextvars.ContextVar[ClientClock | None] = contextvars.ContextVar(
    "client_clock", default=None
)


# The number of the client whose task is running (None: the loop's or a server's).
client_number: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "client_number", default=None
)
# How a connection is made in a run (``loop.create_connection``'s stand-in), if any.
Dial = Callable[..., Awaitable[tuple[asyncio.BaseTransport, asyncio.BaseProtocol]]]


def server_side() -> contextvars.Context:
    """A context in which to run a model server's work: on true time."""
    context = contextvars.copy_context()
    context.run(client_clock.set, None)
    return context


class _Selector(selectors.BaseSelector):
    """Registers what asyncio asks it to (its self-pipe) and never reports it ready; a
    wait of ``timeout`` seconds moves the virtual clock on by that much."""

    def __init__(self, clock: VirtualClock) -> None:
        self._clock = clock
        self._keys: dict[int, selectors.SelectorKey] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        key = selectors.SelectorKey(fileobj, fd, events, data)
        self._keys[fd] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        return self._keys.pop(fd)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            raise Stalled("every task waits, and no timer is set")
        self._clock.advance(timeout)
        return []

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._keys

    def close(self) -> None:
        self._keys.clear()


class VirtualLoop(asyncio.SelectorEventLoop):
    """The loop; ``after_step`` runs after every turn (the simulator's invariants)."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(_Selector(clock))
        self.clock = clock
        self.after_step: Callable[[], None] = lambda: None
        self.steps = 0
        self.dial: Dial | None = None

    async def create_connection(  # type: ignore[override]
        self,
        protocol_factory: Callable[[], asyncio.BaseProtocol],
        host: str | None = None,
        port: int | None = None,
        **options: Any,
    ) -> tuple[asyncio.BaseTransport, asyncio.BaseProtocol]:
        """A connection to a simulated server (there are no sockets here)."""
        if self.dial is None:
            raise ConnectionRefusedError(f"nothing listens at {host}:{port} in the simulation")
        return await self.dial(protocol_factory, host, port)

    def time(self) -> float:
        own = client_clock.get()
        return self.clock.now if own is None else own.reading(self.clock.now)

    def call_at(  # type: ignore[override]
        self,
        when: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        # ``when`` is on the clock of whoever sets the timer; the loop keeps true time.
        own = client_clock.get() if context is None else context.get(client_clock)
        if own is not None:
            when = own.true_at(when)
        return super().call_at(when, callback, *args, context=context)

    def call_later(  # type: ignore[override]
        self,
        delay: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        own = client_clock.get() if context is None else context.get(client_clock)
        now = self.clock.now if own is None else own.reading(self.clock.now)
        return self.call_at(now + delay, callback, *args, context=context)

    def jump(self, own: ClientClock, seconds: float) -> None:
        """``own`` jumps ``seconds`` ahead: its timers come due that much sooner."""
        own.jumped += seconds
        own.jumped_at = self.clock.now
        scheduled: list[asyncio.TimerHandle] = self._scheduled  # type: ignore[attr-defined]
        for handle in scheduled:
            if handle._context.get(client_clock) is own:  # type: ignore[attr-defined]
                handle._when -= seconds / own.rate  # type: ignore[attr-defined]
        heapq.heapify(scheduled)

    def _run_once(self) -> None:
        super()._run_once()  # type: ignore[misc]
        self.steps += 1
        self.after_step()
