"""Trust never exceeds what the server granted, whatever order late requests land in."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from fencelock.engine import timing
from fencelock.engine.trust import Trust, granted, unanswered

# One renew/extend request: its TTL, whether its answer came back, and (for an
# unanswered one) how long after being sent the server applied it (None: never).
Request = tuple[float, bool, float | None, float]
request = st.tuples(
    st.floats(0.05, 60),
    st.booleans(),
    st.one_of(st.none(), st.floats(0, 200)),
    st.floats(0.001, 5),  # time since the previous request was sent or answered
)


@given(st.floats(0.05, 60), st.lists(request, max_size=12))
def test_trust_never_outlives_the_servers_expiry(first_ttl: float, requests: list[Request]) -> None:
    now = 0.0
    trust = Trust(timing.trusted_until(now, first_ttl))
    applied = [(now, first_ttl)]  # (when the server applied it, ttl)
    for ttl, answered, late_by, gap in requests:
        started = now = now + gap
        if answered:
            applied.append((started, ttl))
            trust = granted(trust, started, ttl)
        else:
            if late_by is not None:
                applied.append((started + late_by, ttl))
            trust = unanswered(trust, started, ttl)
    last_applied = max(applied, key=lambda a: a[0])  # the server keeps the last one
    server_expiry = last_applied[0] + last_applied[1]
    assert trust.until < server_expiry


def test_an_unanswered_shorter_request_bounds_later_grants() -> None:
    trust = unanswered(Trust(timing.trusted_until(0, 30)), 1.0, 2.0)
    assert trust.until == timing.trusted_until(1.0, 2.0)
    later = granted(trust, 5.0, 30.0)
    assert later.until == timing.trusted_until(5.0, 2.0)


def test_answered_requests_give_full_trust() -> None:
    trust = granted(Trust(timing.trusted_until(0, 1)), 0.5, 10.0)
    assert trust == Trust(timing.trusted_until(0.5, 10.0), math.inf)
