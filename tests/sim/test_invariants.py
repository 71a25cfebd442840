"""The simulator's invariants on release semantics, a read-write lock's tokens, an
election's announcements and the fencing guards (:mod:`fencelock.sim.invariants`): each
tells a broken history from a sound one, and each is broken in a run by a variant put
back (:mod:`fencelock.sim.bugs`) within a few seeds, while the same seed runs clean
without it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fencelock.errors import StaleToken
from fencelock.fencing import FencingGuard, MemoryGuard, SQLiteGuard
from fencelock.sim import Plan, run
from fencelock.sim.bugs import (
    ELECTION_DEPOSED_EVICTS,
    ELECTION_EVICTS_FIRST,
    FENCE_EQUAL_WAVES_ALL,
    REDIS_RELEASE_UNCHECKED,
    RWLOCK_OWN_LEASE_TOKEN,
)
from fencelock.sim.invariants import (
    Campaigner,
    Fences,
    Hold,
    Releases,
    RWHolds,
    Terms,
    Write,
)

# --- releases -------------------------------------------------------------------------


def test_a_release_is_done_only_for_a_lease_the_server_granted_as_it_went_out() -> None:
    releases = Releases()
    held = releases.sent(1, "n", "owner-a", 10.0, granted=True)
    assert releases.answered(held, True, lost_before=False, still_granted=False) is None
    gone = releases.sent(1, "n", "owner-b", 11.0, granted=False)
    wrong = releases.answered(gone, True, lost_before=False, still_granted=False)
    assert wrong is not None
    assert "no longer granted that lease when it was sent" in wrong
    # its client knew the lease lost: the release says so (LeaseLost) whatever the server did
    assert releases.answered(gone, True, lost_before=True, still_granted=False) is None
    assert releases.answered(gone, False, lost_before=False, still_granted=False) is None


def test_after_a_release_is_done_the_server_grants_its_owner_no_more() -> None:
    releases = Releases()
    out = releases.sent(2, "n", "owner-a", 10.0, granted=True)
    wrong = releases.answered(out, True, lost_before=False, still_granted=True)
    assert wrong is not None
    assert "still grants that owner the name" in wrong


def test_a_lease_ended_before_its_time_by_no_release_of_its_own_is_told() -> None:
    releases = Releases()
    releases.sent(1, "n", "owner-a", 10.0, granted=False)  # a late release, then B took it
    wrong = releases.ended(2, "n", "owner-b", 7, until=12.0, now=11.0)
    assert wrong is not None
    assert "by no release of its own" in wrong
    assert "client 1's" in wrong
    assert releases.ended(2, "n", "owner-b", 7, until=11.0, now=11.0) is None  # its time
    releases.sent(2, "n", "owner-b", 11.0, granted=True)  # its own release (or an eviction)
    assert releases.ended(2, "n", "owner-b", 7, until=12.0, now=11.5) is None


# --- read-write locks -----------------------------------------------------------------


def test_a_writer_token_below_an_earlier_readers_is_told() -> None:
    holds = RWHolds()
    assert holds.granted("rw", Hold(1, "read", 50), asked=0.0, now=1.0) is None
    assert holds.granted("rw", Hold(2, "read", 40), asked=0.5, now=1.5) is None  # readers
    wrong = holds.granted("rw", Hold(3, "write", 45), asked=0.2, now=2.0)
    assert wrong is not None
    assert "not above 50" in wrong
    assert holds.granted("rw", Hold(4, "write", 60), asked=2.0, now=3.0) is None
    # lost as it came (or a fault's victim): counted, not checked
    assert holds.granted("rw", Hold(5, "write", 10), asked=2.5, now=3.5, checked=False) is None
    # a store that lost its data counts again: grants asked before are no measure
    assert holds.granted("rw", Hold(6, "write", 3), asked=4.0, now=4.5, since=3.8) is None


def test_no_reader_is_trusted_beside_a_writer() -> None:
    assert RWHolds.trusted([Hold(1, "read", 5), Hold(2, "read", 6)]) is None
    assert RWHolds.trusted([Hold(1, "write", 7)]) is None
    wrong = RWHolds.trusted([Hold(1, "read", 5), Hold(2, "write", 7)])
    assert wrong is not None
    assert "a writer trusted beside another hold" in wrong


holds = st.lists(st.tuples(st.sampled_from(["read", "write"]), st.integers(1, 5)), max_size=30)


@given(holds, st.data())
def test_tokens_issued_in_order_never_break_the_writers_rule(
    sequence: list[tuple[str, int]], data: st.DataObject
) -> None:
    """Holds granted one after another with growing tokens (the gate's counter) are
    sound; a writer given a token at or below an earlier hold's is told."""
    ledger, token = RWHolds(), 0
    for step, (mode, gap) in enumerate(sequence):
        token += gap
        assert ledger.granted("rw", Hold(step, mode, token), step, step + 0.5) is None
    if token:
        stale = data.draw(st.integers(0, token))
        wrong = ledger.granted("rw", Hold(99, "write", stale), 100.0, 100.5)
        assert wrong is not None
        assert "write hold" in wrong


# --- elections ------------------------------------------------------------------------


def _leader(client: int, **state: bool) -> Campaigner:
    standing = {"trusts": True, "leads": True, "announced": True, "trusts_announcement": True}
    return Campaigner(client=client, term=10 + client, **{**standing, **state})


def test_a_leader_holds_its_term_and_its_announcement_on_the_server() -> None:
    assert Terms.standing([_leader(1)]) is None
    wrong = Terms.standing([_leader(1, leads=False)])
    assert wrong is not None
    assert "no longer grants it the leadership" in wrong
    wrong = Terms.standing([_leader(1, announced=False)])
    assert wrong is not None
    assert "trusts its announcement" in wrong
    assert Terms.standing([_leader(1, announced=False, struck=True)]) is None  # a fault
    assert Terms.standing([_leader(1, trusts=False, leads=False, announced=False)]) is None


def test_two_announced_leaders_trusting_their_terms_are_told() -> None:
    deposed = _leader(1, leads=False, struck=True)  # a forced release it has not heard of
    wrong = Terms.standing([deposed, _leader(2)])
    assert wrong is not None
    assert "two clients announced as leaders" in wrong
    # it announced after the fault (its campaign's last step, in the forced window)
    assert Terms.standing([_leader(1, leads=False, struck=True, struck_first=True)]) is None
    assert Terms.standing([_leader(1, trusts=False, leads=False), _leader(2)]) is None


def test_a_new_term_below_an_earlier_one_is_told() -> None:
    terms = Terms()
    assert terms.won("e", 1, 100, asked=0.0, now=1.0) is None
    wrong = terms.won("e", 2, 90, asked=0.5, now=2.0)
    assert wrong is not None
    assert "not above term 100" in wrong
    assert terms.won("e", 3, 80, asked=2.0, now=3.0, checked=False) is None


# --- fencing guards -------------------------------------------------------------------

writes = st.lists(st.tuples(st.integers(0, 6), st.booleans()), min_size=1, max_size=25)


@given(writes)
def test_the_guards_keep_the_rule(sequence: list[tuple[int, bool]]) -> None:
    """Every guard of fencelock.fencing, fed any writes, passes the ledger's checks."""
    sqlite = SQLiteGuard(":memory:")
    ledger = Fences()
    guards: dict[str, FencingGuard] = {"memory": MemoryGuard(), "sqlite": sqlite}
    try:
        for client, (token, allow_equal) in enumerate(sequence):
            write = Write(client, "k", token, allow_equal)
            for name, guard in guards.items():
                try:
                    guard.accept("k", token, allow_equal=allow_equal)
                except StaleToken:
                    accepted = False
                else:
                    accepted = True
                assert ledger.offered(name, write, accepted, guard.last("k")) is None
    finally:
        sqlite.close()


@given(writes)
def test_a_guard_that_takes_a_stale_token_is_told(sequence: list[tuple[int, bool]]) -> None:
    """A guard that accepts every write is told as soon as one is below (or, not
    allowed, equal to) one it accepted; only then."""
    ledger, last = Fences(), None
    for client, (token, allow_equal) in enumerate(sequence):
        stale = last is not None and (token < last or (token == last and not allow_equal))
        wrong = ledger.offered("lax", Write(client, "k", token, allow_equal), True, token)
        if stale:
            assert wrong is not None
            assert "accepted after token" in wrong
            return
        assert wrong is None
        last = token


def test_a_guard_refusing_a_newer_token_or_misreporting_is_told() -> None:
    ledger = Fences()
    assert ledger.offered("g", Write(1, "k", 5, False), True, 5) is None
    wrong = ledger.offered("g", Write(2, "k", 6, False), False, 5)
    assert wrong is not None
    assert "refused though the last accepted was 5" in wrong
    wrong = ledger.offered("g", Write(3, "k", 7, False), True, 6)
    assert wrong is not None
    assert "the guard's last token is 6" in wrong


# --- each broken in a run, by its variant put back ------------------------------------


@pytest.mark.parametrize(
    ("bug", "family", "workload", "seed", "shows"),
    [
        # a release that lands late ends the lease of the client that took the lock since
        (REDIS_RELEASE_UNCHECKED, "redis", "lock", 0, "by no release of its own"),
        # a waiting campaigner evicts the sitting leader's announcement
        (ELECTION_EVICTS_FIRST, "lease", "election", 0, "which the server no longer holds"),
        # a deposed leader's late write, with allow_equal, lands over its successor's
        (FENCE_EQUAL_WAVES_ALL, "lease", "fenced", 0, "memory guard: client"),
        # readers' and writers' tokens from different names' counters (Redlock's nodes
        # each on its own clock): a writer's below a reader's before it
        (RWLOCK_OWN_LEASE_TOKEN, "redlock-model", "rwlock", 8, "write hold"),
    ],
)
def test_each_new_invariant_fails_on_its_broken_variant(
    bug: str, family: str, workload: str, seed: int, shows: str
) -> None:
    broken = run(Plan(seed, bugs=(bug,), family=family, workload=workload))
    assert not broken.ok, broken.violation
    assert shows in (broken.violation or ""), broken.violation
    fixed = run(Plan(seed, family=family, workload=workload))
    assert fixed.ok, f"{fixed.violation}\n" + "\n".join(fixed.trace)


def test_a_deposed_campaigner_evicts_nobody() -> None:
    """Found by the announcement invariant (the real Redlock backend, seed 101): a
    campaigner deposed while it listed the announcements (its lease run out) evicted
    its successor's, which that leader went on trusting; now a campaign looks at its
    lease before each eviction and before it announces (LeaseLost if it is lost)."""
    plan = Plan(101, family="redlock", workload="election", duration=10.0)
    broken = run(
        Plan(
            101,
            family="redlock",
            workload="election",
            duration=10.0,
            bugs=(ELECTION_DEPOSED_EVICTS,),
        )
    )
    assert not broken.ok
    assert "which the server no longer holds" in (broken.violation or "")
    fixed = run(plan)
    assert fixed.ok, f"{fixed.violation}\n" + "\n".join(fixed.trace)
