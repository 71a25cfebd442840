"""A client survives fork(): Celery prefork, gunicorn --preload, multiprocessing's fork pool.

A client made in the parent, used in forked children: their leases are renewed,
a lock the parent's threads held at fork time blocks nobody, the parent's leases
are neither renewed nor released by a child, and memory:// refuses to be shared.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import fencelock
from tests.contract.conftest import BackendCase

CROSS_PROCESS = ["sqlite", "redis", "redlock"]
WORKERS = 4
HOLD = 2.0  # each worker holds a ttl=1 lease this long: it needs renewing twice
CHILD_DEADLINE = 60.0  # a loaded 2-core machine; a deadlocked child never finishes

# The clients the fork pool's workers inherit (set in the parent before forking).
_INHERITED: dict[str, Any] = {}


def _url(backend: BackendCase) -> str:
    return backend.url  # (Redlock's URL there waits 1 s for a node, not the default 0.1 s)


@pytest.fixture
def parents(backend: BackendCase, name: str) -> Iterator[fencelock.Client]:
    """The parent's client, with its renewer thread started and connections open."""
    with fencelock.connect(_url(backend)) as client:
        client.lock(name + "/warm", ttl=5).acquire(timeout=5).release()
        _INHERITED["client"] = client
        try:
            yield client
        finally:
            del _INHERITED["client"]


def _hold_in_worker(name: str) -> str:
    """In a forked pool worker: hold a ttl=1 lease for 2 s on the inherited client."""
    try:
        with _INHERITED["client"].lock(name, ttl=1, timeout=10) as lease:
            time.sleep(HOLD)
            lease.check()
    except fencelock.FencelockError as exc:
        return f"{type(exc).__name__}: {exc}"
    return "held"


async def _ahold(name: str) -> None:
    async with _INHERITED["aclient"].lock(name, ttl=1, timeout=10) as lease:
        await asyncio.sleep(HOLD)
        lease.check()


def _ahold_in_worker(name: str) -> str:
    """As :func:`_hold_in_worker`, with the inherited asyncio client on a loop of its own."""
    try:
        asyncio.run(_ahold(name))
    except fencelock.FencelockError as exc:
        return f"{type(exc).__name__}: {exc}"
    return "held"


def _in_fork_pool(names: list[str], work: Callable[[str], str] = _hold_in_worker) -> list[str]:
    with multiprocessing.get_context("fork").Pool(WORKERS) as pool:
        return pool.map_async(work, names).get(timeout=CHILD_DEADLINE)


@pytest.mark.parametrize("backend", CROSS_PROCESS, indirect=True)
def test_fork_pool_workers_keep_their_leases(parents: fencelock.Client, name: str) -> None:
    outcomes = _in_fork_pool([f"{name}/{i}" for i in range(WORKERS)])
    assert outcomes == ["held"] * WORKERS


@pytest.mark.parametrize("backend", CROSS_PROCESS, indirect=True)
def test_fork_pool_workers_of_an_asyncio_parent_keep_their_leases(
    backend: BackendCase, name: str
) -> None:
    """The parent forks from a thread while its loop renews a lease of its own."""

    async def parent() -> list[str]:
        client = _INHERITED["aclient"] = fencelock.aconnect(_url(backend))
        try:
            async with client.lock(name + "/parent", ttl=2, timeout=5) as lease:
                names = [f"{name}/{i}" for i in range(WORKERS)]
                outcomes = await asyncio.to_thread(_in_fork_pool, names, _ahold_in_worker)
                lease.check()
        finally:
            del _INHERITED["aclient"]
            await client.aclose()
        return outcomes

    assert asyncio.run(parent()) == ["held"] * WORKERS


class _Child:
    """A forked child running ``work(say)``; ``say(text)`` sends the parent a line."""

    def __init__(self, work: Callable[[Callable[[str], None]], object]) -> None:
        read, write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # never return into pytest from the child
            os.close(read)
            code = 1

            def say(text: str) -> None:
                os.write(write, text.encode() + b"\n")

            try:
                work(say)
                code = 0
            except BaseException as exc:
                os.write(write, f"{type(exc).__name__}: {exc}\n".encode())
            finally:
                os._exit(code)
        os.close(write)
        self._said = os.fdopen(read, "rb")

    def heard(self) -> str:
        """The child's next line ("" once it exited)."""
        return self._said.readline().decode().strip()

    def finish(self) -> tuple[int, str]:
        """Its exit code (-1 if it hung: a deadlock) and the rest of what it said."""
        deadline = time.monotonic() + CHILD_DEADLINE
        while (done := os.waitpid(self.pid, os.WNOHANG))[0] == 0:
            if time.monotonic() > deadline:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
                self._said.close()
                return -1, "the child hung (deadlocked?)"
            time.sleep(0.02)
        with self._said:
            return os.waitstatus_to_exitcode(done[1]), self._said.read().decode()


@contextlib.contextmanager
def _held_by_another_thread(locks: list[Any]) -> Iterator[None]:
    """Hold ``locks`` on a parent thread for the block, as a busy client's threads do."""
    taken, done = threading.Event(), threading.Event()

    def hold() -> None:
        with contextlib.ExitStack() as stack:
            for lock in locks:
                stack.enter_context(lock)
            taken.set()
            done.wait()

    thread = threading.Thread(target=hold)
    thread.start()
    taken.wait()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _busy_locks(client: fencelock.Client) -> list[Any]:
    """Locks a parent thread may hold at fork time: the renewer's (the deadlock seen),
    and the backend's own (SQLite's connection mutex, Redlock's loop's run lock)."""
    backend: Any = client.internals.backend
    locks: list[Any] = [client._renewer._wake]
    if hasattr(backend, "_mutex"):
        locks.append(backend._mutex)
    if hasattr(backend, "_loop"):
        locks.append(backend._loop._run_lock)
    return locks


@pytest.mark.parametrize("backend", CROSS_PROCESS, indirect=True)
def test_a_lock_held_by_a_parent_thread_at_fork_blocks_no_child(
    parents: fencelock.Client, name: str
) -> None:
    def lock_and_renew(say: Callable[[str], None]) -> None:
        with parents.lock(name + "/child", ttl=1, timeout=10) as lease:
            time.sleep(HOLD)
            lease.check()

    with _held_by_another_thread(_busy_locks(parents)):
        child = _Child(lock_and_renew)
    code, said = child.finish()
    assert code == 0, said


@pytest.mark.parametrize("backend", CROSS_PROCESS, indirect=True)
def test_a_child_neither_renews_nor_releases_its_parents_lease(
    parents: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    lease = parents.lock(name, ttl=2).acquire(timeout=5)

    def in_child(say: Callable[[str], None]) -> None:
        assert lease.lost, "the child believes it holds its parent's lease"
        with pytest.raises(fencelock.LeaseLost, match="forked from it holds none"):
            lease.check()
        with pytest.raises(fencelock.LeaseLost):
            lease.release()
        say("tried to release")
        # The parent stops renewing now: had the child's renewer taken over the parent's
        # lease, it would keep it alive while this one is held.
        # Until the parent's lease expired (or 10 s), and for at least two of this
        # lease's TTLs, which its own renewals must span.
        with parents.lock(name + "/child", ttl=1, timeout=10) as own:
            started = time.monotonic()
            while time.monotonic() - started < 10:
                info = parents.inspect(name)
                if (info is None or not info.held) and time.monotonic() - started > 2.0:
                    break
                time.sleep(0.05)
            own.check()

    child = _Child(in_child)
    heard = child.heard()
    info = other.inspect(name)
    parents._renewer.close()  # the parent stops renewing (its lease expires within 2 s)
    code, said = child.finish()
    assert (code, heard) == (0, "tried to release"), heard + said
    assert info is not None, "the child released it"
    assert info.owner == lease.owner, "the child released it"
    after = other.inspect(name)
    assert after is None or not after.held, "the child renewed it"


@pytest.mark.parametrize("backend", CROSS_PROCESS, indirect=True)
def test_a_child_does_not_re_enter_its_parents_lease_or_use_its_permit(
    parents: fencelock.Client, name: str
) -> None:
    """fork() keeps the forking thread's id: a child asking for its parent's re-entrant
    lock on that thread must wait like anyone, not count itself in the parent's lease."""
    held = parents.lock(name, reentrant=True, ttl=5).acquire(timeout=5)
    permit = parents.semaphore(name + "/pool", permits=1, ttl=5).acquire(timeout=5)

    def in_child(say: Callable[[str], None]) -> None:
        again = parents.lock(name, reentrant=True).try_acquire()
        say("re-entered" if again is not None else "busy")
        other = parents.semaphore(name + "/pool", permits=1).try_acquire()
        say("a permit" if other is not None else "no permit")

    child = _Child(in_child)
    heard = [child.heard(), child.heard()]
    code, said = child.finish()
    assert (code, heard) == (0, ["busy", "no permit"]), said
    assert held.depth == 1
    assert not held.lost
    permit.release()
    held.release()


@pytest.mark.parametrize("backend", ["memory"], indirect=True)
def test_an_inherited_memory_client_refuses_to_work(parents: fencelock.Client, name: str) -> None:
    """Each child would otherwise have its own copy of the store: the same lock held in
    every child at once, all with one token."""
    outcomes = _in_fork_pool([name] * WORKERS)
    assert all(o.startswith("ConfigError") and "forked" in o for o in outcomes), outcomes
