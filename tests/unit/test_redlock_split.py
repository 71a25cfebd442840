"""A split vote is not a held lock: rivals that divided the nodes retry soon.

When every busy node names its owner and no owner, even with every silent node,
reaches a quorum, nobody holds the lock: the rivals all give up and delete their
keys quietly, so waiting for those keys' TTL (or for a release) would stall.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fencelock.backends.redlock.round import phase_one_reply
from fencelock.engine.redlock import (
    Abort,
    AbortReason,
    NodeBusy,
    NodeError,
    NodeWon,
    PhaseOneResult,
    decide_phase_one,
    held_by_one,
    may_be_held,
    quorum,
    retry_after,
)

answers = st.one_of(
    st.builds(NodeWon, st.integers(0, 10**6)),
    st.builds(NodeBusy, st.floats(0, 100), st.sampled_from(["a", "b", "c"])),
    st.just(NodeError()),
)


@given(st.integers(3, 9).flatmap(lambda n: st.lists(answers, min_size=n, max_size=n)))
def test_only_a_possible_quorum_holder_is_waited_for(results: list[PhaseOneResult]) -> None:
    q = quorum(len(results))
    owners = [r.owner for r in results if isinstance(r, NodeBusy)]
    silent = sum(isinstance(r, NodeError) for r in results)
    held = any(owners.count(owner) + silent >= q for owner in owners) or silent >= q
    assert may_be_held(results) == held
    surely = any(owners.count(owner) >= q for owner in owners)
    assert held_by_one(results) == surely
    step = decide_phase_one(results, 10.0, 0.0, 0.001)
    if isinstance(step, Abort):
        assert step.retry_after == (retry_after(results) if held else None)
        if not held:
            assert step.reason is not AbortReason.BUSY


def test_two_rivals_and_us_split_five_nodes() -> None:
    split: list[PhaseOneResult] = [
        NodeWon(1), NodeWon(1), NodeBusy(9.0, "x"), NodeBusy(9.0, "x"), NodeBusy(9.0, "y"),
    ]  # fmt: skip
    step = decide_phase_one(split, 10.0, 0.0, 0.001)
    assert isinstance(step, Abort)
    assert step.reason is AbortReason.CONTENDED
    assert step.retry_after is None  # a random delay, not the rivals' 9 s
    held = [*split[:4], NodeBusy(9.0, "x")]
    step = decide_phase_one(held, 10.0, 0.0, 0.001)
    assert isinstance(step, Abort)
    assert step.reason is AbortReason.BUSY
    assert step.retry_after == 9.0
    unknown = [*split[:4], NodeBusy(9.0)]
    assert may_be_held(unknown)  # an owner not named may be x


def test_phase_one_names_the_owner_of_a_busy_node() -> None:
    assert phase_one_reply([0, 1500, b"ab12"], "w") == NodeBusy(1.5, "ab12")
    assert phase_one_reply([0, 1500], "w") == NodeBusy(1.5, None)
