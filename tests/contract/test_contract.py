"""The backend contract (DESIGN.md), the same for every backend."""

from __future__ import annotations

import asyncio
import gc
import itertools
import multiprocessing
import os
import re
import socket
import threading
import time
from multiprocessing.process import BaseProcess
from pathlib import Path

import pytest

import fencelock
from fencelock import clock
from fencelock.backends.base import Capabilities
from fencelock.engine import timing
from tests.contract.conftest import BackendCase, left_to_the_garbage_collector, wait_for_waiters
from tests.contract.workers import unsafe_increments


def test_acquire_release_and_tokens_increase(client: fencelock.Client, name: str) -> None:
    tokens = []
    for _ in range(3):
        with client.lock(name) as lease:
            assert lease.name == name
            assert not lease.lost
            assert re.fullmatch(r"[0-9a-f]{40}\.[a-z2-7]+", lease.owner)  # random, and who
            tokens.append(lease.token)
    assert tokens == sorted(set(tokens))


def test_held_lock_excludes_others(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    lease = client.lock(name).acquire()
    with pytest.raises(fencelock.LockTimeout):
        other.lock(name).acquire(timeout=0)
    with pytest.raises(fencelock.LockTimeout):
        other.lock(name).acquire(timeout=0.1)
    lease.release()
    assert other.lock(name).acquire(timeout=0).token > lease.token


def test_failed_acquire_in_with_does_not_run_body(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    held = client.lock(name).acquire()
    ran = False
    with pytest.raises(fencelock.LockTimeout), other.lock(name, timeout=0):
        ran = True
    assert not ran
    held.release()


def test_owners_are_unique_per_attempt(client: fencelock.Client, name: str) -> None:
    lock = client.lock(name)
    owners = set()
    for _ in range(5):
        with lock as lease:
            owners.add(lease.owner)
    assert len(owners) == 5


def test_non_owner_cannot_release_or_renew(client: fencelock.Client, name: str) -> None:
    lease = client.lock(name).acquire()
    assert client.internals.backend.release(name, "f" * 40) is False
    assert client.internals.backend.renew(name, "f" * 40, 60) is False
    info = client.inspect(name)
    assert info is not None
    assert info.owner == lease.owner
    assert info.token == lease.token
    lease.release()


def test_lease_expires_without_renewal(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    asked = clock.now()
    lease = client.lock(name, ttl=0.3, renew=False).acquire()
    lost = threading.Event()
    lease.on_lost(lambda _l: lost.set())
    # trusted from when the request went out, never longer than granted; the
    # lower bound holds however long a loaded machine took to acquire
    remaining = lease.remaining()
    assert remaining <= 0.3 - timing.clock_drift(0.3)
    assert remaining >= 0.3 - timing.clock_drift(0.3) - (clock.now() - asked)
    assert lost.wait(2)
    assert lease.lost
    assert lease.remaining() == 0
    with pytest.raises(fencelock.LeaseLost):
        lease.check()
    # etcd keeps a lease at least its minimum TTL (2 s with default election timing)
    successor = other.lock(name).acquire(timeout=5)
    assert successor.token > lease.token
    with pytest.raises(fencelock.LeaseLost):
        lease.release()
    info = client.inspect(name)
    assert info is not None
    assert info.owner == successor.owner
    successor.release()


def test_renewal_keeps_the_lease(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    # 2 s: on a session backend the TTL is the server's idle timeout, and a 1 s one was
    # missed on a loaded machine (PostgreSQL ended the advisory lock's idle session)
    lease = client.lock(name, ttl=2.0).acquire()
    time.sleep(4.2)  # past two TTLs: only renewals keep it
    assert not lease.lost
    lease.check()
    with pytest.raises(fencelock.LockTimeout):
        other.lock(name).acquire(timeout=0)
    lease.release()
    assert lease.released


def test_extend_and_release_twice(client: fencelock.Client, name: str) -> None:
    # 2 s, not 0.5 s: unrenewed, a 0.5 s lease ran out before the extend beside two busy loops
    lease = client.lock(name, ttl=2, renew=False).acquire()
    lease.extend(5)
    assert lease.remaining() > 4
    lease.release()
    lease.release()
    with pytest.raises(fencelock.LeaseLost):
        lease.extend()


def test_taken_over_lease_is_lost_at_renewal(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    lease = client.lock(name, ttl=0.3, renew=False).acquire()
    successor = other.lock(name).acquire(timeout=10)  # once its TTL ran out on the server
    with pytest.raises(fencelock.LeaseLost):
        lease.extend(10)
    assert successor.token > lease.token
    successor.release()


def test_waiter_wakes_promptly_on_release(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    lease = client.lock(name, ttl=30).acquire()
    woke: list[float] = []

    def wait_for_it() -> None:
        waiter_lease = other.lock(name).acquire(timeout=10)
        woke.append(clock.now())
        waiter_lease.release()

    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    wait_for_waiters(client, name)
    released_at = clock.now()
    lease.release()
    waiter.join(10)
    # Without a notification the waiter would sleep until the 30 s TTL ran out; the
    # bound leaves a loaded machine seconds, and still fails that.
    assert woke
    assert woke[0] - released_at < 5


def test_waiter_takes_an_expired_lease_promptly(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    lease = client.lock(name, ttl=0.4, renew=False).acquire()
    started = clock.now()
    successor = other.lock(name).acquire(timeout=10)
    assert 0.3 < clock.now() - started < 5  # at the expiry: not before, and not at timeout
    assert successor.token > lease.token
    successor.release()


def test_mutual_exclusion_across_workers(backend: BackendCase, name: str, tmp_path: Path) -> None:
    counter, log = tmp_path / "counter", tmp_path / "log"
    counter.write_text("0")
    workers, rounds = 4, 15
    args = (backend.url, name, str(counter), rounds, str(log))
    procs: list[BaseProcess | threading.Thread]
    if backend.cross_process:
        ctx = multiprocessing.get_context("spawn")
        procs = [ctx.Process(target=unsafe_increments, args=args) for _ in range(workers)]
    else:
        procs = [threading.Thread(target=unsafe_increments, args=args) for _ in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert int(counter.read_text()) == workers * rounds
    spans = sorted(tuple(map(float, line.split())) for line in log.read_text().splitlines())
    tokens = [int(t) for _, _, t in spans]
    assert tokens == sorted(set(tokens)), "tokens follow the order of the critical sections"
    for (_, end, _), (start, _, _) in itertools.pairwise(spans):
        assert end <= start, "two critical sections overlapped"


def test_tokens_survive_restart(backend: BackendCase, name: str) -> None:
    if not backend.persistent:
        pytest.skip("memory:// keeps nothing across a restart, by design")
    with fencelock.connect(backend.url) as first, first.lock(name) as lease:
        before = lease.token
    with fencelock.connect(backend.url) as second, second.lock(name) as lease:
        assert lease.token > before


def test_inspect_and_list(client: fencelock.Client, name: str) -> None:
    assert client.inspect(name) is None
    lease = client.lock(name).acquire()
    info = client.inspect(name)
    assert info is not None
    assert info.held
    assert info.token == lease.token
    assert info.remaining is not None
    assert 0 < info.remaining <= 30
    assert [i.name for i in client.list(name.rsplit("/", maxsplit=1)[0] + "/")] == [name]
    lease.release()
    info = client.inspect(name)
    assert info is not None
    assert not info.held
    assert info.token == lease.token
    assert client.list(name) == []


def test_inspect_and_list_say_who_holds_it_and_since_when(
    backend: BackendCase, client: fencelock.Client, name: str
) -> None:
    before = time.time()
    lease = client.lock(name).acquire()
    after = time.time()
    info = client.inspect(name)
    assert info is not None
    for seen in (info, *client.list(name)):
        assert seen.owner == lease.owner
        holder = seen.holder
        assert holder is not None
        assert holder.pid == os.getpid()
        assert holder.host == socket.gethostname()
        assert holder.started is not None
        assert holder.started <= before
        if backend.records_since:  # the server's clock, on this machine: a little slack
            assert seen.since is not None
            assert before - 0.5 <= seen.since <= after + 0.5
        else:
            assert seen.since is None
    lease.release()


def test_since_is_when_a_waiter_was_granted_not_when_it_asked(
    backend: BackendCase, client: fencelock.Client, name: str
) -> None:
    if not backend.records_since:
        pytest.skip("this backend records no grant time (docs/operations.md)")
    first = client.lock(name).acquire()
    got: list[fencelock.Lease] = []
    waiter = threading.Thread(target=lambda: got.append(client.lock(name).acquire(timeout=30)))
    waiter.start()
    wait_for_waiters(client, name)
    time.sleep(0.5)
    released_at = time.time()
    first.release()
    waiter.join(30)
    info = client.inspect(name)
    assert info is not None
    assert info.owner == got[0].owner
    assert info.since is not None
    assert released_at - 0.25 <= info.since <= time.time() + 0.5  # the grant, not the ask
    got[0].release()


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_a_closed_client_says_so(backend: BackendCase, name: str) -> None:
    """A call on a closed client is a fencelock error saying so, on every backend (a
    stepped one raised asyncio's own "Event loop is closed"; memory:// and redis://
    took the lock), and leaves no coroutine unawaited behind it."""
    client = fencelock.connect(backend.url)
    client.lock(name).acquire(timeout=5).release()
    client.close()
    with pytest.raises(fencelock.FencelockError, match="closed"):
        client.lock(name).acquire(timeout=0)


def test_a_closed_client_leaves_nothing_open(backend: BackendCase, name: str) -> None:
    """Closed, a client has closed every connection it opened (its lease's, a waiter's
    that timed out, Sentinel's): none is left for the garbage collector to find."""
    gc.collect()  # what earlier tests left is theirs
    client = fencelock.connect(backend.url)
    other = fencelock.connect(backend.url)
    with client.lock(name), pytest.raises(fencelock.LockTimeout):
        other.lock(name).acquire(timeout=0.2)
    other.close()
    client.close()
    del client, other
    assert left_to_the_garbage_collector() == []


def test_leaving_with_after_loss_raises(client: fencelock.Client, name: str) -> None:
    with pytest.raises(fencelock.LeaseLost), client.lock(name, ttl=0.2, renew=False) as lease:
        time.sleep(0.3)
    assert lease.lost


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ttl": 0}, "ttl must be > 0"),
        ({"ttl": -1}, "ttl must be > 0"),
        ({"ttl": "5"}, "number of seconds"),
        ({"timeout": -1}, "timeout must be"),
    ],
)
def test_bad_arguments_are_config_errors(
    client: fencelock.Client, name: str, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(fencelock.ConfigError, match=message):
        client.lock(name, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "a b", "/lead", "trail/", "a//b", "a/../b", "x" * 201, "ü"])
def test_bad_names_are_config_errors(client: fencelock.Client, bad: str) -> None:
    with pytest.raises(fencelock.ConfigError):
        client.lock(bad)


def test_the_common_connection_options_are_taken_everywhere(
    backend: BackendCase, name: str
) -> None:
    """Code written for one $FENCELOCK_URL runs on another: ``timeout`` and
    ``connect_timeout`` are options of every scheme (in seconds)."""
    url = re.sub(r"[?&]timeout=[^&]*", "", backend.url)  # redlock's own, given twice below
    with (
        fencelock.connect(url, timeout=5, connect_timeout=5) as client,
        client.lock(name, ttl=5) as lease,
    ):
        assert lease.token > 0
    with pytest.raises(fencelock.ConfigError, match="timeout"):
        fencelock.connect(url, timeout=0)


def test_each_backend_keeps_its_urls_request_bound(backend: BackendCase) -> None:
    """The URL's ``request_bound`` is the backend's own, sync and async: every scheme
    takes it, and the blocking face of an asyncio backend keeps the same."""
    url = f"{backend.url}{'&' if '?' in backend.url else '?'}request_bound=7.5"
    url = url.replace("request_bound=5&", "").replace("&request_bound=5", "")
    with fencelock.connect(url) as client:
        assert client.internals.backend.request_bound == 7.5
        assert isinstance(client.internals.backend.capabilities, Capabilities)

    async def main() -> None:
        async with fencelock.aconnect(url) as aclient:
            assert aclient.internals.backend.request_bound == 7.5

    asyncio.run(main())
