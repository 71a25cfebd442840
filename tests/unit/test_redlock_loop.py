"""The sync face's shared event loop: run by its callers, one at a time, never stuck.

Redlock's blocking client runs the asyncio implementation on a :class:`SharedLoop`
that the calling threads take turns to run; these tests pin its hand-offs.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from fencelock.backends.shared_loop import SharedLoop

JOIN = 10.0  # seconds a test thread may take before the test fails instead of hanging


@pytest.fixture
def shared() -> Iterator[SharedLoop]:
    loop = SharedLoop()
    yield loop
    loop.stop()


def test_returns_results_and_raises_errors(shared: SharedLoop) -> None:
    async def double(x: int) -> int:
        await asyncio.sleep(0)
        return 2 * x

    async def fail() -> None:
        raise KeyError("boom")

    assert shared.run(double(21)) == 42
    with pytest.raises(KeyError, match="boom"):
        shared.run(fail())


def test_a_short_call_finishes_while_a_long_one_runs_the_loop(shared: SharedLoop) -> None:
    release = asyncio.Event()
    started = threading.Event()

    async def long() -> str:
        started.set()
        await release.wait()
        return "long"

    async def short() -> str:
        release.set()  # runs on the loop the other thread is running
        return "short"

    results: dict[str, str] = {}
    runner = threading.Thread(target=lambda: results.update(long=shared.run(long())))
    runner.start()
    assert started.wait(JOIN)
    results["short"] = shared.run(short())
    runner.join(JOIN)
    assert results == {"long": "long", "short": "short"}


def test_a_waiting_caller_takes_the_loop_over_when_the_runner_leaves(shared: SharedLoop) -> None:
    entered = threading.Event()
    go_on = threading.Event()
    left = threading.Event()

    async def brief() -> str:
        entered.set()
        await asyncio.to_thread(go_on.wait, JOIN)  # holds the loop until the other has joined
        return "brief"

    async def slow() -> str:
        go_on.set()
        # Outlives brief(): done only once the runner has left, so this thread must
        # run the loop itself.
        await asyncio.to_thread(left.wait, JOIN)
        return "slow"

    def run_brief() -> None:
        results.update(brief=shared.run(brief()))
        left.set()

    results: dict[str, str] = {}
    runner = threading.Thread(target=run_brief)
    runner.start()
    assert entered.wait(JOIN)
    results["slow"] = shared.run(slow())
    runner.join(JOIN)
    assert results == {"brief": "brief", "slow": "slow"}


def test_many_threads_at_once(shared: SharedLoop) -> None:
    async def work(i: int) -> int:
        for _ in range(3):
            await asyncio.sleep(0.001)
        return i

    results: list[int] = []
    guard = threading.Lock()

    def caller(i: int) -> None:
        for _ in range(20):
            value = shared.run(work(i))
            with guard:
                results.append(value)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN)
    assert sorted(results) == sorted(i for i in range(8) for _ in range(20))


def test_timers_due_between_calls_fire_before_the_next_call_runs(shared: SharedLoop) -> None:
    fired = threading.Event()

    async def arm() -> None:
        asyncio.get_running_loop().call_later(0.01, fired.set)

    async def look() -> bool:
        return fired.is_set()

    shared.run(arm())
    time.sleep(0.05)  # nobody runs the loop meanwhile: the timer is due, not yet fired
    assert not fired.is_set()
    assert shared.run(look())


def test_callable_from_inside_another_event_loop(shared: SharedLoop) -> None:
    async def answer() -> int:
        return 7

    async def from_async_code() -> int:
        return shared.run(answer())

    assert asyncio.run(from_async_code()) == 7


def _interrupt() -> None:
    raise KeyboardInterrupt  # as Ctrl-C does when it lands while the loop runs callbacks


def test_an_interrupted_call_does_not_go_on_in_a_later_call(shared: SharedLoop) -> None:
    """Ctrl-C in a try_acquire must not leave it to finish (and take a lock) later on."""
    finished = threading.Event()
    cancelled = threading.Event()

    async def work() -> None:
        asyncio.get_running_loop().call_later(0.01, _interrupt)
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        finished.set()

    with pytest.raises(KeyboardInterrupt):
        shared.run(work())
    shared.run(asyncio.sleep(0.1))  # the next call runs the loop again
    assert not finished.is_set()
    assert cancelled.is_set()


def test_an_interrupted_waiting_caller_stops_its_coroutine(
    shared: SharedLoop, ctrl_c_raises: None
) -> None:
    """The same for a caller whose coroutine another thread's loop was running."""
    import signal

    running, started = threading.Event(), threading.Event()
    finished, cancelled = threading.Event(), threading.Event()
    release = threading.Event()

    async def long() -> None:
        running.set()
        await asyncio.to_thread(release.wait, JOIN)

    async def work() -> None:
        started.set()
        try:
            await asyncio.sleep(JOIN)  # the runner's loop would go on running it
        except asyncio.CancelledError:
            cancelled.set()
            raise
        finished.set()

    runner = threading.Thread(target=lambda: shared.run(long()))
    runner.start()
    assert running.wait(JOIN)  # another thread's call is running the loop
    main = threading.main_thread().ident
    assert main is not None

    def kick() -> None:  # Ctrl-C once work() runs on that loop
        if started.wait(JOIN):
            signal.pthread_kill(main, signal.SIGINT)

    kicker = threading.Thread(target=kick)
    kicker.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            shared.run(work())  # joins the running loop, then Ctrl-C
        assert cancelled.wait(JOIN), "work() went on running after the interrupt"
        assert not finished.is_set()
    finally:
        release.set()
        runner.join(JOIN)
        kicker.join(JOIN)
