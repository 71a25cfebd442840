"""Barriers on the count-down latch: :class:`Barrier` (every party waits until all
``parties`` have arrived) and :class:`DoubleBarrier` (Curator's
``DistributedDoubleBarrier``: ``enter`` waits until all have entered, ``leave`` until
all have left).

An arrival takes one count away, arming the latch with ``parties`` first if nobody has
(and counting again until its count is taken: one taken while another party is still
arming counts nothing), then waits for zero: the count lives on the server, so a party that dies
after arriving still counts, and none passes before the last arrives. A barrier's name
serves one round: once it has opened, name the next round anew (``f"{name}/{round}"``),
as a late waiter of the last round could otherwise miss its opening. Backends without
latches (MySQL) have no barriers either (:class:`ConfigError`, saying why).
"""

from __future__ import annotations

from fencelock import clock
from fencelock.engine.latch import validate_count
from fencelock.engine.names import validate_name
from fencelock.errors import ConfigError
from fencelock.primitives.client_like import AsyncClientLike, ClientLike
from fencelock.primitives.latch import AsyncLatch, Latch


class _BarrierBase:
    def __init__(self, name: str, parties: int) -> None:
        self.name = validate_name(name)
        try:
            self.parties = validate_count(parties)
        except ConfigError as exc:
            said = str(exc).replace("a latch's count", "parties")
            raise ConfigError(f"barrier {name!r}: {said}") from None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} parties={self.parties}>"


def _latch_of(client: ClientLike, name: str, what: str) -> Latch:
    try:
        return Latch(client, name)
    except ConfigError as exc:
        raise ConfigError(f"{what} is built on a count-down latch: {exc}") from None


def _alatch_of(client: AsyncClientLike, name: str, what: str) -> AsyncLatch:
    try:
        return AsyncLatch(client, name)
    except ConfigError as exc:
        raise ConfigError(f"{what} is built on a count-down latch: {exc}") from None


def _arrive(latch: Latch, parties: int, timeout: float | None) -> bool:
    ends = None if timeout is None else clock.now() + timeout
    # Counted only once the latch is armed: one that another party is still arming
    # counts nothing, so arm it (or wait for that party to) and count down again.
    while not latch.count_down():
        if ends is not None and clock.now() >= ends:
            return False
        latch.try_set_count(parties)
    return latch.wait(None if ends is None else max(ends - clock.now(), 0.0))


async def _aarrive(latch: AsyncLatch, parties: int, timeout: float | None) -> bool:
    ends = None if timeout is None else clock.now() + timeout
    while not await latch.count_down():
        if ends is not None and clock.now() >= ends:
            return False
        await latch.try_set_count(parties)
    return await latch.wait(None if ends is None else max(ends - clock.now(), 0.0))


class Barrier(_BarrierBase):
    """Every party that calls :meth:`wait` waits until ``parties`` have (sync API)."""

    def __init__(self, client: ClientLike, name: str, parties: int) -> None:
        super().__init__(name, parties)
        self._latch = _latch_of(client, self.name, f"barrier {self.name!r}")

    def wait(self, timeout: float | None = None) -> bool:
        """Arrive, then block until every party has (True) or ``timeout`` passes (False:
        the arrival still counts)."""
        return _arrive(self._latch, self.parties, timeout)

    def arrived(self) -> int:
        """How many parties have arrived in this round so far."""
        left = self._latch.count()
        return 0 if left == 0 else self.parties - left


class AsyncBarrier(_BarrierBase):
    """:class:`Barrier` for asyncio."""

    def __init__(self, client: AsyncClientLike, name: str, parties: int) -> None:
        super().__init__(name, parties)
        self._latch = _alatch_of(client, self.name, f"barrier {self.name!r}")

    async def wait(self, timeout: float | None = None) -> bool:
        """Arrive and wait for every party; as :meth:`Barrier.wait`."""
        return await _aarrive(self._latch, self.parties, timeout)


class DoubleBarrier(_BarrierBase):
    """Enter together, leave together (sync API): :meth:`enter` waits until ``parties``
    have entered, :meth:`leave` until all of them have left."""

    def __init__(self, client: ClientLike, name: str, parties: int) -> None:
        super().__init__(name, parties)
        what = f"double barrier {self.name!r}"
        self._entered = _latch_of(client, f"{self.name}/enter", what)
        self._left = _latch_of(client, f"{self.name}/leave", what)

    def enter(self, timeout: float | None = None) -> bool:
        """Enter; block until every party has (True) or ``timeout`` passes (False)."""
        return _arrive(self._entered, self.parties, timeout)

    def leave(self, timeout: float | None = None) -> bool:
        """Leave; block until every party has (True) or ``timeout`` passes (False)."""
        return _arrive(self._left, self.parties, timeout)


class AsyncDoubleBarrier(_BarrierBase):
    """:class:`DoubleBarrier` for asyncio."""

    def __init__(self, client: AsyncClientLike, name: str, parties: int) -> None:
        super().__init__(name, parties)
        what = f"double barrier {self.name!r}"
        self._entered = _alatch_of(client, f"{self.name}/enter", what)
        self._left = _alatch_of(client, f"{self.name}/leave", what)

    async def enter(self, timeout: float | None = None) -> bool:
        """Enter and wait for every party; as :meth:`DoubleBarrier.enter`."""
        return await _aarrive(self._entered, self.parties, timeout)

    async def leave(self, timeout: float | None = None) -> bool:
        """Leave and wait for every party; as :meth:`DoubleBarrier.leave`."""
        return await _aarrive(self._left, self.parties, timeout)
