"""A client killed (SIGKILL) after any step of a primitive's operation leaves nothing that
outlives its leases' TTL: the next caller gets the whole primitive back.

Each operation below (a read or write hold of a read-write lock, a semaphore permit, a
multi-lock, a leadership) is run, taken and given back, by a forked child that kills
itself right after its k-th step (a lease taken or given back), for every k the
operation has; the parent then takes the primitive in full on the same names. The
count-down latch, whose counts outlive their client, has its own crash tests
(test_latch.py). Found needed by issue 23 for the latch; these hold by construction
(every step is a lease of the primitive's TTL), and this proves it on every backend.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable
from typing import Any

import pytest

import fencelock
from fencelock.lease import Lease
from fencelock.primitives.lock import Lock
from tests.contract.conftest import BackendCase

pytestmark = pytest.mark.timeout(300)

# Raised to its minimum where the backend has one (etcd 2 s, ZooKeeper's session); 3 s,
# as 1 s leases of 18 children forked at once lost renewals on a loaded 2-core machine.
TTL = 3.0
WAIT = 60.0  # the next caller's patience: a lease left behind runs out long before
STEPS = {"rwlock-read": 4, "rwlock-write": 2, "semaphore": 2, "multi": 6, "election": 4}
FINISHED = 3  # a child's exit code when its operation had fewer steps than asked


def _operate(client: fencelock.Client, primitive: str, name: str) -> None:
    """One operation, taken and given back (what a child runs, and is killed in)."""
    if primitive.startswith("rwlock"):
        rw = client.rw_lock(name, ttl=TTL)
        side = rw.read() if primitive == "rwlock-read" else rw.write()
        side.acquire(timeout=WAIT).release()
    elif primitive == "semaphore":
        client.semaphore(name, permits=2, ttl=TTL).acquire(timeout=WAIT).release()
    elif primitive == "multi":
        names = [f"{name}/{part}" for part in "abc"]
        client.multi_lock(names, ttl=TTL).acquire(timeout=WAIT).release()
    else:
        client.election(name, ttl=TTL).campaign("child", timeout=WAIT).resign()


def _take_in_full(client: fencelock.Client, primitive: str, name: str) -> None:
    """The whole primitive, after a child died in it: fails (LockTimeout) if it left
    anything that outlives its TTL."""
    if primitive.startswith("rwlock"):
        rw = client.rw_lock(name, ttl=5)
        rw.write().acquire(timeout=WAIT).release()
        rw.read().acquire(timeout=WAIT).release()
    elif primitive == "semaphore":
        semaphore = client.semaphore(name, permits=2, ttl=5)
        first, second = semaphore.acquire(timeout=WAIT), semaphore.acquire(timeout=WAIT)
        second.release()
        first.release()
    elif primitive == "multi":
        names = [f"{name}/{part}" for part in "abc"]
        client.multi_lock(names, ttl=5).acquire(timeout=WAIT).release()
    else:
        election = client.election(name, ttl=5)
        leadership = election.campaign("parent", timeout=WAIT)
        leader = election.leader()
        assert leader is not None, leader
        assert leader.value == "parent", leader  # a dead one's evicted
        leadership.resign()


def _killed_after(step: int) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    done = [0]

    def counting(call: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            result = call(*args, **kwargs)
            done[0] += 1
            if done[0] == step:
                os.kill(os.getpid(), signal.SIGKILL)
            return result

        return counted

    return counting


def _child(url: str, primitive: str, name: str, step: int) -> None:
    """In a forked child: run the operation, killed right after its ``step``-th step."""
    counting = _killed_after(step)
    Lock.acquire = counting(Lock.acquire)  # type: ignore[method-assign]
    Lease.release = counting(Lease.release)  # type: ignore[method-assign]
    with fencelock.connect(url) as client:
        _operate(client, primitive, name)
    os._exit(FINISHED)


def _supported(url: str, name: str) -> list[str]:
    """The operations this backend has (a ConfigError says which it has not)."""
    supported = []
    with fencelock.connect(url) as client:
        for primitive in STEPS:
            try:
                _operate(client, primitive, f"{name}/probe/{primitive}")
            except fencelock.ConfigError:
                continue
            supported.append(primitive)
    return supported


def test_a_client_killed_after_any_step_leaves_the_primitive_whole(
    backend: BackendCase, name: str
) -> None:
    if not backend.cross_process:
        pytest.skip("memory:// is seen by its own process only")
    primitives = _supported(backend.url, name)
    fork = multiprocessing.get_context("fork")
    children = {
        (primitive, step): fork.Process(
            target=_child, args=(backend.url, primitive, f"{name}/{primitive}/{step}", step)
        )
        for primitive in primitives
        for step in range(1, STEPS[primitive] + 1)
    }
    for child in children.values():
        child.start()
    for child in children.values():
        child.join(WAIT)
        assert child.exitcode in (-signal.SIGKILL, FINISHED), child.exitcode
    with fencelock.connect(backend.url) as client:
        for (primitive, step), child in children.items():
            if child.exitcode == -signal.SIGKILL:
                _take_in_full(client, primitive, f"{name}/{primitive}/{step}")
    for primitive in primitives:  # every operation was killed midway at least once
        killed = [
            step for (p, step), c in children.items() if p == primitive and (c.exitcode or 0) < 0
        ]
        assert 1 in killed, (primitive, killed)
