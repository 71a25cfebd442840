"""The multi-lock's acquire flow and order, without I/O (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fencelock.engine.multi import multi_acquire_flow, ordered
from fencelock.engine.operations import Blocked, Reply, Take
from fencelock.errors import ConfigError

names = st.lists(st.from_regex(r"[a-z]{1,3}(/[a-z0-9]{1,3})?", fullmatch=True), max_size=8)


@given(names.filter(bool), names.filter(bool))
def test_two_multi_locks_take_their_shared_names_in_the_same_order(
    first: list[str], second: list[str]
) -> None:
    a, b = ordered(first), ordered(reversed(second))
    shared = set(a) & set(b)
    assert [n for n in a if n in shared] == [n for n in b if n in shared]


@given(names.filter(bool))
def test_ordered_is_sorted_and_unique(given_names: list[str]) -> None:
    result = ordered(given_names + given_names[:1])
    assert list(result) == sorted(set(given_names))


def test_ordered_refuses_nothing_and_a_bare_string() -> None:
    with pytest.raises(ConfigError, match="at least one name"):
        ordered([])
    with pytest.raises(ConfigError, match="not one str"):
        ordered("orders/1")
    with pytest.raises(ConfigError, match="empty part"):
        ordered(["orders//1"])


def _run(
    names: tuple[str, ...], timeout: float | None, costs: list[float], granted: list[bool]
) -> tuple[list[Take], Blocked | None]:
    """Drive the flow with each take costing ``costs[i]`` seconds and granted or not."""
    flow, now = multi_acquire_flow(names, timeout, 100.0), 100.0
    asked: list[Take] = []
    reply: Reply | None = None
    try:
        while True:
            take = flow.send(reply) if reply is not None else next(flow)
            i = len(asked)
            asked.append(take)
            now += costs[i]
            reply = Reply(now, granted[i])
    except StopIteration as done:
        result: Blocked | None = done.value
        return asked, result


@given(
    st.integers(1, 6).flatmap(
        lambda n: st.tuples(
            st.lists(st.floats(0, 5), min_size=n, max_size=n),
            st.lists(st.booleans(), min_size=n, max_size=n),
            st.one_of(st.none(), st.floats(0, 20)),
        )
    )
)
def test_one_deadline_across_all_names(case: tuple[list[float], list[bool], float | None]) -> None:
    costs, granted, timeout = case
    names = tuple(f"n{i}" for i in range(len(costs)))
    asked, result = _run(names, timeout, costs, granted)
    first_refused = granted.index(False) if False in granted else None
    assert len(asked) == (len(names) if first_refused is None else first_refused + 1)
    assert [t.name for t in asked] == list(names[: len(asked)])
    spent = 0.0
    for take, cost in zip(asked, costs, strict=False):
        if timeout is None:
            assert take.timeout is None
        else:
            assert take.timeout == pytest.approx(max(0.0, timeout - spent))
        spent += cost
    if first_refused is None:
        assert result is None
    else:
        assert result is not None
        assert result.name == names[first_refused]
        assert result.waited == pytest.approx(sum(costs[: len(asked)]))
