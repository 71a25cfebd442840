"""The metrics see what the locks did, the same on every backend: grants, contention,
timeouts, the waiters of the moment, hold times and a loss with its cause."""

from __future__ import annotations

import threading

import pytest

import fencelock
from fencelock import metrics
from tests.polling import wait_until


def _prefix(name: str) -> metrics.PrefixMetrics:
    return metrics.snapshot()[name.partition("/")[0]]  # the name fixture's first part


def test_the_metrics_see_what_the_locks_did(
    client: fencelock.Client, other: fencelock.Client, name: str
) -> None:
    with client.lock(name, ttl=5), pytest.raises(fencelock.LockTimeout):
        other.lock(name).acquire(timeout=0.2)
    held = client.lock(name, ttl=5).acquire()
    waiter = threading.Thread(target=lambda: other.lock(name, ttl=5).acquire(30).release())
    waiter.start()
    wait_until(
        lambda: _prefix(name).waiting >= 1,
        what="the waiter counted as waiting",
        interval=0.01,
    )
    held.release()
    waiter.join(30)
    lost = client.lock(name, ttl=1).acquire()
    assert other.evict(name) is not None
    assert lost.wait_lost(15)
    seen = _prefix(name)
    assert seen.acquisitions == 4
    assert seen.timeouts == 1
    assert seen.contended >= 1
    assert seen.waiting == 0  # nobody waits any more
    assert seen.hold_seconds.count == 4  # three released, one lost
    assert sum(seen.lost.values()) == 1
    assert seen.lost["taken_over"] + seen.lost["session_ended"] == 1
    assert seen.ttl == 1.0
    assert seen.acquire_seconds.count == 5
