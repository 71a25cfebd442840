from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fencelock.engine import renewal
from fencelock.engine.timing import trusted_until

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
