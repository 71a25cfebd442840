"""Stepping: an asyncio-native backend's coroutine run as a plain call on the calling
thread, its requests waited for on the driver's own results.

The blocking client runs asyncio-native backends on a shared loop
(:mod:`~fencelock.backends.shared_loop`). Where the driver already waits on threads of
its own (kazoo's), each answer's crossing into the loop costs more than the request: a
wake-up of the loop's selector, a callback, a future, a task step. Stepped, the same
coroutine runs by ``coro.send(None)``: a driver's leaf that sees :func:`active` waits
on its result right there, so a coroutine that never suspends finishes without a turn
of the loop. One that does suspend (it opens a session, it waits on a watch) is handed
to the loop where it stopped and finishes there (:func:`resume`). One algorithm, in
either case: nothing is written twice.

While stepping, the shared loop is this thread's running loop (the caller holds its
baton), so the coroutine may make tasks and futures on it; those run later, on the
loop, not stepped (:func:`active` is false inside a task).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

_STEPPING: ContextVar[bool] = ContextVar("fencelock_stepping", default=False)


def active() -> bool:
    """Whether the code running now is stepped: a request may wait for its answer here."""
    return _STEPPING.get() and asyncio.current_task() is None


def step(coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop) -> tuple[bool, Any]:
    """Run ``coro`` until it finishes or suspends: ``(True, its value)``, or ``(False,
    what it suspended on)`` for :func:`resume`. Its exception propagates."""
    token = _STEPPING.set(True)
    asyncio._set_running_loop(loop)
    try:
        return False, coro.send(None)
    except StopIteration as done:
        return True, done.value
    finally:
        asyncio._set_running_loop(None)
        _STEPPING.reset(token)


async def resume(coro: Coroutine[Any, Any, T], suspended_on: Any) -> T:
    """Finish ``coro``, suspended on ``suspended_on`` (a future, or None for a bare
    yield), as the task running it would have: wake it when that is done, and pass a
    cancellation of this task on to it."""
    while True:
        thrown: BaseException | None = None
        try:
            if suspended_on is None:
                await asyncio.sleep(0)
            else:
                # Taken over, as a task takes a future its coroutine yields (else the
                # future refuses a second await).
                suspended_on._asyncio_future_blocking = False
                await suspended_on
        except asyncio.CancelledError as exc:
            # The future itself was cancelled: the coroutine reads that from it. Else
            # this task was: tell the coroutine, as its own task would have.
            if suspended_on is None or not suspended_on.cancelled():
                thrown = exc
        except BaseException:
            pass  # the future's own failure: the coroutine reads it from the future
        try:
            suspended_on = coro.send(None) if thrown is None else coro.throw(thrown)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
