"""Stepping (``blocking_call.py``): a blocking call runs as a task of its own, marked
stepped, on the loop its thread runs; tasks it starts are not stepped. No server: the
requests here are futures set by timers and threads."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Coroutine, Iterator
from typing import Any

import pytest

from fencelock import blocking_call, clock
from fencelock.aio import within
from fencelock.backends.shared_loop import SharedLoop
from fencelock.errors import BackendUnavailable


@pytest.fixture
def shared() -> Iterator[SharedLoop]:
    loop = SharedLoop()
    yield loop
    loop.stop()


def test_a_stepped_call_is_stepped_and_the_tasks_it_starts_are_not(shared: SharedLoop) -> None:
    seen: list[tuple[str, bool]] = []

    async def opening() -> int:
        seen.append(("task", blocking_call.active()))
        await asyncio.sleep(0.01)
        return 5

    async def request() -> int:
        seen.append(("stepped", blocking_call.active()))
        opened = await asyncio.get_running_loop().create_task(opening())
        seen.append(("resumed", blocking_call.active()))
        return opened + 1

    assert shared.run_stepped(request()) == 6
    assert seen == [("stepped", True), ("task", False), ("resumed", True)]
    assert shared.run(request()) == 6  # a plain call is not stepped
    assert seen[3:] == [("stepped", False), ("task", False), ("resumed", False)]
    assert not blocking_call.active()  # nor is this thread, outside any call


def test_a_failed_future_raises_inside_the_resumed_coroutine(shared: SharedLoop) -> None:
    async def request() -> str:
        future = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.01, future.set_exception, KeyError("gone"))
        try:
            await future
        except KeyError as exc:
            return f"caught {exc}"
        return "not raised"

    assert shared.run_stepped(request()) == "caught 'gone'"


def test_a_cancelled_remainder_hears_the_cancellation_where_it_waits(
    shared: SharedLoop,
) -> None:
    heard: list[str] = []

    async def request() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            heard.append("cancelled")
            raise

    async def cut_off(rest: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(rest)
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    shared.run_stepped(request(), cut_off)
    assert heard == ["cancelled"]


def test_an_exception_while_stepped_propagates_and_frees_the_loop(shared: SharedLoop) -> None:
    async def request() -> None:
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        shared.run_stepped(request())

    async def after() -> str:
        return "the loop is free"

    assert shared.run(after()) == "the loop is free"


def test_a_thread_that_finds_the_loop_busy_hands_it_its_call_still_stepped(
    shared: SharedLoop,
) -> None:
    started, release = threading.Event(), threading.Event()

    async def hold_the_loop() -> None:
        started.set()
        # A threading.Event, set by another thread: nothing to await. Polling keeps this
        # call on the loop, busy, which is what the test needs.
        while not release.is_set():  # noqa: ASYNC110
            await asyncio.sleep(0.005)

    holder = threading.Thread(target=shared.run, args=(hold_the_loop(),))
    holder.start()
    assert started.wait(10)
    seen: list[bool] = []

    async def request() -> int:
        seen.append(blocking_call.active())
        return 3

    bounds: list[str] = []

    async def bounded(rest: Coroutine[Any, Any, int]) -> int:  # as the attempt's deadline
        bounds.append("bound")
        return await rest

    try:
        assert shared.run_stepped(request(), bounded) == 3
    finally:
        release.set()
        holder.join(10)
    assert seen == [True]  # run by the loop's thread, in a stepped task of its own
    assert bounds == ["bound"]  # within the call's bound there too


def test_a_wait_is_limited_by_the_calls_end_only_when_that_comes_first() -> None:
    assert blocking_call.wait_limit(5.0) == (5.0, False)  # no end set
    with blocking_call.call_ends_at(clock.now() + 100):
        assert blocking_call.wait_limit(5.0) == (5.0, False)
        limit, cut = blocking_call.wait_limit(None)
        assert cut
        assert limit is not None
        assert 99 < limit <= 100
    with blocking_call.call_ends_at(clock.now() - 1):  # already past: no wait at all
        assert blocking_call.wait_limit(5.0) == (0.0, True)


def test_a_bound_set_inside_a_stepped_call_stays_inside_it(shared: SharedLoop) -> None:
    """A stepped coroutine that suspends inside within() finishes on the loop; the
    end within() set must not outlive the call in the caller's context (it did: every
    later stepped request then had no time left)."""
    ends: list[float | None] = []

    async def request() -> None:
        await within(30, asyncio.sleep(0.001))
        ends.append(blocking_call.time_left())

    async def after() -> None:
        ends.append(blocking_call.time_left())

    shared.run_stepped(request())
    shared.run_stepped(after())
    assert ends[0] is None  # within() was done: its end with it
    assert ends[1] is None
    assert blocking_call.time_left() is None


def test_within_says_timeout_when_its_own_end_cut_the_request_off(shared: SharedLoop) -> None:
    async def cut_off_request() -> None:
        limit, cut = blocking_call.wait_limit(None)
        if cut:
            raise blocking_call.CallEnded(f"no answer within {limit:g}s")

    async def by_within() -> str:
        try:
            await within(0.5, cut_off_request())
        except TimeoutError:
            return "TimeoutError"
        return "answered"

    async def by_the_call() -> str:
        try:
            await within(30, cut_off_request())
        except blocking_call.CallEnded:
            return "CallEnded"
        return "answered"

    assert shared.run_stepped(by_within()) == "TimeoutError"
    with blocking_call.call_ends_at(clock.now() + 1):  # the call ends before within's 30 s
        assert shared.run_stepped(by_the_call()) == "CallEnded"


def test_within_cuts_off_a_stepped_request_that_suspends(shared: SharedLoop) -> None:
    """The request suspends (a connection being opened): it is cut off at within's
    seconds all the same."""

    async def request() -> str:
        try:
            await within(0.05, asyncio.sleep(30))
        except TimeoutError:
            return "cut off"
        return "slept"

    began = clock.now()
    assert shared.run_stepped(request()) == "cut off"
    assert clock.now() - began < 10


def test_a_call_handed_to_a_loop_closed_before_it_ran_says_the_client_was_closed(
    shared: SharedLoop,
) -> None:
    ran = threading.Event()

    async def request() -> int:
        ran.set()
        return 3

    call = request()
    outcome: list[BaseException] = []

    def caller() -> None:
        try:
            shared.run(call)
        except BaseException as exc:
            outcome.append(exc)

    assert shared._run_lock.acquire(blocking=False)  # as if another thread ran the loop
    thread = threading.Thread(target=caller)
    thread.start()
    time.sleep(0.1)  # handed over (had it not been yet, the closed loop refuses it)
    shared.loop.close()
    shared._leave()
    thread.join(10)
    assert not ran.is_set()
    assert len(outcome) == 1, outcome
    assert isinstance(outcome[0], BackendUnavailable), outcome
    assert str(outcome[0]) == "the client was closed"
    assert inspect.getcoroutinestate(call) == inspect.CORO_CLOSED  # no "never awaited"


def _running_loop_or_none() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def test_a_call_off_the_loop_that_never_suspends_runs_with_no_loop_and_no_task(
    shared: SharedLoop,
) -> None:
    seen: list[object] = []

    async def request() -> int:
        seen.extend(
            [_running_loop_or_none(), blocking_call.active(), blocking_call.is_off_the_loop()]
        )
        return 7

    assert shared.run_stepped(request(), off_the_loop=True) == 7
    assert seen == [None, True, True]
    assert not blocking_call.active()
    assert shared.run_stepped(request()) == 7  # not asked for: a task on the loop
    assert seen[3:] == [shared.loop, True, False]


def test_a_call_off_the_loop_moves_onto_it_where_it_suspends_and_goes_on_there(
    shared: SharedLoop,
) -> None:
    seen: list[object] = []

    async def opening() -> str:
        seen.append(("opening stepped", blocking_call.active()))
        await asyncio.sleep(0.01)
        return "opened"

    async def request() -> str:
        seen.append(("before", _running_loop_or_none()))
        loop = await blocking_call.running_loop()  # what needs a loop moves onto it first
        seen.append(("after", loop, asyncio.current_task() is not None, blocking_call.active()))
        opened = await loop.create_task(opening())
        seen.append(("resumed", blocking_call.active(), blocking_call.is_off_the_loop()))
        return opened

    assert shared.run_stepped(request(), off_the_loop=True) == "opened"
    assert seen == [
        ("before", None),
        ("after", shared.loop, True, True),
        ("opening stepped", False),
        ("resumed", True, False),
    ]


def test_a_call_off_the_loop_hears_errors_and_cancellation_where_it_waits(
    shared: SharedLoop,
) -> None:
    async def failing() -> str:
        future = (await blocking_call.running_loop()).create_future()
        shared.loop.call_later(0.01, future.set_exception, KeyError("gone"))
        try:
            await future
        except KeyError as exc:
            return f"caught {exc}"
        return "not raised"

    assert shared.run_stepped(failing(), off_the_loop=True) == "caught 'gone'"

    async def raising() -> None:
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        shared.run_stepped(raising(), off_the_loop=True)

    heard: list[str] = []

    async def sleeping() -> None:
        await blocking_call.onto_the_loop()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            heard.append("cancelled")
            raise

    async def cut_off(rest: Coroutine[Any, Any, None]) -> None:
        task = (await blocking_call.running_loop()).create_task(rest)
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    shared.run_stepped(sleeping(), cut_off, off_the_loop=True)
    assert heard == ["cancelled"]


def test_a_task_made_off_the_loop_by_a_call_that_ended_there_is_not_stepped(
    shared: SharedLoop,
) -> None:
    seen: list[bool] = []

    async def later() -> None:
        seen.append(blocking_call.active())

    async def request() -> None:
        shared.loop.create_task(later())  # a loop's own method needs no running loop

    shared.run_stepped(request(), off_the_loop=True)

    async def turn() -> None:
        await asyncio.sleep(0)

    shared.run(turn())
    assert seen == [False]


def test_a_thread_that_calls_while_a_call_runs_off_the_loop_waits_for_it_then_runs(
    shared: SharedLoop,
) -> None:
    inside, release = threading.Event(), threading.Event()
    order: list[str] = []

    async def holding() -> str:
        inside.set()
        release.wait(10)  # this thread, off the loop, holds the run lock meanwhile
        order.append("off the loop")
        return "held"

    async def other() -> str:
        order.append("other")
        return "ran"

    results: dict[str, str] = {}
    first = threading.Thread(
        target=lambda: results.update(a=shared.run_stepped(holding(), off_the_loop=True))
    )
    first.start()
    assert inside.wait(10)
    second = threading.Thread(target=lambda: results.update(b=shared.run(other())))
    second.start()
    time.sleep(0.05)
    assert order == []  # the second call waits for the run lock
    release.set()
    first.join(10)
    second.join(10)
    assert results == {"a": "held", "b": "ran"}
    assert order == ["off the loop", "other"]
