from __future__ import annotations

import math
import random
from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from fencelock.engine import renewal
from fencelock.engine.lease_state import LeaseState
from fencelock.engine.outcomes import RenewedAsOf
from fencelock.engine.timing import trusted_until
from fencelock.errors import BackendUnavailable

ttls = st.floats(0.05, 3600)
times = st.floats(0, 10**6)


@given(times, ttls)
def test_renewal_comes_well_before_the_safe_time_ends(started: float, ttl: float) -> None:
    assert started < renewal.renew_at(started, ttl) < trusted_until(started, ttl)


@given(times, ttls, st.floats(0, 100))
def test_retry_never_lands_after_the_safe_time(now: float, ttl: float, left: float) -> None:
    end = now + left
    retry = renewal.retry_at(now, ttl, end)
    assert now <= retry <= end
    assert retry > now or end == now


@dataclass(eq=False)
class FakeLease:
    """A :class:`renewal.Renewable` with nothing behind it."""

    ttl: float = 30.0
    trusted_until: float = 29.0
    renews: bool = True
    state: LeaseState = LeaseState.HELD


def test_a_lease_is_first_due_at_a_third_of_its_ttl_or_at_its_safe_time() -> None:
    assert renewal.first_due(FakeLease(), 0.0) == 10.0
    assert renewal.first_due(FakeLease(renews=False), 0.0) == 29.0


def test_before_renewal() -> None:
    assert renewal.before_renewal(FakeLease(), 10.0) is None
    assert renewal.before_renewal(FakeLease(renews=False), 10.0) == renewal.Next(29.0)
    late = renewal.before_renewal(FakeLease(), 29.0)
    assert late is not None
    assert late.due is None
    assert late.lost_because == "not renewed within its TTL (process paused?)"


def test_after_renewal() -> None:
    lease = FakeLease()
    assert renewal.after_renewal(lease, 10.0, True, 10.5) == renewal.Next(20.0)
    assert renewal.after_renewal(lease, 10.0, False, 10.5) == renewal.Next(None)
    failed = renewal.after_renewal(lease, 10.0, BackendUnavailable("down"), 10.5)
    assert failed == renewal.Next(10.5 + 30 * renewal.RETRY_FRACTION)
    assert renewal.after_renewal(lease, 10.0, None, 20.0) == renewal.Next(23.0)
    hung = renewal.after_renewal(lease, 10.0, None, 29.0)
    assert hung.due is None
    assert hung.lost_because is not None
    released = FakeLease(state=LeaseState.RELEASED)
    assert renewal.after_renewal(released, 10.0, True, 10.5) == renewal.Next(None)


def test_the_schedule_gives_the_first_live_deadline() -> None:
    schedule: renewal.Schedule[FakeLease] = renewal.Schedule()
    a, b, c = FakeLease(), FakeLease(), FakeLease()
    schedule.put(a, 5.0)
    schedule.put(b, 3.0)
    schedule.put(c, 4.0)
    schedule.put(b, 7.0)  # rescheduled: its entry at 3.0 is stale
    schedule.forget(c)
    assert schedule.next_due() == 5.0
    assert schedule.pop_batch(4.9) == []
    assert schedule.pop_batch(5.0) == [a]  # b, due at 7.0, is not within 5% of its TTL
    assert schedule.wake_at(5.0) == 7.0
    b.state = LeaseState.LOST
    assert schedule.next_due() is None
    assert schedule.wake_at(7.0) == 7.0 + renewal.IDLE_TICK
    schedule.put_back(b, 8.0)  # not live: not put
    schedule.put_back(a, None)
    assert schedule.next_due() is None


@given(st.lists(st.tuples(st.integers(0, 40), st.floats(0, 100), st.booleans())))
def test_the_schedule_keeps_one_current_entry_per_lease(
    puts: list[tuple[int, float, bool]],
) -> None:
    """However many puts and forgets, each lease comes out once, at its latest
    deadline, and a forgotten one not at all."""
    check_one_entry_each(puts)


def test_a_compacted_schedule_keeps_one_current_entry_per_lease() -> None:
    rng = random.Random(7)
    puts = [(rng.randrange(41), rng.uniform(0, 100), rng.random() < 0.1) for _ in range(5000)]
    check_one_entry_each(puts)


def check_one_entry_each(puts: list[tuple[int, float, bool]]) -> None:
    leases = [FakeLease() for _ in range(41)]
    schedule: renewal.Schedule[FakeLease] = renewal.Schedule()
    expected: dict[int, float] = {}
    for index, due, forget in puts:
        if forget:
            schedule.forget(leases[index])
            expected.pop(index, None)
        else:
            schedule.put(leases[index], due)
            expected[index] = due
    popped = []
    while batch := schedule.pop_batch(math.inf, limit=7):
        popped += batch
    assert sorted(leases.index(lease) for lease in popped) == sorted(expected)
    dues = [expected[leases.index(lease)] for lease in popped]
    assert dues == sorted(dues)


@given(
    dues=st.lists(st.floats(0, 100), max_size=60),
    now=st.floats(0, 100),
    limit=st.integers(1, 80),
)
def test_a_batch_is_every_lease_due_and_those_due_soon_after(
    dues: list[float], now: float, limit: int
) -> None:
    """Once one lease is due, the batch takes, first due first, every lease due within
    5% of its TTL (30 s: 1.5 s) after ``now``, up to ``limit``; the rest stay."""
    leases = [FakeLease() for _ in dues]
    schedule: renewal.Schedule[FakeLease] = renewal.Schedule()
    for lease, due in zip(leases, dues, strict=True):
        schedule.put(lease, due)
    batch = schedule.pop_batch(now, limit)
    by_due = sorted(range(len(dues)), key=lambda i: dues[i])
    if not dues or dues[by_due[0]] > now:
        assert batch == []
        return
    window = now + renewal.COALESCE_FRACTION * 30.0
    expected = [i for i in by_due if dues[i] <= window][:limit]
    assert sorted(leases.index(lease) for lease in batch) == sorted(expected)
    assert [dues[leases.index(lease)] for lease in batch] == sorted(dues[i] for i in expected)
    rest = []
    while more := schedule.pop_batch(math.inf):
        rest += more
    assert len(rest) + len(batch) == len(dues)
    assert not set(rest) & set(batch)


def test_a_renewal_granted_as_of_a_shared_keepalive_follows_that_keepalive() -> None:
    lease = FakeLease()
    # granted as of 7.0 (the session's keepalive), asked at 10.0: due a third on from 7.0
    as_of = RenewedAsOf(7.0)
    assert renewal.after_renewal(lease, 10.0, as_of, 10.5) == renewal.Next(17.0)
    # a keepalive so old its third has passed: looked at again soon, never in a loop
    stale = renewal.after_renewal(lease, 10.0, RenewedAsOf(-5.0), 10.5)
    assert stale == renewal.Next(10.5 + renewal.MIN_RETRY)
