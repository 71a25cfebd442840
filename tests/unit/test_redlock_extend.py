"""Why a Redlock extend was refused: lost, unknown or late, and never more than one.

The backend's renew returns True exactly when :func:`decide_extend` (the function the
token simulation drives) gives a new bound; otherwise it acts on :func:`why_not_extended`.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fencelock.engine.redlock import (
    NodeError,
    NodeReply,
    NotExtended,
    decide_extend,
    quorum,
    why_not_extended,
)

replies = st.one_of(st.booleans(), st.builds(NodeError))
results_of_any_size = st.integers(3, 9).flatmap(lambda n: st.lists(replies, min_size=n, max_size=n))


@given(results_of_any_size, st.floats(0.01, 3600), st.floats(0, 10**6), st.floats(0, 4000))
def test_a_refused_extend_has_exactly_one_reason(
    results: list[NodeReply], ttl: float, started: float, took: float
) -> None:
    n, q = len(results), quorum(len(results))
    extended = sum(r is True for r in results)
    refused = sum(r is False for r in results)
    if (
        decide_extend(results, ttl=ttl, started=started, now=started + took, until=started + ttl)
        is not None
    ):
        return
    why = why_not_extended(results)
    if extended >= q:
        assert why is NotExtended.TOO_SLOW  # a quorum extended: only time can refuse it
    elif extended + (n - extended - refused) < q:
        assert why is NotExtended.LOST  # not ours on a quorum, whatever the silent ones say
    else:
        assert why is NotExtended.UNREACHABLE


def test_an_extend_answered_after_the_lease_bound_is_too_slow() -> None:
    results: list[NodeReply] = [True, True, True]
    assert decide_extend(results, ttl=10.0, started=0.0, now=5.0, until=4.0) is None
    assert why_not_extended(results) is NotExtended.TOO_SLOW
    assert decide_extend(results, ttl=10.0, started=0.0, now=5.0, until=6.0) is not None
