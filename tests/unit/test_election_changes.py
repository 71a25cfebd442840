"""What an election observer tells, without I/O: each change once, and a new term not
told before its value has had a moment to be announced."""

from __future__ import annotations

from fencelock.primitives.election import Leader, _Changes


def leader(term: int, value: str | None) -> Leader:
    return Leader(term, value, "owner", 5.0)


def test_a_term_is_told_once_with_its_value_announced_a_moment_later() -> None:
    changes = _Changes(ttl=3.0)  # a grace of 1 s
    assert changes.news(None, 0.0)  # the first look is told at once
    assert not changes.news(None, 0.1)
    assert not changes.news(leader(1, None), 0.2)  # won, not announced yet: wait
    assert changes.news(leader(1, "node-x"), 0.3)  # announced: told, with its value
    assert not changes.news(leader(1, "node-x"), 0.4)
    assert changes.news(None, 0.5)  # resigned


def test_a_leader_that_announces_nothing_is_told_after_the_grace() -> None:
    changes = _Changes(ttl=0.3)  # a grace of 0.1 s
    assert changes.news(None, 0.0)
    assert not changes.news(leader(7, None), 1.0)
    assert not changes.news(leader(7, None), 1.05)
    assert changes.news(leader(7, None), 1.1)
    assert not changes.news(leader(7, None), 1.2)
    assert not changes.news(leader(8, None), 2.0)  # a new term: its own grace
    assert changes.news(leader(8, None), 2.2)


def test_an_observer_that_starts_under_a_leader_tells_it_at_once() -> None:
    assert _Changes(ttl=30.0).news(leader(3, None), 0.0)
