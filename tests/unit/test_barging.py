"""Who may take a free lease while others wait (engine/barging.py): no I/O, no clock."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import given
from hypothesis import strategies as st

from fencelock.engine.barging import (
    STARVATION_BOUND,
    WAITER_LIVENESS,
    WAITER_REFRESH,
    Waiter,
    busy_wait,
    handoff,
    starvation_bound,
)

NOW = 1000.0

# A queue, oldest first: each waiter has waited 0..0.1 s and is alive for -1..+1 s more
# (expired when <= 0). Keys are the positions, so every key is unique.
queues = st.lists(st.tuples(st.floats(0, 0.1), st.floats(-1, 1)), max_size=8).map(
    lambda specs: [Waiter(i, NOW - waited, NOW + life) for i, (waited, life) in enumerate(specs)]
)
bounds = st.sampled_from([0.0, STARVATION_BOUND, 0.05])


def first_live(queue: list[Waiter[int]]) -> Waiter[int] | None:
    return next((w for w in queue if w.alive_until > NOW), None)


def askers(queue: list[Waiter[int]]) -> st.SearchStrategy[int | None]:
    """Someone not queued (None), or any waiter in the queue."""
    return st.one_of(st.none(), st.sampled_from([w.key for w in queue])) if queue else st.none()


@given(queues, bounds, st.data())
def test_the_expired_waiters_ahead_of_the_first_live_one_are_dropped(
    queue: list[Waiter[int]], bound: float, data: st.DataObject
) -> None:
    verdict = handoff(queue, data.draw(askers(queue)), NOW, bound)
    head = first_live(queue)
    ahead = queue if head is None else queue[: queue.index(head)]
    assert verdict.expired == tuple(w.key for w in ahead)
    assert all(w.alive_until <= NOW for w in ahead)
    assert verdict.kept_for in (None, head)


@given(queues, bounds)
def test_the_oldest_live_waiter_may_always_take(queue: list[Waiter[int]], bound: float) -> None:
    head = first_live(queue)
    if head is not None:
        assert handoff(queue, head.key, NOW, bound).may_take


@given(queues, st.data())
def test_fair_is_first_come_first_served(queue: list[Waiter[int]], data: st.DataObject) -> None:
    asker = data.draw(askers(queue))
    head = first_live(queue)
    verdict = handoff(queue, asker, NOW, starvation_bound(fair=True))
    assert verdict.may_take == (head is None or head.key == asker)


@given(queues, bounds, st.data())
def test_others_may_barge_in_until_the_oldest_waiter_has_waited_the_bound(
    queue: list[Waiter[int]], bound: float, data: st.DataObject
) -> None:
    asker = data.draw(askers(queue))
    head = first_live(queue)
    verdict = handoff(queue, asker, NOW, bound)
    if head is None:
        assert verdict.may_take
    elif head.key != asker:
        assert verdict.may_take == (NOW - head.arrived < bound)
        assert verdict.may_take or verdict.kept_for == head


@given(queues, bounds)
def test_the_queue_is_read_only_up_to_its_first_live_waiter(
    queue: list[Waiter[int]], bound: float
) -> None:
    """So a backend can hand it a database cursor."""
    head = first_live(queue)
    read: list[int] = []

    def cursor() -> Iterator[Waiter[int]]:
        for waiter in queue:
            read.append(waiter.key)
            yield waiter

    handoff(cursor(), None, NOW, bound)
    expected = queue if head is None else queue[: queue.index(head) + 1]
    assert read == [w.key for w in expected]


@given(st.one_of(st.none(), st.floats(-1, 100)))
def test_a_waiter_asks_again_before_its_liveness_runs_out(remaining: float | None) -> None:
    pause = busy_wait(remaining)
    assert 0 <= pause <= WAITER_REFRESH < WAITER_LIVENESS
    if remaining is not None and 0 <= remaining <= WAITER_REFRESH:
        assert pause == remaining  # woken when the holder's TTL runs out


# ---------------------------------------------------------------------- a whole lock


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[str, float, int]]:
    """Events (kind, seconds since the last one, which waiter) on one lock."""
    kinds = st.sampled_from(["arrive", "release", "wake"])
    return draw(st.lists(st.tuples(kinds, st.floats(0, 0.03), st.integers(0, 7)), max_size=60))


def simulate(history: list[tuple[str, float, int]], bound: float) -> list[tuple[int, bool]]:
    """A lock driven as the backends drive it: a newcomer asks unqueued, then queues and
    asks again; a release is followed by the releaser asking again at once (barging);
    a woken waiter asks again. Returns the grants: (who, was queued)."""
    now, holder, serial = 0.0, None, 0
    queue: dict[int, Waiter[int]] = {}
    grants: list[tuple[int, bool, float, Waiter[int] | None]] = []

    def ask(who: int, queued: bool) -> bool:
        nonlocal holder
        head = next(iter(queue.values()), None)
        if holder is None and handoff(queue.values(), who if queued else None, now, bound).may_take:
            holder = who
            grants.append((who, queued, now, head))
            queue.pop(who, None)
            return True
        return False

    def arrive(who: int) -> None:
        if not ask(who, queued=False):
            queue.setdefault(who, Waiter(who, now, float("inf")))
            ask(who, queued=True)

    for kind, elapsed, pick in history:
        now += elapsed
        if kind == "arrive":
            serial += 1
            arrive(serial)
        elif kind == "release" and holder is not None:
            holder = None
            serial += 1
            arrive(serial)  # the releaser asks again at once, as a new attempt
        elif kind == "wake" and queue:
            ask(list(queue)[pick % len(queue)], queued=True)
    _check(grants, bound)
    return [(who, queued) for who, queued, _at, _head in grants]


def _check(grants: list[tuple[int, bool, float, Waiter[int] | None]], bound: float) -> None:
    for who, _queued, at, head in grants:
        if head is not None and at - head.arrived >= bound:
            assert who == head.key, f"{who} took the lease from {head.key}, starving"


@given(histories())
def test_a_fair_lock_grants_in_arrival_order(history: list[tuple[str, float, int]]) -> None:
    grants = simulate(history, starvation_bound(fair=True))
    queued = [who for who, was_queued in grants if was_queued]
    assert queued == sorted(queued), "a waiter overtook one that queued before it"


@given(histories())
def test_an_unfair_lock_never_passes_over_a_starving_waiter(
    history: list[tuple[str, float, int]],
) -> None:
    simulate(history, STARVATION_BOUND)  # _check asserts it at every grant
