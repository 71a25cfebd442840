"""The ZooKeeper lock queue's rules, without a server: names, order, who is next."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from fencelock.backends.zookeeper import queue as line

owners = st.text("0123456789abcdef", min_size=1, max_size=40)


def child(owner: str, sequence: int, kind: str = "lock") -> str:
    return f"{owner}__{kind}__{sequence:010d}"


@given(st.lists(st.tuples(owners, st.integers(0, 10**9)), min_size=1, unique_by=lambda t: t[1]))
def test_the_line_is_by_sequence_whatever_the_owners_and_the_listing_order(
    entries: list[tuple[str, int]],
) -> None:
    children = [child(owner, seq) for owner, seq in entries]
    random.shuffle(children)
    ordered = line.line(children)
    assert [c.sequence for c in ordered] == sorted(seq for _, seq in entries)
    assert {(c.owner, c.sequence) for c in ordered} == set(entries)


@given(st.lists(st.integers(0, 10**9), min_size=1, unique=True), st.data())
def test_each_contender_waits_behind_exactly_the_ones_before_it(
    sequences: list[int], data: st.DataObject
) -> None:
    children = [child(f"o{i}", seq) for i, seq in enumerate(sequences)]
    mine = data.draw(st.sampled_from(children))
    ahead = line.ahead_of(children, mine)
    assert ahead is not None
    my_seq = int(mine[-10:])
    assert [c.sequence for c in ahead] == sorted(s for s in sequences if s < my_seq)


def test_a_gone_node_is_told_apart_from_the_holder() -> None:
    children = [child("a", 1), child("b", 2)]
    assert line.ahead_of(children, child("a", 1)) == []  # holds the lock
    assert line.ahead_of(children, child("c", 3)) is None  # not in the line at all


def test_longer_names_queues_and_kazoo_read_locks() -> None:
    children = ["orders", "x__lock__12", child("k", 5, "rlock"), child("f", 7)]
    assert [c.node for c in line.line(children)] == [child("k", 5, "rlock"), child("f", 7)]
    assert line.contender("orders") is None  # the queue node of NAME/orders


def test_our_own_node_is_found_by_its_owner_after_a_lost_reply() -> None:
    owner = "ab" * 20
    children = [child("cd" * 20, 1), child(owner, 2)]
    assert line.mine_among(children, owner) == child(owner, 2)
    assert line.mine_among(children, "ef" * 20) is None


@given(st.floats(0.001, 1e6, allow_nan=False))
def test_the_recorded_session_timeout_reads_back(timeout: float) -> None:
    assert line.recorded_timeout(line.node_data("ab" * 20, timeout)) == float(f"{timeout:g}")


def test_a_kazoo_contenders_data_records_no_timeout() -> None:
    assert line.recorded_timeout(b"kazoo-worker") is None
    assert line.recorded_timeout(b"") is None
    assert line.recorded_timeout(b"owner nan") is None
