"""A blocking face for an asyncio-native backend: its coroutines run on one shared loop.

Used where concurrency is the algorithm (Redlock talks to every node at once):
the asyncio implementation is the only one, and the sync client calls into it.
The loop has no thread of its own: the calling thread runs it (a hop to a loop
thread and back cost two thread wake-ups per call, a third of a Redlock cycle).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import heapq
import inspect
import itertools
import math
import selectors
import threading
import types
from collections.abc import Callable, Coroutine, Generator, Sequence
from contextvars import Context, copy_context
from typing import Any, Generic, TypeVar

from fencelock import blocking_call, clock, forking
from fencelock.backends import idle_watch
from fencelock.backends.base import (
    AsyncAttempt,
    AsyncBackend,
    AsyncNameWatch,
    AsyncNativeLatch,
    Attempt,
    AttemptResult,
    Backend,
    Capabilities,
    LockInfo,
    Renewal,
    RenewedAsOf,
    RenewOutcome,
    Share,
    async_batch_renewing,
    async_keeping,
    async_latching,
    async_name_watching,
    async_sharing,
)
from fencelock.backends.bounds import BoundedAttempt, bounded_or_detach
from fencelock.blocking_call import call_ends_at
from fencelock.engine.deadline import CallEnd
from fencelock.engine.urls import ParsedURL
from fencelock.errors import BackendUnavailable, ConfigError

T = TypeVar("T")
STOP_WAIT = 5.0  # how long stop() waits for a thread still running the loop


def _as_it_is(coro: Coroutine[Any, Any, T]) -> Coroutine[Any, Any, T]:
    return coro


class _TellingSelector(selectors.DefaultSelector):
    """The platform's selector, which remembers whether its last ``select`` found news."""

    found = False

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events = super().select(timeout)
        self.found = bool(events)
        return events


class _WatchedLoop(asyncio.SelectorEventLoop):
    """asyncio's selector loop, which can say whether a turn of it has something to do
    besides the call that runs it: a socket it reads has news, another thread handed it
    a callback (its self-pipe is readable), or a timer fell due. Public means only: a
    selector of its own to ask, and the timers it is given through ``call_at``."""

    def __init__(self) -> None:
        self._watched = _TellingSelector()
        super().__init__(self._watched)
        self._timers: list[tuple[float, int, asyncio.TimerHandle]] = []
        self._order = itertools.count()
        self._fired_before = -math.inf  # every timer due by then has fired

    def call_at(  # type: ignore[override]
        self,
        when: float,
        callback: Callable[..., object],
        *args: Any,
        context: Context | None = None,
    ) -> asyncio.TimerHandle:
        handle = super().call_at(when, callback, *args, context=context)
        heapq.heappush(self._timers, (when, next(self._order), handle))
        return handle

    def about_to_run(self) -> None:
        """The loop runs now: each of its turns fires every timer due as it begins."""
        self._fired_before = self.time()

    def has_news(self) -> bool:
        """Whether a turn would have something to do (asked without running one)."""
        if self.is_closed():
            return False
        return self._timer_due() or bool(self._watched.select(0))

    def turn_had_news(self) -> bool:
        """Asked by the first step of a task in the loop's turn: whether the turn's poll
        found news or a timer fell due (their callbacks run after this step, in this
        turn or the next)."""
        return self._watched.found or self._timer_due()

    def _timer_due(self) -> bool:
        """Whether a timer fell due that no turn has fired yet."""
        timers = self._timers
        while timers and (timers[0][0] <= self._fired_before or timers[0][2].cancelled()):
            heapq.heappop(timers)
        return bool(timers) and timers[0][0] <= self.time()


class SharedLoop:
    """An event loop run by whichever thread calls :meth:`run`, one thread at a time.

    The thread holding the run lock runs the loop until its own coroutine is done. A
    thread that calls meanwhile hands its coroutine to the running loop and waits,
    and takes the loop over if the runner leaves first. Between calls nothing runs:
    replies that arrive meanwhile wait in their sockets, and timers that fell due
    fire at the start of the next call, except on the sockets a backend asked to have
    watched (:mod:`~fencelock.backends.idle_watch`): news on one runs the loop at once.
    """

    def __init__(self) -> None:
        self.loop = _WatchedLoop()
        self.loop.set_exception_handler(_quiet_when_abandoned)
        self._run_lock = threading.Lock()
        self._changed = threading.Condition()
        self._watcher = idle_watch.attach(self.loop, self._turn)

    def _turn(self) -> None:
        """Run the loop for a moment: what arrived on a watched socket is read now."""
        self.run(_one_turn())

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop; block until it is done and return (or raise) its outcome."""
        if _loop_running_here():  # called from asyncio code: this thread cannot run ours
            return _on_helper_thread(self.run, coro)
        if self._run_lock.acquire(blocking=False):
            return self._lead_new(_after_pending_io(coro, self.loop.has_news()), False)
        return self._join(coro)

    def run_stepped(
        self,
        coro: Coroutine[Any, Any, T],
        rest: Callable[[Coroutine[Any, Any, T]], Coroutine[Any, Any, T]] = _as_it_is,
        off_the_loop: bool = False,
    ) -> T:
        """:meth:`run` of ``rest(coro)`` as a stepped call (:mod:`.blocking_call`): where the
        backend's driver can, it waits for its answers right here, the loop held still.

        Run by this thread, the call's task stops the loop as it ends: the turn it ends
        in is the last (a stepped call waits for its own answers and sends nothing that
        a further turn must send), so an uncontended call costs the loop one turn, not
        two, and one poll of its sockets, not three. With ``off_the_loop`` (the backend's
        stepped path needs no running loop until it suspends) and nothing for the loop to
        do, the call starts on this thread with no loop running at all."""
        if _loop_running_here():
            return _on_helper_thread(self.run, blocking_call.stepped(rest(coro)))
        if not self._run_lock.acquire(blocking=False):
            return self._join(blocking_call.stepped(rest(coro)))
        if off_the_loop and not self.loop.is_closed() and not self.loop.has_news():
            return self._off_the_loop(rest(coro))
        return self._lead_new(
            _stopping_the_loop(blocking_call.stepped(rest(coro)), self.loop), True
        )

    def _lead_new(
        self, wrapped: Coroutine[Any, Any, T], stops_itself: bool, context: Context | None = None
    ) -> T:
        """Run ``wrapped`` as a task of its own (in ``context``, if given), the run lock held
        (see :meth:`_lead`)."""
        try:
            task = (
                self.loop.create_task(wrapped)
                if context is None
                else context.run(self.loop.create_task, wrapped)
            )
        except BaseException as exc:
            self._leave()
            raise _refused(wrapped, self.loop) from exc
        return self._lead(task, task, stops_itself)

    def _off_the_loop(self, call: Coroutine[Any, Any, T]) -> T:
        """Drive ``call`` (a stepped call, the run lock held) on this thread with no loop
        running; the first time it suspends, it goes on as a task on the loop. The task
        runs in a copy of the context the call began in (Python 3.10's ``create_task``
        takes no context): a ContextVar set off the loop reads the same on it, but its
        token cannot be reset there, so ``blocking_call.within`` moves onto the loop first."""
        context = copy_context()
        mark = context.run(blocking_call.off_the_loop)
        try:
            suspended = context.run(call.send, None)
        except StopIteration as done:
            mark.moved_onto(None)
            self._leave()
            return done.value  # type: ignore[no-any-return]
        except BaseException:
            mark.moved_onto(None)
            self._leave()
            raise
        return self._lead_new(_resumed(call, suspended, mark, self.loop), True, context)

    def _lead(
        self, work: asyncio.Future[T], task: asyncio.Future[T] | None, stops_itself: bool = False
    ) -> T:
        """Run the loop until ``work`` is done, then leave it (``stops_itself``: ``work``
        stops the loop as it ends, in the turn it ends in)."""
        self.loop.about_to_run()
        try:
            if stops_itself:
                while not work.done():  # a stop() meant for an earlier turn ends one early
                    self.loop.run_forever()
                return work.result()
            # The turn after ``work`` is done runs what it left ready (a Redlock acquire
            # back at a quorum leaves its requests to the other nodes to be sent).
            return self.loop.run_until_complete(work)
        except BaseException:
            # The caller was interrupted (Ctrl-C) while its coroutine still runs: stop it
            # now (it cleans up when the loop next runs), or it would go on, unseen, in a
            # later call and, say, take a lock nobody holds.
            if task is not None and not task.done():
                task.cancel()
            raise
        finally:
            self._leave()

    def _leave(self) -> None:
        self._run_lock.release()
        with self._changed:
            self._changed.notify_all()

    def _join(self, coro: Coroutine[Any, Any, T], context: Context | None = None) -> T:
        """Another thread runs the loop: give it ``coro`` (to run in ``context``, if
        given), and lead if it stops first."""
        future: asyncio.Future[T] = self.loop.create_future()
        future.add_done_callback(self._notify)
        handoff = _Handoff(coro, future, context)
        # One try around both: a Ctrl-C that lands just after the hand-off (the loop's
        # thread took the GIL to start it) must stop the coroutine too.
        try:
            try:
                self.loop.call_soon_threadsafe(handoff.start)
            except RuntimeError as exc:  # closed
                raise _refused(coro, self.loop) from exc
            return self._wait_or_lead(future)
        except BaseException:
            # Interrupted while the loop (ours or another thread's) ran the coroutine:
            # it must not go on without us.
            if not future.done():
                try:
                    self.loop.call_soon_threadsafe(handoff.stop)
                except RuntimeError:  # the loop was closed meanwhile: it never runs now
                    _close_unstarted(coro)
            raise

    def _wait_or_lead(self, future: asyncio.Future[T]) -> T:
        """Wait for ``future`` while another thread runs the loop; run it if that stops."""
        while True:
            with self._changed:
                while not future.done() and self._run_lock.locked():
                    self._changed.wait()
            if future.done():
                return future.result()
            if self._run_lock.acquire(blocking=False):
                if self.loop.is_closed():  # closed before it ran what it was handed
                    self._leave()
                    raise BackendUnavailable("the client was closed")
                return self._lead(future, None)

    def _notify(self, _future: asyncio.Future[Any]) -> None:
        with self._changed:
            self._changed.notify_all()

    def stop(self) -> None:
        """Close the loop, once no thread runs it (waiting up to :data:`STOP_WAIT`)."""
        if self._watcher is not None:
            self._watcher.stop()
        if self._run_lock.acquire(timeout=STOP_WAIT):
            try:
                self.loop.close()
            finally:
                self._run_lock.release()


def _quiet_when_abandoned(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's exception handler: silent about tasks collected with a client not closed.

    A program that exits (``sys.exit`` after a failed acquire) or drops a client
    without closing it leaves the loop, and a connection still being opened to a
    node that does not answer, to the garbage collector; asyncio would print
    "Task was destroyed but it is pending!" for each. Only fencelock runs on this
    loop, and those sockets go with the process. Everything else is reported.
    """
    if str(context.get("message", "")).startswith("Task was destroyed but it is pending"):
        return
    loop.default_exception_handler(context)


def _refused(coro: Coroutine[Any, Any, Any], loop: asyncio.AbstractEventLoop) -> BaseException:
    """The error for a call the loop could not take: the client was closed."""
    _close_unstarted(coro)
    if loop.is_closed():
        return BackendUnavailable("the client was closed")
    return RuntimeError("fencelock: the shared event loop refused a call")  # pragma: no cover


def _close_unstarted(coro: Coroutine[Any, Any, Any]) -> None:
    """Close ``coro`` if it never ran, and the unstarted coroutines it was given to
    await (else Python warns each was never awaited); one that ran is left as it is."""
    if inspect.getcoroutinestate(coro) != inspect.CORO_CREATED:
        return
    given = [v for v in inspect.getcoroutinelocals(coro).values() if inspect.iscoroutine(v)]
    coro.close()
    for inner in given:
        _close_unstarted(inner)


async def _after_pending_io(coro: Coroutine[Any, Any, T], news: bool) -> T:
    """``coro``; with ``news`` (a socket the loop reads has something, a callback was
    handed over, a timer fell due), one turn of the loop first: it reads what arrived
    while nobody ran it (a connection the server closed, late replies), so ``coro`` does
    not send on a connection already known to be dead."""
    if news:
        await asyncio.sleep(0)
    return await coro


async def _stopping_the_loop(coro: Coroutine[Any, Any, T], loop: _WatchedLoop) -> T:
    """``coro``, after the news of the turn it starts in (as :func:`_after_pending_io`),
    then the loop stopped: the turn it ends in is the loop's last."""
    try:
        if loop.turn_had_news():
            await asyncio.sleep(0)
        return await coro
    finally:
        loop.stop()


async def _resumed(
    call: Coroutine[Any, Any, T], suspended: Any, mark: blocking_call.Stepped, loop: _WatchedLoop
) -> T:
    """The rest of ``call``, which suspended on ``suspended`` off the loop, as this task
    (the loop stopped as it ends, as :func:`_stopping_the_loop`)."""
    mark.moved_onto(asyncio.current_task())
    try:
        return await _going_on(call, suspended)  # type: ignore[no-any-return]
    finally:
        loop.stop()


@types.coroutine
def _going_on(call: Coroutine[Any, Any, Any], suspended: Any) -> Generator[Any, Any, Any]:
    """Hand what ``call`` suspended on to the task, and the task's answers (a value, or
    an error thrown in) back to ``call``, until it returns."""
    while True:
        try:
            answer = yield suspended
        except GeneratorExit:
            call.close()
            raise
        except BaseException as exc:
            try:
                suspended = call.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                suspended = call.send(answer)
            except StopIteration as done:
                return done.value


async def _one_turn() -> None:
    """Nothing: running it gives the loop one pass (what arrived is read)."""


class _Handoff(Generic[T]):
    """A coroutine handed to the thread running the loop (called there), and its task."""

    def __init__(
        self,
        coro: Coroutine[Any, Any, T],
        future: asyncio.Future[T],
        context: Context | None = None,
    ) -> None:
        self._coro, self._future = coro, future
        self._context = context if context is not None else copy_context()
        self._tasks: list[asyncio.Task[T]] = []

    def start(self) -> None:
        try:
            task = self._context.run(self._future.get_loop().create_task, self._coro)
        except BaseException as exc:  # pragma: no cover - create_task itself failed
            self._future.set_exception(exc)
            return
        self._tasks.append(task)
        task.add_done_callback(lambda done: _copy_outcome(done, self._future))

    def stop(self) -> None:
        self._future.cancel()
        for task in self._tasks:
            task.cancel()


def _copy_outcome(task: asyncio.Future[T], future: asyncio.Future[T]) -> None:
    if future.done():
        return
    if task.cancelled():
        future.cancel()
    elif task.exception() is not None:
        future.set_exception(task.exception())  # type: ignore[arg-type]
    else:
        future.set_result(task.result())


def _loop_running_here() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _on_helper_thread(
    run: Callable[[Coroutine[Any, Any, T]], T], coro: Coroutine[Any, Any, T]
) -> T:
    """``run(coro)`` on a short-lived thread, for a caller whose thread runs another loop."""
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append((True, run(coro)))
        except BaseException as exc:
            outcome.append((False, exc))

    thread = threading.Thread(target=target, name="fencelock-call")
    thread.start()
    thread.join()
    ok, value = outcome[0]
    if ok:
        return value  # type: ignore[no-any-return]
    raise value


class SharedLoopAttempt:
    """An asyncio-native attempt behind the blocking protocol, cut off at its deadline
    (:meth:`limit`) plus one request, as in asyncio (:mod:`~fencelock.backends.bounds`)."""

    def __init__(
        self,
        attempt: AsyncAttempt,
        loop: SharedLoop,
        where: str,
        bound: float,
        steps: bool,
        off_the_loop: bool = False,
    ) -> None:
        self._attempt, self._loop = BoundedAttempt(attempt, where, CallEnd(None, bound)), loop
        self._steps = steps
        self._off_the_loop = off_the_loop
        self._interrupted = False
        self._waiting: asyncio.Future[None] | None = None  # the wait under way, on the loop

    def limit(self, end: CallEnd) -> None:
        """Cut every call off at ``end``."""
        self._attempt.end = end

    def try_acquire(self) -> AttemptResult:
        return self._call(lambda attempt: attempt.try_acquire(), "a try")

    def wait(self, timeout: float) -> None:
        """The attempt's wait, on the loop, where :meth:`interrupt` cancels it."""
        if not self._interrupted:
            self._loop.run(self._interruptible_wait(timeout))

    def _wakes_itself(self) -> Callable[[], None] | None:
        interrupt: Callable[[], None] | None = getattr(self._attempt.inner, "interrupt", None)
        return interrupt

    async def _interruptible_wait(self, timeout: float) -> None:
        waiting = asyncio.ensure_future(self._attempt.wait(timeout))
        self._waiting = waiting
        if self._interrupted:  # interrupted before the wait was there to cancel
            waiting.cancel()
        try:
            await waiting
        except asyncio.CancelledError:
            if not (self._interrupted and waiting.cancelled()):
                raise
        finally:
            self._waiting = None

    def interrupt(self) -> None:
        self._interrupted = True
        wake = self._wakes_itself()
        if wake is not None:
            wake()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing waits on it
            self._loop.loop.call_soon_threadsafe(self._cancel_wait)

    def _cancel_wait(self) -> None:
        waiting = self._waiting
        if waiting is not None:
            waiting.cancel()

    def _call(self, call: Callable[[AsyncAttempt], Coroutine[Any, Any, T]], what: str) -> T:
        """One call of the attempt's, bounded: stepped where the backend steps."""
        bounded = self._attempt
        if not self._steps:  # its own (bounded) call, whose request is made as it runs
            return self._loop.run(call(bounded))
        end = bounded.end
        given = end.left(clock.now())
        try:
            with call_ends_at(end.at):  # what a stepped request waits at most
                return self._loop.run_stepped(
                    call(bounded.inner),
                    lambda rest: bounded.bounding(rest, what),
                    self._off_the_loop,
                )
        except BackendUnavailable as exc:
            bounded.cut_off(what, given, exc)

    def close(self) -> None:
        # An attempt that says it holds nothing (``idle``) needs no call into the loop.
        if self._attempt.idle:
            return
        closing = self._attempt.close()
        if self._steps:
            self._loop.run_stepped(closing, off_the_loop=self._off_the_loop)
        else:
            self._loop.run(closing)


class SharedLoopNameWatch:
    """A backend's watch of names behind the blocking protocol, on the shared loop."""

    def __init__(self, watch: AsyncNameWatch, loop: SharedLoop) -> None:
        self._watch, self._loop = watch, loop

    def changed(self, timeout: float) -> bool:
        return self._loop.run(self._watch.changed(timeout))

    def close(self) -> None:
        self._loop.run(self._watch.close())


class SharedLoopLatch:
    """A backend's own latch behind the blocking protocol. The loop and the backend are
    looked up at each call, not kept: a latch made before ``fork()`` is used in the
    child through the child's own loop and backend."""

    def __init__(self, backend: SharedLoopBackend, name: str) -> None:
        self._backend, self._name = backend, name

    def _run(self, call: Callable[[AsyncNativeLatch], Coroutine[Any, Any, T]]) -> T:
        inner = async_latching(self._backend._backend())
        if inner is None:
            raise ConfigError(f"{self._backend.url} keeps no latch of its own")
        return self._backend._loop.run(call(inner.latch(self._name)))

    def try_set_count(self, count: int) -> bool:
        return self._run(lambda latch: latch.try_set_count(count))

    def count_down(self) -> bool:
        return self._run(lambda latch: latch.count_down())

    def count(self) -> int:
        return self._run(lambda latch: latch.count())

    def wait(self, timeout: float | None) -> bool:
        return self._run(lambda latch: latch.wait(timeout))


class SharedLoopBackend:
    """Runs an :class:`AsyncBackend` (created on its loop) behind the sync protocol.

    A forked child gets a loop and a backend of its own on first use: the parent's
    share their epoll set and sockets with the parent, so replies would mix.
    """

    def __init__(self, make: Callable[[], AsyncBackend]) -> None:
        self._make = make
        self._loop = SharedLoop()
        self._inner: AsyncBackend | None = None
        self._making = threading.Lock()
        self._closed = False
        try:
            inner = self._backend()
        except BaseException:
            self._loop.stop()
            raise
        self.url = inner.url
        self.capabilities: Capabilities = inner.capabilities
        self.request_bound = inner.request_bound
        self.outlives_client = inner.outlives_client
        self._steps = inner.capabilities.steps  # see blocking_call.py
        self._off_the_loop = inner.capabilities.steps_off_the_loop
        forking.register(self)

    @classmethod
    def for_url(
        cls,
        make: Callable[[ParsedURL], AsyncBackend],
        parsed: ParsedURL,
        check: Callable[[ParsedURL], object],
    ) -> SharedLoopBackend:
        """The blocking face of an asyncio-only family's ``make(parsed)``; ``check``
        reads the URL first, so that bad input fails before a loop is made."""
        check(parsed)
        return cls(lambda: make(parsed))

    def _backend(self) -> AsyncBackend:
        inner = self._inner
        if inner is None:
            with self._making:
                if self._inner is None:
                    self._inner = self._loop.run(_construct(self._make))
                inner = self._inner
        return inner

    def _reset_after_fork(self) -> None:
        """In a forked child: leave the parent's loop and backend to it, without closing them
        (an event loop closes itself when collected, unregistering the parent's sockets)."""
        if self._closed:
            return  # a closed client stays closed: its loop says so
        forking.abandon(self._loop, self._inner)
        self._loop, self._inner, self._making = SharedLoop(), None, threading.Lock()

    def attempt(
        self, name: str, owner: str, ttl: float, fair: bool = False, renewed: bool = True
    ) -> SharedLoopAttempt:
        return SharedLoopAttempt(
            self._backend().attempt(name, owner, ttl, fair, renewed),
            self._loop,
            self.url,
            self.request_bound,
            self._steps,
            self._off_the_loop,
        )

    def shared_attempt(self, name: str, owner: str, ttl: float, share: Share) -> SharedLoopAttempt:
        inner = async_sharing(self._backend())
        if inner is None:
            raise ConfigError(f"{self.url} has no native read/write or permit queue")
        return SharedLoopAttempt(
            inner.shared_attempt(name, owner, ttl, share),
            self._loop,
            self.url,
            self.request_bound,
            self._steps,
            self._off_the_loop,
        )

    def watch_names(self, prefixes: Sequence[str]) -> SharedLoopNameWatch:
        inner = async_name_watching(self._backend())
        if inner is None:
            raise ConfigError(f"{self.url} pushes no changes of names")
        return SharedLoopNameWatch(inner.watch_names(prefixes), self._loop)

    def latch(self, name: str) -> SharedLoopLatch:
        if not self.capabilities.latches:
            raise ConfigError(f"{self.url} keeps no latch of its own")
        return SharedLoopLatch(self, name)

    def keep(self, name: str, owner: str, seconds: float) -> bool:
        inner = async_keeping(self._backend())
        if inner is None:
            raise ConfigError(f"{self.url} keeps no name after its lease")
        return self._loop.run(inner.keep(name, owner, seconds))

    def release(self, name: str, owner: str) -> bool:
        releasing = self._backend().release(name, owner)
        if self._steps:
            return self._loop.run_stepped(releasing, off_the_loop=self._off_the_loop)
        return self._loop.run(releasing)

    def release_within(self, name: str, owner: str, seconds: float) -> bool:
        """:meth:`release`, cut off after ``seconds`` (BackendUnavailable)."""
        inner = self._backend()
        return self._loop.run(
            bounded_or_detach(seconds, inner.release(name, owner), self.url, "a release", seconds)
        )

    def renew(self, name: str, owner: str, ttl: float) -> bool | RenewedAsOf:
        """Renew for ``ttl``; cut off ``ttl`` + one request later: its answer would come
        after the lease's trust ended, and a thread stuck on a hung server would hold up
        the process's exit."""
        inner = self._backend()
        renewing = inner.renew(name, owner, ttl)
        bound = self.request_bound
        cut_off = bounded_or_detach(ttl + bound, renewing, self.url, "a renewal", bound)
        return self._loop.run(cut_off)

    def renew_many(self, renewals: Sequence[Renewal]) -> list[RenewOutcome]:
        """Renew ``renewals`` in one trip; cut off as :meth:`renew`."""
        inner = async_batch_renewing(self._backend())
        assert inner is not None, "asked only where renews_in_batches"
        bound = self.request_bound
        longest = max((ttl for _, _, ttl in renewals), default=0.0)
        renewing = inner.renew_many(renewals)
        return self._loop.run(
            bounded_or_detach(longest + bound, renewing, self.url, "renewals", bound)
        )

    def inspect(self, name: str) -> LockInfo | None:
        inner = self._backend()
        return self._loop.run(inner.inspect(name))

    def list(self, prefix: str) -> list[LockInfo]:
        inner = self._backend()
        return self._loop.run(inner.list(prefix))

    def waiters(self, name: str) -> builtins.list[str] | None:
        inner = self._backend()
        return self._loop.run(inner.waiters(name))

    def close(self) -> None:
        self._closed = True
        inner = self._inner
        try:
            if inner is not None:
                self._loop.run(inner.close())
        finally:
            self._loop.stop()


async def _construct(make: Callable[[], AsyncBackend]) -> AsyncBackend:
    backend: AsyncBackend = make()
    return backend


def release_within(backend: Backend, name: str, owner: str, seconds: float) -> bool:
    """``backend.release``, cut off after ``seconds``: behind the shared loop, or by a
    blocking driver's socket timeout cut to that (Redis's)."""
    if isinstance(backend, SharedLoopBackend):
        return backend.release_within(name, owner, seconds)
    with call_ends_at(CallEnd(clock.now(), seconds).at):  # no caller's time: one request
        return backend.release(name, owner)


def limited(attempt: Attempt, end: CallEnd) -> Attempt:
    """``attempt``, cut off at ``end`` where it can be (behind the
    shared loop); a blocking backend's own socket timeout bounds the rest."""
    if isinstance(attempt, SharedLoopAttempt):
        attempt.limit(end)
    return attempt
