"""Stepping (``stepping.py``): a coroutine run as a plain call on the calling
thread, handed to the shared loop if it suspends. No server: the requests here are
futures set by timers and threads."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Coroutine, Iterator
from typing import Any

import pytest

from fencelock import clock, stepping
from fencelock.backends.shared_loop import SharedLoop
from fencelock.errors import BackendUnavailable


@pytest.fixture
def shared() -> Iterator[SharedLoop]:
    loop = SharedLoop()
    yield loop
    loop.stop()


def test_a_coroutine_that_never_suspends_finishes_without_a_turn_of_the_loop(
    shared: SharedLoop,
) -> None:
    turns: list[bool] = []
    shared.loop.call_soon(lambda: turns.append(True))  # runs only if the loop turns
    seen: list[bool] = []

    async def request() -> int:
        seen.append(stepping.active())
        return 7

    finished, value, _ = stepping.step(request(), shared.loop)
    assert (finished, value, seen, turns) == (True, 7, [True], [])
    assert not stepping.active()  # over once the step is


def test_a_coroutine_that_suspends_finishes_on_the_loop_with_the_same_frames(
    shared: SharedLoop,
) -> None:
    seen: list[tuple[str, bool]] = []

    async def opening() -> int:
        seen.append(("task", stepping.active()))
        await asyncio.sleep(0.01)
        return 5

    async def request() -> int:
        seen.append(("stepped", stepping.active()))
        opened = await asyncio.get_running_loop().create_task(opening())
        seen.append(("resumed", stepping.active()))
        return opened + 1

    assert shared.run_stepped(request()) == 6
    # a task made while stepping is not stepped; the remainder runs in a task too
    assert seen == [("stepped", True), ("task", False), ("resumed", False)]


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

    async def cut_off(rest: object) -> None:
        task = asyncio.ensure_future(rest)  # type: ignore[arg-type]
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    shared.run_stepped(request(), cut_off)  # type: ignore[arg-type]
    assert heard == ["cancelled"]


def test_an_exception_while_stepped_propagates_and_frees_the_loop(shared: SharedLoop) -> None:
    async def request() -> None:
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        shared.run_stepped(request())

    async def after() -> str:
        return "the loop is free"

    assert shared.run(after()) == "the loop is free"


def test_a_thread_that_finds_the_loop_busy_joins_it_unstepped(shared: SharedLoop) -> None:
    started, release = threading.Event(), threading.Event()

    async def hold_the_loop() -> None:
        started.set()
        while not release.is_set():
            await asyncio.sleep(0.005)

    holder = threading.Thread(target=shared.run, args=(hold_the_loop(),))
    holder.start()
    assert started.wait(10)
    seen: list[bool] = []

    async def request() -> int:
        seen.append(stepping.active())
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
    assert seen == [False]  # run by the loop's thread, in a task
    assert bounds == ["bound"]  # within the call's bound there too


def test_a_wait_is_limited_by_the_calls_end_only_when_that_comes_first() -> None:
    assert stepping.wait_limit(5.0) == (5.0, False)  # no end set
    with stepping.call_ends_at(clock.now() + 100):
        assert stepping.wait_limit(5.0) == (5.0, False)
        limit, cut = stepping.wait_limit(None)
        assert cut and 99 < limit <= 100
    with stepping.call_ends_at(clock.now() - 1):  # already past: no wait at all
        assert stepping.wait_limit(5.0) == (0.0, True)


def test_a_bound_set_inside_a_stepped_call_stays_inside_it(shared: SharedLoop) -> None:
    """A stepped coroutine that suspends inside within() finishes on the loop; the
    end within() set must not outlive the call in the caller's context (it did: every
    later stepped request then had no time left)."""
    ends: list[float | None] = []

    async def request() -> None:
        await stepping.within(30, asyncio.sleep(0.001))  # suspends: handed to the loop
        ends.append(stepping.time_left())

    async def after() -> None:
        ends.append(stepping.time_left())

    shared.run_stepped(request())
    shared.run_stepped(after())
    assert ends[0] is None  # the remainder ran unstepped, after within() was done
    assert ends[1] is None and stepping.time_left() is None


def test_within_says_timeout_when_its_own_end_cut_the_request_off(shared: SharedLoop) -> None:
    async def cut_off_request() -> None:
        limit, cut = stepping.wait_limit(None)
        if cut:
            raise stepping.CallEnded(f"no answer within {limit:g}s")

    async def by_within() -> str:
        try:
            await stepping.within(0.5, cut_off_request())
        except TimeoutError:
            return "TimeoutError"
        return "answered"

    async def by_the_call() -> str:
        try:
            await stepping.within(30, cut_off_request())
        except stepping.CallEnded:
            return "CallEnded"
        return "answered"

    assert shared.run_stepped(by_within()) == "TimeoutError"
    with stepping.call_ends_at(clock.now() + 1):  # the call ends before within's 30 s
        assert shared.run_stepped(by_the_call()) == "CallEnded"


def test_within_cuts_off_a_stepped_request_that_suspends(shared: SharedLoop) -> None:
    """The request suspends (a connection being opened): its rest runs on the loop,
    still cut off at within's seconds (it ran unbounded before)."""

    async def request() -> str:
        try:
            await stepping.within(0.05, asyncio.sleep(30))
        except TimeoutError:
            return "cut off"
        return "slept"

    began = clock.now()
    assert shared.run_stepped(request()) == "cut off"
    assert clock.now() - began < 10


def _blocking(woken: threading.Event, seen: list[str]) -> Coroutine[Any, Any, str]:
    async def waiter() -> str:
        seen.append(f"before {stepping.active()}")
        await stepping.block(woken, 30)
        seen.append(f"after {stepping.active()}")
        return "done"

    return waiter()


def test_a_blocked_coroutine_leaves_the_loop_to_other_threads_and_goes_on_stepped(
    shared: SharedLoop,
) -> None:
    woken, seen, others = threading.Event(), list[str](), list[str]()

    def other_call() -> None:  # a renewal, say, while the waiter waits
        async def renew() -> str:
            return "renewed"

        others.append(shared.run(renew()))
        woken.set()

    threading.Timer(0.05, other_call).start()
    started = clock.now()
    assert shared.run_stepped(_blocking(woken, seen)) == "done"
    assert others == ["renewed"]  # it ran while the waiter was blocked, not after 30 s
    assert clock.now() - started < 10
    assert seen == ["before True", "after True"]  # woken, it went on on its own thread


def test_a_blocked_coroutine_whose_loop_is_busy_when_woken_finishes_there(
    shared: SharedLoop,
) -> None:
    woken, seen = threading.Event(), list[str]()
    running = threading.Event()

    def busy_call() -> None:  # runs the loop, and wakes the waiter while it does
        async def hold() -> None:
            running.set()
            woken.set()
            await asyncio.sleep(0.3)

        shared.run(hold())

    threading.Timer(0.05, busy_call).start()
    assert shared.run_stepped(_blocking(woken, seen)) == "done"
    assert running.is_set()
    assert seen == ["before True", "after False"]  # the rest ran as a task on the loop


def test_a_blocked_wait_ends_at_the_calls_end(shared: SharedLoop) -> None:
    woken, seen = threading.Event(), list[str]()  # never set
    started = clock.now()
    with stepping.call_ends_at(clock.now() + 0.2):
        assert shared.run_stepped(_blocking(woken, seen)) == "done"
    assert 0.15 < clock.now() - started < 10  # not its own 30 s


def test_within_passes_a_block_up_to_the_stepper(shared: SharedLoop) -> None:
    woken = threading.Event()
    threading.Timer(0.05, woken.set).start()

    async def request() -> bool:
        await stepping.within(5, stepping.block(woken, 30))
        return stepping.active()

    assert shared.run_stepped(request()) is True


def test_a_blocked_coroutine_is_closed_if_the_wait_is_interrupted(shared: SharedLoop) -> None:
    closed: list[bool] = []

    class Interrupting(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            raise KeyboardInterrupt

    async def waiter() -> None:
        try:
            await stepping.block(Interrupting(), 30)
        finally:
            closed.append(True)

    with pytest.raises(KeyboardInterrupt):
        shared.run_stepped(waiter())
    assert closed == [True]
    assert shared.run_stepped(asyncio.sleep(0, "free")) == "free"  # the loop is not held


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

    assert shared._baton.acquire(blocking=False)  # as if another thread ran the loop
    thread = threading.Thread(target=caller)
    thread.start()
    time.sleep(0.1)  # handed over (had it not been yet, the closed loop refuses it)
    shared.loop.close()
    shared._leave()
    thread.join(10)
    assert not ran.is_set()
    assert len(outcome) == 1 and isinstance(outcome[0], BackendUnavailable), outcome
    assert str(outcome[0]) == "the client was closed"
    assert inspect.getcoroutinestate(call) == inspect.CORO_CLOSED  # no "never awaited"
