"""The ZooKeeper lock queue's rules, without a server: names, order, who is next."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from fencelock.backends.base import Share
from fencelock.backends.zookeeper import at_least
from fencelock.backends.zookeeper import queue as queues

owners = st.text("0123456789abcdef", min_size=1, max_size=40)


def child(owner: str, sequence: int, kind: str = "lock") -> str:
    return f"{owner}__{kind}__{sequence:010d}"


@given(st.lists(st.tuples(owners, st.integers(0, 10**9)), min_size=1, unique_by=lambda t: t[1]))
def test_the_line_is_by_sequence_whatever_the_owners_and_the_listing_order(
    entries: list[tuple[str, int]],
) -> None:
    children = [child(owner, seq) for owner, seq in entries]
    random.shuffle(children)
    ordered = queues.contenders(children)
    assert [c.sequence for c in ordered] == sorted(seq for _, seq in entries)
    assert {(c.owner, c.sequence) for c in ordered} == set(entries)


@given(st.lists(st.integers(0, 10**9), min_size=1, unique=True), st.data())
def test_each_contender_waits_behind_exactly_the_ones_before_it(
    sequences: list[int], data: st.DataObject
) -> None:
    children = [child(f"o{i}", seq) for i, seq in enumerate(sequences)]
    mine = data.draw(st.sampled_from(children))
    ahead = queues.ahead_of(children, mine)
    assert ahead is not None
    my_seq = int(mine[-10:])
    assert [c.sequence for c in ahead] == sorted(s for s in sequences if s < my_seq)


def test_a_gone_node_is_told_apart_from_the_holder() -> None:
    children = [child("a", 1), child("b", 2)]
    assert queues.ahead_of(children, child("a", 1)) == []  # holds the lock
    assert queues.ahead_of(children, child("c", 3)) is None  # not in the line at all


def test_longer_names_queues_and_kazoo_read_locks() -> None:
    children = ["orders", "x__lock__12", child("k", 5, "rlock"), child("f", 7)]
    assert [c.node for c in queues.contenders(children)] == [child("k", 5, "rlock"), child("f", 7)]
    assert queues.contender("orders") is None  # the queue node of NAME/orders


def test_our_own_node_is_found_by_its_owner_after_a_lost_reply() -> None:
    owner = "ab" * 20
    children = [child("cd" * 20, 1), child(owner, 2)]
    assert queues.mine_among(children, owner) == child(owner, 2)
    assert queues.mine_among(children, "ef" * 20) is None


@given(st.floats(0.001, 1e6, allow_nan=False))
def test_the_recorded_session_timeout_reads_back(timeout: float) -> None:
    assert queues.recorded_timeout(queues.node_data("ab" * 20, timeout)) == float(f"{timeout:g}")


def test_a_kazoo_contenders_data_records_no_timeout() -> None:
    assert queues.recorded_timeout(b"kazoo-worker") is None
    assert queues.recorded_timeout(b"") is None
    assert queues.recorded_timeout(b"owner nan") is None


kinds = st.lists(st.sampled_from(["read", "write"]), min_size=1, max_size=30)


def shared_line(entries: list[str], permits: int = 1) -> list[queues.Contender]:
    share = {"read": Share("read"), "write": Share("write"), "permit": Share("permit", permits)}
    children = [
        f"{queues.node_prefix(f'o{i}', share[kind])}{i:010d}" for i, kind in enumerate(entries)
    ]
    random.shuffle(children)
    return queues.contenders(children)


@given(kinds)
def test_a_read_write_line_admits_the_readers_before_the_first_writer_or_that_writer_alone(
    entries: list[str],
) -> None:
    holding = queues.holders(shared_line(entries))
    first_writer = entries.index("write") if "write" in entries else len(entries)
    if first_writer == 0:
        assert [h.kind for h in holding] == ["lock"]  # the writer, alone
    else:
        assert [h.sequence for h in holding] == list(range(first_writer))
        assert all(h.kind == "read" for h in holding)


@given(kinds, st.data())
def test_no_reader_behind_a_waiting_writer_ever_holds(
    entries: list[str], data: st.DataObject
) -> None:
    """Writers are not starved: once a writer is in line, later readers wait for it."""
    ordered = shared_line(entries)
    holding = {h.sequence for h in queues.holders(ordered)}
    for i, kind in enumerate(entries):
        if kind == "write" and i not in holding:
            assert not any(j in holding for j in range(i + 1, len(entries)))


@given(st.integers(1, 6), st.integers(1, 20))
def test_a_semaphore_line_admits_its_first_n_permits(permits: int, contenders: int) -> None:
    ordered = shared_line(["permit"] * contenders, permits)
    assert [h.sequence for h in queues.holders(ordered)] == list(range(min(permits, contenders)))
    for index in range(len(ordered)):
        waits = queues.blockers(ordered[:index], "permit", permits)
        assert bool(waits) == (index >= permits)
    assert queues.permits_in_use(ordered, permits) is None
    assert queues.permits_in_use(ordered, permits + 1) == permits


@given(owners, st.sampled_from([Share("read"), Share("write"), Share("permit", 7), None]))
def test_an_entry_is_read_back_as_what_it_was_created_as(owner: str, share: Share | None) -> None:
    entry = queues.contender(f"{queues.node_prefix(owner, share)}0000000042")
    assert entry is not None
    assert entry.owner == owner
    assert entry.sequence == 42
    expected = {None: "lock", "write": "lock", "read": "read", "permit": "permit"}
    assert entry.kind == expected[None if share is None else share.kind]
    assert entry.permits == (7 if entry.kind == "permit" else 1)


def test_a_listed_part_leads_back_to_its_line() -> None:
    reader = queues.contender(f"{queues.node_prefix('a', Share('read'))}0000000003")
    permit = queues.contender(f"{queues.node_prefix('b', Share('permit', 2))}0000000004")
    assert reader is not None
    assert permit is not None
    assert queues.part_name("x.rw", reader) == "x.rw/r/3"
    assert queues.part_name("y.sem", permit) == "y.sem/p/2/4"
    assert queues.queue_of_part("x.rw/r/3") == "x.rw"
    assert queues.queue_of_part("x.rw/gate") == "x.rw"
    assert queues.queue_of_part("y.sem/p/2/4") == "y.sem"
    assert queues.queue_of_part("plain/lock") == "plain/lock"


def test_a_keep_ends_by_the_servers_stamp_and_bad_marks_keep_nothing() -> None:
    kept = at_least.read_mark(at_least.mark_data("ab" * 20, 2.5), 1_000)
    assert kept is not None
    assert kept.owner == "ab" * 20
    assert kept.left(2_000) == 1.5  # 1 s after the stamp: 1.5 s of 2.5 left
    assert kept.left(3_500) == 0
    assert kept.left(10_000) < 0
    assert at_least.read_mark(b"owner soon", 1_000) is None
    assert at_least.read_mark(b"owner 0", 1_000) is None
    assert queues.contender(at_least.MARK) is None  # never taken for a contender
