"""The order waiters get a lock in, on every backend that keeps a line of waiters.

``fair=True`` is strict FIFO; without it a free lease goes to whoever asks first,
unless the oldest waiter has waited 20 ms (docs/backends.md, "Nobody starves").

Waiters are put in line one at a time, each once the backend reports the one before it
queued (``inspect().waiters``), so the arrival order is known without sleeping.
"""

from __future__ import annotations

import multiprocessing
import os
import secrets
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.context import SpawnProcess
from pathlib import Path
from typing import Protocol

import pytest

import fencelock
from fencelock import clock
from fencelock.backends.base import Acquired, Busy
from fencelock.engine.barging import STARVATION_BOUND, WAITER_LIVENESS
from tests.contract.conftest import BackendCase
from tests.contract.workers import fair_waiter, hold_and_hang
from tests.polling import wait_until


class Joinable(Protocol):
    def start(self) -> None: ...

    def join(self, timeout: float | None = None) -> None: ...


@pytest.fixture
def fair_client(client: fencelock.Client) -> fencelock.Client:
    if not client.internals.backend.capabilities.fair:
        with pytest.raises(fencelock.ConfigError, match="fair locks are not available"):
            client.lock("any", fair=True)
        pytest.skip(f"{client.url} has no fair locks (and says so)")
    return client


def wait_until_queued(client: fencelock.Client, name: str, count: int) -> None:
    """Until the backend reports ``count`` waiters in line (fails after 15 s)."""
    wait_until(
        lambda: (info := client.inspect(name)) is not None and info.waiters == count,
        what=lambda: f"{count} waiters queued: {client.inspect(name)}",
        timeout=15,
        interval=0.01,
    )


def waiter(backend: BackendCase, name: str, index: int, log: Path) -> Joinable:
    """One fair waiter: a process where the backend is shared between processes."""
    args = (backend.url, name, index, str(log))
    if backend.cross_process:
        return multiprocessing.get_context("spawn").Process(target=fair_waiter, args=args)
    return threading.Thread(target=fair_waiter, args=args)


def test_fair_lock_serves_waiters_in_arrival_order(
    fair_client: fencelock.Client, backend: BackendCase, name: str, tmp_path: Path
) -> None:
    """Strict FIFO, and the holder that releases and asks again at once goes last."""
    log, count = tmp_path / "order", 4
    holder = fair_client.lock(name, fair=True).acquire()
    waiters = []
    for i in range(count):
        waiters.append(waiter(backend, name, i, log))
        waiters[-1].start()
        wait_until_queued(fair_client, name, i + 1)
    holder.release()
    again = fair_client.lock(name, fair=True).acquire(timeout=30)
    with open(log, "a") as out:
        out.write(f"{count} {again.token}\n")
    again.release()
    for w in waiters:
        w.join(30)
    lines = [line.split() for line in log.read_text().splitlines()]
    by_token = [int(index) for index, _token in sorted(lines, key=lambda line: int(line[1]))]
    assert by_token == list(range(count + 1)), "the lock went out of arrival order"


def test_fair_waiter_that_gives_up_leaves_the_line(
    fair_client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    holder = fair_client.lock(name, fair=True).acquire()
    with pytest.raises(fencelock.LockTimeout):
        other.lock(name, fair=True).acquire(timeout=0.2)
    holder.release()
    # The waiter that gave up is not first in line any more: a newcomer gets the lock.
    assert other.lock(name, fair=True).acquire(timeout=1).token > holder.token


@contextmanager
def first_in_line(
    backend: BackendCase,
    client: fencelock.Client,
    name: str,
    tmp_path: Path,
    liveness: float | None = None,
) -> Iterator[SpawnProcess]:
    """A process waiting (fair) for ``name`` at the head of the line (kept in it
    ``liveness`` s after its last ask); killed at the end."""
    first = multiprocessing.get_context("spawn").Process(
        target=fair_waiter, args=(backend.url, name, 0, str(tmp_path / "first"), liveness)
    )
    first.start()
    try:
        wait_until_queued(client, name, 1)
        yield first
    finally:
        first.kill()
        first.join(5)


@pytest.mark.parametrize(
    ("fault", "liveness", "bound"),
    [
        # paused: still there, so only its liveness deadline (3 s) lets the line move
        (signal.SIGSTOP, None, WAITER_LIVENESS * 4),
        # dead: the release finds nobody to wake, and passes the lease on at once, not
        # at its liveness deadline (made 30 s)
        (signal.SIGKILL, 30.0, 5.0),
    ],
    ids=["paused", "killed"],
)
def test_a_silent_waiter_first_in_line_holds_the_others_up_briefly(
    fair_client: fencelock.Client,
    other: fencelock.Client,
    backend: BackendCase,
    name: str,
    tmp_path: Path,
    fault: signal.Signals,
    liveness: float | None,
    bound: float,
) -> None:
    if not backend.cross_process:
        pytest.skip("needs waiters in other processes")
    holder = fair_client.lock(name, ttl=30, fair=True).acquire(timeout=0)
    with first_in_line(backend, fair_client, name, tmp_path, liveness) as first:
        assert first.pid is not None
        os.kill(first.pid, fault)  # first in line, and silent from now on
        if fault == signal.SIGKILL:
            first.join(5)
        got: list[fencelock.Lease] = []
        second = threading.Thread(
            target=lambda: got.append(other.lock(name, ttl=30, fair=True).acquire(timeout=20))
        )
        second.start()
        wait_until_queued(fair_client, name, 2)
        released = clock.now()
        holder.release()
        second.join(bound)
        waited = clock.now() - released
        assert got, f"a {fault.name}ed waiter blocked the line for {bound}s"
        got[0].release()
    assert waited < bound, f"the line moved {waited:.2f}s after the release"


def test_a_holder_that_asks_again_is_refused_once_the_oldest_waiter_starves(
    client: fencelock.Client, name: str
) -> None:
    """Not fair, but bounded: a free lease goes to whoever asks, unless the oldest
    waiter has waited STARVATION_BOUND; then a holder that releases and asks again at
    once is refused and that waiter gets the lease. Driven through the backend
    protocol, so no thread has to lose a race for it."""
    if not client.internals.backend.capabilities.fair:
        pytest.skip(f"{client.url} keeps no line of waiters to bound")
    backend, owner = client.internals.backend, secrets.token_hex(20)
    holder = backend.attempt(name, owner, 30)
    waiter = backend.attempt(name, secrets.token_hex(20), 30)
    try:
        assert isinstance(holder.try_acquire(), Acquired)
        assert isinstance(waiter.try_acquire(), Busy)  # queued
        time.sleep(STARVATION_BOUND * 2)  # at least this long: it starves now
        assert backend.release(name, owner)
        again = backend.attempt(name, secrets.token_hex(20), 30)
        try:
            assert isinstance(again.try_acquire(), Busy), "the holder took it straight back"
        finally:
            again.close()
        assert isinstance(waiter.try_acquire(), Acquired)
    finally:
        holder.close()
        waiter.close()


def test_an_expired_lease_passes_over_a_dead_waiter_at_once(
    fair_client: fencelock.Client, backend: BackendCase, name: str, tmp_path: Path
) -> None:
    """The holder crashed (its lease expires, no release wakes anyone) and so did the
    first waiter: the next one takes the lease when it expires, not at the dead
    waiter's liveness deadline (made 30 s)."""
    if not backend.cross_process:
        pytest.skip("needs a holder and a waiter in other processes")
    expiry = tmp_path / "expires_at"
    holder = multiprocessing.get_context("spawn").Process(
        target=hold_and_hang, args=(backend.url, name, 1.0, str(expiry))
    )
    holder.start()

    def logged() -> str:
        return expiry.read_text() if expiry.exists() else ""

    try:
        wait_until(logged, what="the holder to take the lease", timeout=15, interval=0.01)
        with first_in_line(backend, fair_client, name, tmp_path, 30.0) as first:
            first.kill()
            first.join(5)
            (tmp_path / "expires_at.go").touch()  # the holder's lease ends in 1 s
            wait_until(
                lambda: logged() != "held",
                what="the holder's lease to end",
                timeout=15,
                interval=0.01,
            )
            lease = fair_client.lock(name, ttl=30, fair=True).acquire(timeout=20)
            late = clock.now() - float(expiry.read_text())
            lease.release()
    finally:
        holder.kill()
        holder.join(5)
    assert late < 5, f"taken {late:.2f}s after the lease expired: the dead waiter held it"
