"""Waits that keep a cancellation: the asyncio renewer once ran on after its client closed.

On Python 3.11 ``asyncio.wait_for`` returns the result instead of raising when a
cancellation lands in the same loop turn as that result; CI caught a client whose
``close()`` never returned because its renewer task swallowed the cancel that way.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from fencelock.aio import opened_within, stop, within, within_or_recancel
from fencelock.renewer import AsyncRenewer


def test_within_keeps_a_cancellation_that_lands_with_the_result() -> None:
    async def main() -> None:
        event = asyncio.Event()
        task = asyncio.get_running_loop().create_task(within(60, event.wait()))
        await asyncio.sleep(0.01)
        event.set()
        task.cancel()  # same turn: the result and the cancellation arrive together
        await asyncio.wait({task}, timeout=30)
        assert task.cancelled()

    asyncio.run(main())


async def _swallowing_like_wait_for() -> str:
    """What ``asyncio.wait_for`` does on 3.11 when the cancellation lands as its inner
    call completes (redis.asyncio bounds every write with it): the result, no raise."""
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        return "written"
    return "slept"


@pytest.mark.parametrize("wait", [within, within_or_recancel])
def test_a_cancellation_the_driver_swallowed_is_raised(wait: object) -> None:
    async def main() -> None:
        task = asyncio.get_running_loop().create_task(wait(60, _swallowing_like_wait_for()))  # type: ignore[operator]
        await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.wait({task}, timeout=30)
        assert task.cancelled()  # not done with "written", as a cancelled acquire went on

    asyncio.run(main())


@pytest.mark.parametrize("wait", [within, within_or_recancel])
def test_a_cancelled_wait_returns_after_the_calls_clean_up(wait: object) -> None:
    """The caller goes on (closing the connection the call was reading, say) only once
    the call's clean-up has run: on Python 3.10 the call runs in a task of its own, and
    psycopg's connect, left to clean up later, removed a socket's reader after the
    socket was closed and its number reused (a cancelled acquire then failed)."""
    cleaned: list[str] = []
    seen_by_the_caller: list[list[str]] = []

    async def call() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(0.02)  # a clean-up that awaits
            cleaned.append("cleaned up")

    async def caller() -> None:
        try:
            await wait(30, call())  # type: ignore[operator]
        finally:
            seen_by_the_caller.append(list(cleaned))

    async def main() -> None:
        task = asyncio.get_running_loop().create_task(caller())
        await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.wait({task}, timeout=30)
        assert task.cancelled()

    asyncio.run(main())
    assert seen_by_the_caller == [["cleaned up"]]


class _Opened:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_what_an_opening_made_is_the_callers_or_closed() -> None:
    """Cancelled as its opening returned (the same loop turn), the caller gets what it
    opened or it is closed: a MySQL connection on 3.10, and one behind a swallowed
    cancellation on 3.11, was dropped unclosed and its socket closed by the garbage
    collector after the loop had ended (an unraisable error in a later test)."""
    made: list[_Opened] = []
    got: list[_Opened] = []

    async def opening(ready: asyncio.Event) -> _Opened:
        await ready.wait()
        made.append(_Opened())
        return made[-1]

    async def caller(ready: asyncio.Event) -> None:
        got.append(await opened_within(60, opening(ready), close=_Opened.close))

    async def main() -> None:
        for _ in range(20):
            ready = asyncio.Event()
            task = asyncio.get_running_loop().create_task(caller(ready))
            await asyncio.sleep(0.001)
            ready.set()
            task.cancel()
            await asyncio.wait({task}, timeout=30)
            assert task.cancelled()

    asyncio.run(main())
    assert [thing for thing in made if not thing.closed] == got


def test_what_an_opening_swallowing_a_cancellation_made_is_closed() -> None:
    made: list[_Opened] = []

    async def opening() -> _Opened:
        await _swallowing_like_wait_for()
        made.append(_Opened())
        return made[-1]

    async def main() -> None:
        task = asyncio.get_running_loop().create_task(
            opened_within(60, opening(), close=_Opened.close)
        )
        await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.wait({task}, timeout=30)
        assert task.cancelled()

    asyncio.run(main())
    assert len(made) == 1
    assert made[0].closed


def test_a_call_cut_off_by_a_stalled_loop_is_cancelled_again() -> None:
    """The deadline's cancellation and the one after RECANCEL_AFTER fall in one loop turn
    when the loop stalls past both (a loaded machine): they are one, and a clean-up that
    gives up only on a second (psycopg: 10 s) must get one still."""

    async def slow_clean_up() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(10)  # what a second cancellation cuts short

    async def main() -> float:
        loop = asyncio.get_running_loop()
        loop.call_later(0.09, time.sleep, 0.2)  # stalled past the deadline and the recancel
        began = loop.time()
        with pytest.raises(TimeoutError):
            await within_or_recancel(0.1, slow_clean_up())
        return loop.time() - began

    assert asyncio.run(main()) < 5


def test_a_deadline_the_driver_swallowed_is_no_cancellation() -> None:
    async def main() -> str:
        return await within(0.01, _swallowing_like_wait_for())

    assert asyncio.run(main()) == "written"  # its own deadline's cancel: nobody else's


def test_within_or_recancel_raises_no_cancellation_of_its_own() -> None:
    async def swallows_every_cancellation() -> str:
        for _ in range(3):
            try:
                await asyncio.sleep(1)
            except asyncio.CancelledError:
                continue
        return "done"

    async def main() -> str:
        return await within_or_recancel(0.01, swallows_every_cancellation())  # cut off, then again

    assert asyncio.run(main()) == "done"  # nobody else cancelled: no CancelledError


def test_within_raises_past_its_deadline() -> None:
    async def main() -> None:
        event = asyncio.Event()
        try:
            await within(0.01, event.wait())
        except TimeoutError:  # the builtin one, on every version (3.10's asyncio has its own)
            return
        raise AssertionError("within() returned although nothing set the event")

    asyncio.run(main())


def test_stop_ends_a_task_that_swallows_a_cancellation() -> None:
    async def stubborn() -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(60)
        await asyncio.sleep(60)  # goes on as the swallowed-cancel bug made tasks do

    async def main() -> None:
        task = asyncio.get_running_loop().create_task(stubborn())
        await asyncio.sleep(0.01)
        await asyncio.wait_for(stop(task), 30)
        assert task.cancelled()

    asyncio.run(main())


def test_stop_raises_what_the_task_failed_with() -> None:
    async def failing() -> None:
        raise ValueError("boom")

    async def main() -> None:
        task = asyncio.get_running_loop().create_task(failing())
        await asyncio.sleep(0)
        try:
            await stop(task)
        except ValueError:
            return
        raise AssertionError("stop() hid the task's own failure")

    asyncio.run(main())


def test_async_renewer_closes_when_woken_as_it_is_cancelled() -> None:
    async def main() -> None:
        renewer = AsyncRenewer()
        renewer._task = asyncio.get_running_loop().create_task(renewer._run())
        await asyncio.sleep(0.01)  # idle, waiting for a wake-up
        renewer._wake.set()
        await renewer.close()  # cancels in this same turn; hangs (pytest-timeout) if lost
        assert renewer._task is None

    asyncio.run(main())
