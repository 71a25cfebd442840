"""Redlock's arithmetic and decisions, checked against their definitions."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fencelock.engine import redlock
from fencelock.engine.redlock import (
    Abort,
    AbortReason,
    Confirmed,
    NodeBusy,
    NodeError,
    NodeReply,
    NodeWon,
    PhaseOneResult,
    Stamp,
    decide_extend,
    decide_phase_one,
    decide_phase_two,
    quorum,
    validity,
)
from fencelock.engine.timing import clock_drift, trusted_until
from fencelock.errors import ConfigError

ttls = st.floats(0.01, 3600)
times = st.floats(0, 10**6)
elapsed = st.floats(0, 4000)
phase_one_result = st.one_of(
    st.builds(NodeWon, st.integers(0, 10**16)),
    st.builds(NodeBusy, st.one_of(st.none(), st.floats(0, 100))),
    st.builds(NodeError),
)
phase_one_results = st.integers(3, 9).flatmap(
    lambda n: st.lists(phase_one_result, min_size=n, max_size=n)
)
replies = st.one_of(st.booleans(), st.builds(NodeError))


@given(st.integers(1, 10**6))
def test_quorum_is_the_smallest_majority(n: int) -> None:
    q = quorum(n)
    assert 2 * q > n >= 2 * (q - 1)
    assert q <= n


@pytest.mark.parametrize("n", range(3, 8))
def test_any_two_quorums_share_a_node(n: int) -> None:
    quorums = [set(c) for c in itertools.combinations(range(n), quorum(n))]
    assert all(a & b for a, b in itertools.product(quorums, repeat=2))


@pytest.mark.parametrize("n", [-1, 0, 1, 2])
def test_fewer_than_three_nodes_is_a_config_error(n: int) -> None:
    with pytest.raises(ConfigError, match=f"at least 3 independent nodes, got {n}"):
        redlock.validate_node_count(n)


@pytest.mark.parametrize("n", [True, 3.0, "5", None])
def test_node_count_must_be_an_int(n: object) -> None:
    with pytest.raises(ConfigError, match="must be an int"):
        redlock.validate_node_count(n)


@given(st.integers(3, 1000))
def test_three_or_more_nodes_are_fine(n: int) -> None:
    assert redlock.validate_node_count(n) == n


def test_a_node_listed_twice_is_a_config_error() -> None:
    assert redlock.validate_nodes(["a:1", "b:1", "c:1"]) == ("a:1", "b:1", "c:1")
    with pytest.raises(ConfigError, match="'b:1' is listed twice"):
        redlock.validate_nodes(["a:1", "b:1", "c:1", "b:1"])
    with pytest.raises(ConfigError, match="at least 3"):
        redlock.validate_nodes(["a:1", "b:1"])


@given(ttls, times, elapsed)
def test_validity_is_ttl_minus_elapsed_minus_drift(ttl: float, started: float, e: float) -> None:
    now = started + e
    v = validity(ttl, started, now)
    assert v == pytest.approx(ttl - e - (ttl * 0.01 + 0.002), abs=1e-6)
    assert v == pytest.approx(trusted_until(started, ttl) - now, abs=1e-6)
    assert v < ttl


@given(ttls, times, elapsed, elapsed)
def test_validity_only_shrinks_as_time_passes(
    ttl: float, started: float, a: float, b: float
) -> None:
    early, late = sorted((started + a, started + b))
    assert validity(ttl, started, late) <= validity(ttl, started, early)


@given(ttls, times)
def test_a_fresh_lease_of_any_allowed_ttl_is_valid(ttl: float, started: float) -> None:
    assert validity(ttl, started, started) > 0


@given(ttls, times, elapsed, st.floats(0, 10))
def test_reply_timeout_never_outlasts_the_validity(
    ttl: float, started: float, e: float, cap: float
) -> None:
    timeout = redlock.reply_timeout(ttl, started=started, now=started + e, cap=cap)
    assert 0 <= timeout <= cap
    assert timeout <= max(validity(ttl, started, started + e), 0)


@given(st.lists(st.integers(0, 10**18), min_size=1))
def test_token_exceeds_every_counter_read(counters: list[int]) -> None:
    token = redlock.phase_two_token(counters)
    assert token == max(counters) + 1
    assert all(token > c for c in counters)


@given(phase_one_results, ttls, times, elapsed)
def test_phase_one_goes_on_exactly_with_a_quorum_in_time(
    results: list[PhaseOneResult], ttl: float, started: float, e: float
) -> None:
    n = len(results)
    won = [i for i, r in enumerate(results) if isinstance(r, NodeWon)]
    step = decide_phase_one(results, ttl, started, started + e)
    in_time = validity(ttl, started, started + e) > 0
    assert isinstance(step, Stamp) == (len(won) >= quorum(n) and in_time)
    if isinstance(step, Stamp):
        assert step.nodes == tuple(won)
        assert step.n == n
        assert step.token == 1 + max(r.counter for r in results if isinstance(r, NodeWon))
        assert (step.ttl, step.started) == (ttl, started)
    else:
        assert step.release == tuple(range(n)), "a node that timed out may hold our key"
        assert step.unreachable == tuple(
            i for i, r in enumerate(results) if isinstance(r, NodeError)
        )
        assert (step.reason is AbortReason.TOO_SLOW) == (len(won) >= quorum(n))


@given(phase_one_results)
def test_phase_one_reasons(results: list[PhaseOneResult]) -> None:
    n, q = len(results), quorum(len(results))
    count = {kind: sum(isinstance(r, kind) for r in results) for kind in (NodeWon, NodeBusy)}
    step = decide_phase_one(results, 10.0, 0.0, 0.0)
    if count[NodeWon] >= q:
        return
    assert isinstance(step, Abort)
    if count[NodeBusy] > n - q:
        assert step.reason is AbortReason.BUSY
    elif len(step.unreachable) > n - q:
        assert step.reason is AbortReason.UNREACHABLE
    else:
        assert step.reason is AbortReason.CONTENDED


@given(phase_one_results)
def test_retry_after_is_when_a_quorum_can_first_be_free(results: list[PhaseOneResult]) -> None:
    q = quorum(len(results))
    hint = redlock.retry_after(results)
    free = sum(not isinstance(r, NodeBusy) for r in results)
    ttls_left = [r.remaining for r in results if isinstance(r, NodeBusy)]
    if hint is None:
        assert free >= q or sum(t is not None for t in ttls_left) < q - free
        return
    assert hint >= 0
    assert free + sum(t is not None and t <= hint for t in ttls_left) >= q
    assert free + sum(t is not None and t < hint for t in ttls_left) < q


def test_retry_after_all_busy_is_the_quorum_th_smallest_ttl() -> None:
    results: list[PhaseOneResult] = [NodeBusy(t) for t in (5.0, 1.0, 4.0, 2.0, 3.0)]
    assert redlock.retry_after(results) == 3.0
    results[0] = NodeWon(7)
    assert redlock.retry_after(results) == 2.0
    results[1] = NodeBusy(None)
    assert redlock.retry_after(results) == 3.0


@given(st.floats(0, 1, exclude_max=True))
def test_retry_delay_stays_in_its_range(r: float) -> None:
    delay = redlock.retry_delay(lambda: r)
    assert redlock.RETRY_DELAY_MIN <= delay <= redlock.RETRY_DELAY_MAX


@given(phase_one_results, st.floats(0, 1, exclude_max=True))
def test_busy_result_uses_the_hint_else_a_random_delay(
    results: list[PhaseOneResult], r: float
) -> None:
    step = decide_phase_one(results, 10.0, 0.0, 0.0)
    if isinstance(step, Abort):
        busy = redlock.busy_result(step, lambda: r)
        assert busy.retry_after is not None
        if step.retry_after is None:
            assert busy.retry_after == redlock.retry_delay(lambda: r)
        else:
            assert busy.retry_after == step.retry_after


stamps = st.integers(3, 9).flatmap(
    lambda n: st.builds(
        Stamp,
        st.integers(1, 10**16),
        st.sets(st.integers(0, n - 1), min_size=quorum(n)).map(lambda s: tuple(sorted(s))),
        st.just(n),
        ttls,
        times,
    )
)


@given(stamps, st.dictionaries(st.integers(0, 8), replies), elapsed)
def test_phase_two_holds_exactly_with_a_quorum_stamped_in_time(
    stamp: Stamp, results: dict[int, NodeReply], e: float
) -> None:
    now = stamp.started + e
    done = decide_phase_two(stamp, results, now)
    stamped = [i for i in stamp.nodes if results.get(i) is True]
    in_time = validity(stamp.ttl, stamp.started, now) > 0
    assert isinstance(done, Confirmed) == (len(stamped) >= quorum(stamp.n) and in_time)
    if isinstance(done, Confirmed):
        assert done.token == stamp.token
        assert done.nodes == tuple(stamped)
        assert done.trusted_until == stamp.started + stamp.ttl - clock_drift(stamp.ttl)
    else:
        assert done.release == tuple(range(stamp.n))
        assert set(done.unreachable) <= set(stamp.nodes)


def test_phase_two_counts_only_the_nodes_whose_counters_were_read() -> None:
    stamp = Stamp(token=8, nodes=(0, 1, 2), n=5, ttl=10.0, started=0.0)
    assert isinstance(decide_phase_two(stamp, {0: True, 1: True, 2: True}, 0.1), Confirmed)
    outside = decide_phase_two(stamp, {0: True, 3: True, 4: True}, 0.1)
    assert isinstance(outside, Abort)
    assert outside.reason is AbortReason.UNREACHABLE
    lost = decide_phase_two(stamp, {0: True, 1: True, 2: False}, 0.1)
    assert isinstance(lost, Abort)
    assert lost.reason is AbortReason.LOST
    slow = decide_phase_two(stamp, {0: True, 1: True, 2: True}, 9.9)
    assert isinstance(slow, Abort)
    assert slow.reason is AbortReason.TOO_SLOW


@given(
    st.integers(3, 9).flatmap(lambda n: st.lists(replies, min_size=n, max_size=n)),
    ttls,
    times,
    elapsed,
    st.floats(-10, 4000),
)
def test_extend_holds_exactly_with_a_quorum_in_time(
    results: list[NodeReply], ttl: float, started: float, e: float, until_offset: float
) -> None:
    now, until = started + e, started + until_offset
    new = decide_extend(results, ttl=ttl, started=started, now=now, until=until)
    ok = sum(r is True for r in results) >= quorum(len(results))
    assert (new is not None) == (ok and now < until and validity(ttl, started, now) > 0)
    if new is not None:
        assert new == trusted_until(started, ttl)


@given(st.integers(3, 9).flatmap(lambda n: st.lists(replies, min_size=n, max_size=n)))
def test_release_is_confirmed_only_by_a_quorum_of_answers(results: list[NodeReply]) -> None:
    """Nodes that did not answer never make a release look like another owner's lease."""
    n, q = len(results), quorum(len(results))
    released = redlock.decide_release(results)
    had_it = sum(r is True for r in results)
    silent = sum(isinstance(r, NodeError) for r in results)
    if had_it >= q:
        assert released is True
    elif n - silent < q:
        assert released is None  # unconfirmed: the caller says which nodes, and raises
    else:  # False only if it was not ours even if every silent node had our key
        assert released is (had_it + silent >= q)
