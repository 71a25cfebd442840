"""Waiting for a wake-up event with a timeout, then re-arming it: sync and async."""

from __future__ import annotations

import asyncio
import contextlib
import threading

from fencelock.aio import TIMEOUTS, within


def wait_then_rearm(event: threading.Event | None, timeout: float) -> None:
    """Block until ``event`` is set or ``timeout`` passes; clear it for the next wait."""
    if event is not None:
        event.wait(timeout)
        event.clear()


async def await_then_rearm(event: asyncio.Event | None, timeout: float) -> None:
    """:func:`wait_then_rearm` for an asyncio event."""
    if event is not None:
        with contextlib.suppress(*TIMEOUTS):
            await within(timeout, event.wait())
        event.clear()
