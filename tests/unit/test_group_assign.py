"""``fencelock.group.assign``: rendezvous hashing, pure (no I/O)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import fencelock
from fencelock.group import Member, assign

names = st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=8, unique=True)
jobs = st.lists(st.integers(0, 10_000), max_size=200, unique=True)


@given(names, jobs)
def test_every_item_goes_to_exactly_one_member_in_its_order(
    members: list[str], items: list[int]
) -> None:
    shares = assign(items, members)
    assert sorted(shares) == sorted(members)
    given_out = [item for share in shares.values() for item in share]
    assert sorted(given_out) == sorted(items)
    for share in shares.values():
        assert share == [item for item in items if item in share]  # order kept


@given(names, jobs, st.data())
def test_a_member_that_leaves_moves_only_its_own_items(
    members: list[str], items: list[int], data: st.DataObject
) -> None:
    if len(members) < 2:
        return
    leaving = data.draw(st.sampled_from(members))
    before = assign(items, members)
    after = assign(items, [m for m in members if m != leaving])
    for member, share in after.items():
        assert set(before[member]) <= set(share)  # kept all it had
        assert set(share) - set(before[member]) <= set(before[leaving])  # gained only the leaver's


def test_the_split_is_the_same_everywhere_and_roughly_even() -> None:
    members = [Member(f"worker-{n}", None, n, None) for n in range(4)]
    items = [f"shard-{n}" for n in range(4000)]
    shares = assign(items, members)
    again = assign(list(reversed(items)), list(reversed(members)))  # another process's view
    assert {m: sorted(s) for m, s in shares.items()} == {m: sorted(s) for m, s in again.items()}
    assert all(800 < len(share) < 1200 for share in shares.values()), {
        m: len(s) for m, s in shares.items()
    }


def test_no_member_is_an_error_that_says_so() -> None:
    with pytest.raises(fencelock.ConfigError, match="at least one member"):
        assign([1, 2], [])
