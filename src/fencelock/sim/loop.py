"""An asyncio event loop whose clock is virtual: when every task waits, time jumps to
the next timer instead of passing. The loop's selector is a stand-in that never has a
socket ready; the simulated network is timers too."""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable, Mapping
from typing import Any


class Stalled(RuntimeError):
    """Every task waits and no timer is set: nothing can ever happen again."""


class VirtualClock:
    """The simulation's one true time, in seconds."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def advance(self, seconds: float) -> None:
        self.now += max(seconds, 0.0)


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

    def time(self) -> float:
        return self.clock.now

    def _run_once(self) -> None:
        super()._run_once()  # type: ignore[misc]
        self.steps += 1
        self.after_step()
