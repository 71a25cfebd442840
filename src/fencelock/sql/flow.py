"""Each pattern is written once, without I/O, as a flow: a generator that yields the
operations it needs and is sent their results. Two drivers run a flow, :func:`run`
(blocking) and :func:`arun` (asyncio), as :mod:`fencelock.primitives.lock` runs the
acquire flow; a :class:`Session` is the one connection they talk to.

An operation that raises has its error thrown into the flow at its ``yield``: the flow
decides what the error means (a conflict to retry, a row lock not granted) or lets it
propagate.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from fencelock.sql.statement import Row, Statement

T = TypeVar("T")


@dataclass(frozen=True)
class Fetch:
    """Run ``statement``; the reply is its rows, as dicts."""

    statement: Statement


@dataclass(frozen=True)
class Execute:
    """Run ``statement``; the reply is how many rows it affected."""

    statement: Statement


@dataclass(frozen=True)
class Sleep:
    """Sleep ``seconds``; the reply is None."""

    seconds: float


@dataclass(frozen=True)
class Atomic:
    """Run ``flow`` in a transaction of its own (a savepoint inside the caller's one),
    committed if it returns, rolled back if it raises; the reply is what it returns."""

    flow: Flow[Any]


Operation = Fetch | Execute | Sleep | Atomic
Flow = Generator[Operation, Any, T]


class Session(Protocol):
    """A blocking connection, as the flows need it."""

    def fetch(self, statement: Statement) -> list[Row]: ...

    def execute(self, statement: Statement) -> int: ...

    def transaction(self) -> AbstractContextManager[object]: ...

    def in_transaction(self) -> bool:
        """Whether a row lock taken now would outlive the statement that takes it."""
        ...


class AsyncSession(Protocol):
    """An asyncio connection, as the flows need it."""

    async def fetch(self, statement: Statement) -> list[Row]: ...

    async def execute(self, statement: Statement) -> int: ...

    def transaction(self) -> AbstractAsyncContextManager[object]: ...

    def in_transaction(self) -> bool:
        """Whether a row lock taken now would outlive the statement that takes it."""
        ...


class _Walk(Generic[T]):
    """A flow as a driver walks it: each operation it asks for, once it was sent the last
    one's :attr:`reply` or thrown its :attr:`error`, until it returns its :attr:`result`."""

    def __init__(self, flow: Flow[T]) -> None:
        self._flow = flow
        self.reply: Any = None
        self.error: Exception | None = None
        self.result: T

    def next(self) -> Operation | None:
        """The operation the flow asks for next; None once it has returned."""
        try:
            if self.error is None:
                operation = self._flow.send(self.reply)
            else:
                operation = self._flow.throw(self.error)
        except StopIteration as done:
            self.result = done.value  # a generator's return value is untyped
            return None
        self.reply, self.error = None, None
        return operation


def run(flow: Flow[T], session: Session) -> T:
    """Run ``flow`` with blocking I/O; its result."""
    walk = _Walk(flow)
    while (operation := walk.next()) is not None:
        try:
            walk.reply = _perform(operation, session)
        except Exception as exc:  # for the flow to judge, at its yield
            walk.error = exc
    return walk.result


def _perform(operation: Operation, session: Session) -> Any:
    if isinstance(operation, Fetch):
        return session.fetch(operation.statement)
    if isinstance(operation, Execute):
        return session.execute(operation.statement)
    if isinstance(operation, Sleep):
        time.sleep(operation.seconds)
        return None
    with session.transaction():
        return run(operation.flow, session)


async def arun(flow: Flow[T], session: AsyncSession) -> T:
    """Run ``flow`` with asyncio I/O; its result."""
    walk = _Walk(flow)
    while (operation := walk.next()) is not None:
        try:
            walk.reply = await _aperform(operation, session)
        except Exception as exc:  # for the flow to judge, at its yield
            walk.error = exc
    return walk.result


async def _aperform(operation: Operation, session: AsyncSession) -> Any:
    if isinstance(operation, Fetch):
        return await session.fetch(operation.statement)
    if isinstance(operation, Execute):
        return await session.execute(operation.statement)
    if isinstance(operation, Sleep):
        await asyncio.sleep(operation.seconds)
        return None
    async with session.transaction():
        return await arun(operation.flow, session)
