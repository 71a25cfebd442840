"""The acquire loop, stepped by hand: no I/O, no clock, no server."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fencelock.engine.acquire import (
    MAX_BACKOFF,
    MAX_OUTAGE_BACKOFF,
    NOTICE_LIVENESS,
    GaveUp,
    Granted,
    Tried,
    TryAcquire,
    Unreachable,
    Wait,
    Waited,
    acquire_flow,
)
from fencelock.engine.outcomes import Acquired, Busy
from fencelock.engine.timing import clock_drift
from fencelock.errors import BackendUnavailable

busy = st.builds(Busy, st.one_of(st.none(), st.floats(0, 5)))
results = st.lists(
    st.one_of(busy, st.builds(Acquired, st.integers(1, 10**6))), min_size=1, max_size=30
)


def simulate(
    ttl: float, timeout: float | None, script: list[Busy | Acquired], rtt: float = 0.001
) -> tuple[Granted | GaveUp, list[float], float]:
    """Drive the flow over ``script``; Wait ops always run to their timeout.

    Once the script runs out the lock stays busy, except that an unbounded
    wait is granted after 1,000 tries so the simulation ends.
    """
    now = 100.0
    flow = acquire_flow(ttl, timeout, now, lambda: 0.5)
    waits: list[float] = []
    op = next(flow)
    items = iter(script)
    tries = 0
    try:
        while True:
            if isinstance(op, TryAcquire):
                result = next(items, Busy(None))
                tries += 1
                if timeout is None and tries > 1000:
                    result = Acquired(10**9)
                started, now = now, now + rtt
                op = flow.send(Tried(result, started, now))
            else:
                assert isinstance(op, Wait)
                waits.append(op.timeout)
                now += op.timeout
                op = flow.send(Waited(now))
    except StopIteration as done:
        return done.value, waits, now


@given(st.floats(0.05, 60), st.one_of(st.none(), st.floats(0, 10)), results)
def test_flow_never_overruns_its_deadline(
    ttl: float, timeout: float | None, script: list[Busy | Acquired]
) -> None:
    outcome, waits, end = simulate(ttl, timeout, script)
    assert all(w >= 0 for w in waits)
    if timeout is not None:
        assert end <= 100.0 + timeout + 0.002  # at most one try in flight at the deadline
    if isinstance(outcome, Granted):
        grants = [r.token for r in script if isinstance(r, Acquired)] or [10**9]
        assert outcome.token == grants[0]
        assert outcome.trusted_until == outcome.started + ttl - clock_drift(ttl)
    else:
        assert timeout is not None, "an unbounded wait only ends when granted"


@given(busy)
def test_timeout_zero_tries_exactly_once(first: Busy) -> None:
    outcome, waits, _ = simulate(30, 0, [first])
    assert isinstance(outcome, GaveUp)
    assert outcome.attempts == 1
    assert waits == []


@given(st.floats(0.001, 5))
def test_waits_until_the_holders_ttl(retry_after: float) -> None:
    _, waits, _ = simulate(30, None, [Busy(retry_after), Acquired(7)])
    assert retry_after <= waits[0] <= retry_after + 0.01


def test_unknown_ttl_backs_off_exponentially_to_a_cap() -> None:
    _, waits, _ = simulate(30, None, [Busy(None)] * 12 + [Acquired(1)])
    assert waits == sorted(waits)
    assert waits[-1] <= MAX_BACKOFF
    assert waits[1] > waits[0]


def test_a_queued_waiter_waits_for_its_notice_not_on_a_timer() -> None:
    _, waits, _ = simulate(30, None, [Busy(notified=True)] * 3 + [Acquired(1)])
    assert waits == [NOTICE_LIVENESS] * 3


@given(st.floats(0, 10))
def test_a_queued_waiter_still_gives_up_at_its_deadline(timeout: float) -> None:
    outcome, waits, end = simulate(30, timeout, [Busy(notified=True)] * 100)
    assert isinstance(outcome, GaveUp)
    assert all(w <= NOTICE_LIVENESS for w in waits)
    assert end <= 100.0 + timeout + 0.002


@given(st.lists(busy, max_size=20))
def test_a_grant_counts_the_tries_it_took(before: list[Busy]) -> None:
    outcome, _, _ = simulate(30, None, [*before, Acquired(7)])
    assert isinstance(outcome, Granted)
    assert outcome.attempts == len(before) + 1


# ---------------------------------------------------------------- outages


def test_a_server_never_reached_is_said_at_once() -> None:
    flow = acquire_flow(10.0, 60.0, 100.0, lambda: 0.5)
    assert isinstance(next(flow), TryAcquire)
    error = BackendUnavailable("nothing listens there")
    with pytest.raises(BackendUnavailable, match="nothing listens"):
        flow.send(Unreachable(error, 100.0, 100.1))


def test_a_waiter_waits_through_an_outage_within_its_timeout() -> None:
    flow = acquire_flow(10.0, 60.0, 100.0, lambda: 0.5)
    next(flow)
    assert isinstance(flow.send(Tried(Busy(notified=True), 100.0, 100.01)), Wait)
    assert isinstance(flow.send(Waited(101.0)), TryAcquire)
    down = BackendUnavailable("restarting")
    pauses = []
    for second in range(102, 110):  # eight failed tries: the server restarts
        op = flow.send(Unreachable(down, float(second), second + 0.01))
        assert isinstance(op, Wait)
        pauses.append(op.timeout)
        assert isinstance(flow.send(Waited(second + 0.5)), TryAcquire)
    assert pauses == sorted(pauses)
    assert max(pauses) <= MAX_OUTAGE_BACKOFF
    with pytest.raises(StopIteration) as done:
        flow.send(Tried(Acquired(7), 111.0, 111.01))
    assert isinstance(done.value.value, Granted)
    assert done.value.value.token == 7


def test_an_outage_past_the_timeout_is_raised() -> None:
    flow = acquire_flow(10.0, 2.0, 100.0, lambda: 0.5)
    next(flow)
    flow.send(Tried(Busy(notified=True), 100.0, 100.01))
    flow.send(Waited(101.0))
    with pytest.raises(BackendUnavailable):
        flow.send(Unreachable(BackendUnavailable("down"), 101.0, 102.5))


def test_a_try_left_unanswered_bounds_the_lease_it_may_still_extend() -> None:
    """Found by the simulator: where a backend grants its holder's own try again
    (PostgreSQL), a try of this acquisition that got no answer may land after the
    grant and an extend, setting the lease to its TTL from then: the lease starts with
    that TTL as its floor, as an unanswered renewal's (engine/trust.py)."""
    answered = acquire_flow(10.0, 60.0, 100.0, lambda: 0.5)
    next(answered)
    with pytest.raises(StopIteration) as done:
        answered.send(Tried(Acquired(7), 100.0, 100.01))
    assert done.value.value.ttl_floor == float("inf")

    flow = acquire_flow(10.0, 60.0, 100.0, lambda: 0.5)
    next(flow)
    flow.send(Tried(Busy(notified=True), 100.0, 100.01))
    flow.send(Waited(101.0))
    assert isinstance(flow.send(Unreachable(BackendUnavailable("lost"), 101.0, 101.3)), Wait)
    flow.send(Waited(101.5))
    with pytest.raises(StopIteration) as done:
        flow.send(Tried(Acquired(8), 101.5, 101.51))
    assert done.value.value.ttl_floor == 10.0
