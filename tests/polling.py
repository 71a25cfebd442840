"""Waiting for a condition in a test: poll it, and fail by naming what never came.

Timeouts are generous on purpose (a loaded 2-core machine must pass): a wait ends as
soon as its condition holds, so a long limit costs nothing when the test passes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

TIMEOUT = 30.0  # seconds
INTERVAL = 0.02  # seconds between two looks


def _failure(what: str | Callable[[], str], timeout: float) -> AssertionError:
    told = what() if callable(what) else what
    return AssertionError(f"gave up after {timeout:g}s waiting for {told}")


def wait_until(
    predicate: Callable[[], T | None],
    *,
    what: str | Callable[[], str],
    timeout: float = TIMEOUT,
    interval: float = INTERVAL,
) -> T:
    """The first true value of ``predicate()``, looked at every ``interval`` seconds.

    Fails after ``timeout`` seconds naming ``what`` it waited for (a callable is asked
    only then, so it can describe the state the wait ended in).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise _failure(what, timeout)
        time.sleep(interval)


async def await_until(
    predicate: Callable[[], Awaitable[T | None]],
    *,
    what: str | Callable[[], str],
    timeout: float = TIMEOUT,
    interval: float = INTERVAL,
) -> T:
    """:func:`wait_until` on a running event loop, for a predicate that is awaited
    (between two looks the loop is free: ``asyncio.sleep``)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise _failure(what, timeout)
        await asyncio.sleep(interval)
