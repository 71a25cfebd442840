"""An asyncio face for a backend whose driver is blocking (``sqlite3``, in-process memory).

Short operations run on a small thread pool; waits run on their own pool so
that many waiting tasks never starve renewals of threads. One adapter, not a
second implementation of each backend.

A task cancelled while its try runs in a thread cannot stop that thread: the try
may still take the lease, which no ``Lease`` would ever release. So the adapter
waits for such a try and gives back what it took (compare-and-delete), then
closes the attempt; the cancelled acquire returns once that is done.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from fencelock import forking
from fencelock.backends import base
from fencelock.errors import FencelockError

T = TypeVar("T")


class _Pools:
    def __init__(self) -> None:
        self._start()
        forking.register(self)

    def _start(self) -> None:
        self.ops = ThreadPoolExecutor(max_workers=4, thread_name_prefix="fencelock-op")
        self.waits = ThreadPoolExecutor(max_workers=256, thread_name_prefix="fencelock-wait")
        self.undoing: set[Future[None]] = set()

    def _reset_after_fork(self) -> None:
        """In a forked child: the parent's pools have no threads here; work would never run."""
        self._start()

    async def run(self, pool: ThreadPoolExecutor, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(pool, fn)

    def undo(self, fn: Callable[[], None]) -> Future[None]:
        """Run ``fn`` on the ops pool, tracked so that closing the backend waits for it."""
        future = self.ops.submit(fn)
        self.undoing.add(future)
        future.add_done_callback(self.undoing.discard)
        return future

    async def settle(self) -> None:
        """Wait for every undo still running."""
        for future in list(self.undoing):
            with contextlib.suppress(Exception):
                await asyncio.wrap_future(future)

    def shutdown(self) -> None:
        self.ops.shutdown(wait=True)
        self.waits.shutdown(wait=False, cancel_futures=True)


async def _settled(undo: Future[None]) -> None:
    # Shielded: a second cancellation must not drop the undo from the pool's queue.
    with contextlib.suppress(Exception):
        await asyncio.shield(asyncio.wrap_future(undo))


class ThreadedAsyncAttempt:
    def __init__(
        self, attempt: base.Attempt, pools: _Pools, owner: str, release: Callable[[str], bool]
    ) -> None:
        self._attempt, self._pools, self._owner, self._release = attempt, pools, owner, release
        self._taken: str | None = None  # the owner the last try took the lease as
        self._abandoned: Future[None] | None = None

    async def try_acquire(self) -> base.AttemptResult:
        tried = self._pools.ops.submit(self._attempt.try_acquire)
        try:
            result = await asyncio.wrap_future(tried)
        except asyncio.CancelledError:
            if not tried.cancel():  # it is running (or ran): undo it once it is done
                self._abandoned = self._pools.undo(functools.partial(self._abandon, tried))
            raise
        self._taken = (result.owner or self._owner) if isinstance(result, base.Acquired) else None
        return result

    async def wait(self, timeout: float) -> None:
        await self._pools.run(self._pools.waits, functools.partial(self._attempt.wait, timeout))

    async def close(self) -> None:
        if self._abandoned is None:
            # Closing also wakes a wait still blocked in its thread after a cancellation.
            closing = self._pools.ops.submit(self._attempt.close)
            try:
                await asyncio.wrap_future(closing)
                return
            except asyncio.CancelledError:
                # The acquire ends with this cancellation, so its lease goes back too.
                abandon = functools.partial(self._abandon, None, closing)
                self._abandoned = self._pools.undo(abandon)
                await _settled(self._abandoned)
                raise
        await _settled(self._abandoned)

    def _abandon(
        self, tried: Future[base.AttemptResult] | None, closing: Future[None] | None = None
    ) -> None:
        """In a pool thread: release what the abandoned tries took, then close the attempt."""
        taken = self._taken
        if tried is not None and tried.exception() is None:
            result = tried.result()
            taken = (result.owner or self._owner) if isinstance(result, base.Acquired) else None
        try:
            if taken is not None:
                with contextlib.suppress(FencelockError):
                    self._release(taken)
        finally:
            if closing is None or closing.cancel():
                self._attempt.close()
            else:
                closing.exception()  # already closing in another thread: wait for it


class ThreadedAsyncBackend:
    """Runs a blocking :class:`~fencelock.backends.base.Backend` in threads behind the async
    protocol."""

    def __init__(self, backend: base.Backend) -> None:
        self.sync = backend
        self.url = backend.url
        self.capabilities: base.Capabilities = backend.capabilities
        self.request_bound = backend.request_bound
        self.outlives_client = backend.outlives_client
        self._pools = _Pools()

    async def open(self) -> None:
        """The blocking backend connected when it was made."""

    def attempt(
        self, name: str, owner: str, ttl: float, fair: bool = False, renewed: bool = True
    ) -> ThreadedAsyncAttempt:
        release = functools.partial(self.sync.release, name)
        return ThreadedAsyncAttempt(
            self.sync.attempt(name, owner, ttl, fair, renewed), self._pools, owner, release
        )

    async def leave_to_ttl(self, name: str, owner: str) -> None:
        """The wrapped backend's ``leave_to_ttl``, if it has one."""
        leave = getattr(self.sync, "leave_to_ttl", None)
        if leave is not None:
            await self._pools.run(self._pools.ops, functools.partial(leave, name, owner))

    async def release(self, name: str, owner: str) -> bool:
        return await self._pools.run(
            self._pools.ops, functools.partial(self.sync.release, name, owner)
        )

    async def renew(self, name: str, owner: str, ttl: float) -> bool | base.RenewedAsOf:
        return await self._pools.run(
            self._pools.ops, functools.partial(self.sync.renew, name, owner, ttl)
        )

    async def renew_many(self, renewals: Sequence[base.Renewal]) -> list[base.RenewOutcome]:
        batching = base.batch_renewing(self.sync)
        assert batching is not None, "asked only where renews_in_batches"
        return await self._pools.run(
            self._pools.ops, functools.partial(batching.renew_many, renewals)
        )

    async def inspect(self, name: str) -> base.LockInfo | None:
        return await self._pools.run(self._pools.ops, functools.partial(self.sync.inspect, name))

    async def list(self, prefix: str) -> list[base.LockInfo]:
        return await self._pools.run(self._pools.ops, functools.partial(self.sync.list, prefix))

    async def waiters(self, name: str) -> builtins.list[str] | None:
        return await self._pools.run(self._pools.ops, functools.partial(self.sync.waiters, name))

    async def close(self) -> None:
        await self._pools.settle()
        await self._pools.run(self._pools.ops, self.sync.close)
        self._pools.shutdown()
