"""The latch runs the simulator found opening before it was counted down to zero, kept
clean; and the flow and driver steps that had let them, one step at a time.

etcd, seed 231: an arming failed after leaving two counts for a year (its third
count's Leave unanswered), giving back its brief ``closed``; the arming waiting for
``closed`` took it, found every count held (the failed arming's), ignored that its
Takes were refused, and said True over counts that were not its own (one of them brief,
which ran out: two count-downs opened the latch).

Redlock (on its model of the nodes, now ``redlock-model``), seed 156: a repair listed a
dead arming's count and saw ``closed`` free; a new arming then repaired, took ``closed``
and the same count; the first repair's Evict, by name, ended the new arming's count
(left for a year by then), which still said True.
"""

from __future__ import annotations

import pytest

import fencelock
from fencelock.engine.latch import (
    Evict,
    Held,
    LatchFlow,
    LatchNames,
    Leave,
    Op,
    Reply,
    Take,
    count_down_flow,
    set_count_flow,
    wait_flow,
)
from fencelock.engine.operations import Holding, ListHeld
from fencelock.sim import Plan, run

NAMES = LatchNames("gate")


@pytest.mark.parametrize(("seed", "family"), [(231, "etcd"), (156, "redlock-model")])
def test_the_seeds_that_opened_a_latch_early_run_clean(seed: int, family: str) -> None:
    outcome = run(Plan(seed=seed, family=family, workload="latch"))
    assert outcome.ok, f"{outcome.violation}\n" + "\n".join(outcome.trace)


def _held(*owned: tuple[str, str]) -> Reply:
    return Reply(0.0, held=tuple(Holding(name, None, owner) for name, owner in owned))


def _step(flow: LatchFlow, reply: Reply) -> Op | bool:
    """The flow's next op after ``reply``, or what it returned."""
    try:
        return flow.send(reply)
    except StopIteration as done:
        result: bool = done.value
        return result


def _arm_until_closed_is_taken(flow: LatchFlow, counts: Reply) -> Op | bool:
    """Repair (``counts`` listed, ``closed`` held briefly by another arming), a slice's
    wait for ``closed`` in vain, then the repair again with ``closed`` free, and the take
    of ``closed``: the op after it."""
    assert next(flow) == ListHeld(NAMES.counts)
    assert flow.send(counts) == Held(NAMES.closed)
    assert flow.send(Reply(0.0, granted=True, owner="other-armer")) == Take(NAMES.closed, 0.1, 10.3)
    assert flow.send(Reply(0.0, granted=False)) == ListHeld(NAMES.counts)
    assert flow.send(counts) == Held(NAMES.closed)
    assert flow.send(Reply(0.0, granted=True, owner="other-armer")) == Take(NAMES.closed, 0.1, 10.3)
    return flow.send(Reply(0.0))  # ours at last: the other arming gave up and let it go


def test_an_arming_that_takes_closed_evicts_the_counts_a_failed_arming_left() -> None:
    """etcd seed 231, as the flow saw it: the counts were there when ``closed`` became
    ours; they are an arming's that lost its ``closed``, evicted by the owners listed."""
    flow = set_count_flow(NAMES, 3)
    stale = _held(*((NAMES.count(k), f"dead-{k}") for k in range(3)))
    assert _arm_until_closed_is_taken(flow, stale) == ListHeld(NAMES.counts)
    op = flow.send(stale)
    for k in range(3):
        assert op == Evict(NAMES.count(k), f"dead-{k}")
        op = flow.send(Reply(0.0))
    for k in range(3):
        assert op == Take(NAMES.count(k), 2.0, 10.0)
        assert flow.send(Reply(0.0)) == Leave(NAMES.count(k))
        op = flow.send(Reply(0.0))
    assert op == Leave(NAMES.closed)
    assert _step(flow, Reply(0.0)) is True


def test_an_arming_refused_a_count_says_false_and_never_leaves_closed() -> None:
    flow = set_count_flow(NAMES, 3)
    assert _arm_until_closed_is_taken(flow, _held()) == ListHeld(NAMES.counts)
    assert flow.send(_held()) == Take(NAMES.count(0), 2.0, 10.0)
    assert flow.send(Reply(0.0)) == Leave(NAMES.count(0))
    assert flow.send(Reply(0.0)) == Take(NAMES.count(1), 2.0, 10.0)
    # another arming, whose brief ``closed`` ran out under it, holds count 1
    assert _step(flow, Reply(0.0, granted=False)) is False


@pytest.mark.parametrize("flow", [count_down_flow, set_count_flow, wait_flow])
def test_a_repair_evicts_only_the_counts_it_listed(flow: object) -> None:
    """Redlock seed 156: counts listed, then ``closed`` seen free; by the time of the
    eviction a new arming may hold the same name: only the owner listed is ended."""
    started: LatchFlow = (
        count_down_flow(NAMES)
        if flow is count_down_flow
        else set_count_flow(NAMES, 3)
        if flow is set_count_flow
        else wait_flow(NAMES, 1.0, 0.0)
    )
    assert next(started) == ListHeld(NAMES.counts)
    listed = _held((NAMES.count(0), "dead-0"), (NAMES.count(2), "dead-2"))
    assert started.send(listed) == Held(NAMES.closed)
    assert started.send(Reply(0.0, granted=False)) == Evict(NAMES.count(0), "dead-0")
    assert started.send(Reply(0.0, granted=False)) == Evict(NAMES.count(2), "dead-2")


def test_closed_is_evicted_only_as_the_holder_it_was_seen_held_by() -> None:
    """A count-down that took the last count ends the ``closed`` it read, not one a
    later arming may hold by then; so does a repair of a count-down that died."""
    flow = count_down_flow(NAMES)
    assert next(flow) == ListHeld(NAMES.counts)
    assert flow.send(_held((NAMES.count(1), "armer-1"))) == Held(NAMES.closed)
    armed = Reply(0.0, granted=True, lasting=True, owner="armer-closed")
    assert flow.send(armed) == Evict(NAMES.count(1), None)
    assert flow.send(Reply(0.0)) == ListHeld(NAMES.counts)
    assert flow.send(_held()) == Evict(NAMES.closed, "armer-closed")
    assert _step(flow, Reply(0.0)) is True

    repair = wait_flow(NAMES, 1.0, 0.0)
    assert next(repair) == ListHeld(NAMES.counts)
    assert repair.send(_held()) == Held(NAMES.closed)
    assert repair.send(armed) == ListHeld(NAMES.counts)
    assert repair.send(_held()) == Evict(NAMES.closed, "armer-closed")


def test_the_driver_evicts_an_owner_it_was_told_and_no_other() -> None:
    with fencelock.connect("memory://latch-found") as client:
        latch = client.latch("gate")
        lease = client.lock(NAMES.count(0), ttl=30, renew=False).acquire(0)
        taken: dict[str, fencelock.Lease] = {}
        assert not latch._do(Evict(NAMES.count(0), "someone-else"), taken).granted
        assert client.locked(NAMES.count(0))
        assert latch._do(Evict(NAMES.count(0), lease.owner), taken).granted
        assert not client.locked(NAMES.count(0))


def test_the_driver_gives_back_a_count_whose_leave_failed() -> None:
    """A Leave that raised leaves the lease among those given back when the call ends
    (before, it was dropped first: a count left on its brief TTL, or for a year)."""
    with fencelock.connect("memory://latch-found-leave") as client:
        latch = client.latch("gate")
        taken: dict[str, fencelock.Lease] = {}
        assert latch._do(Take(NAMES.count(0), 0.0, 10.0), taken).granted
        lease = taken[NAMES.count(0)]
        client.evict(NAMES.count(0))  # lost: the Leave's extend fails
        with pytest.raises(fencelock.LeaseLost):
            latch._do(Leave(NAMES.count(0)), taken)
        assert taken == {NAMES.count(0): lease}


def test_the_stale_count_list_bug_put_back_is_still_found() -> None:
    """The arming's new look at the counts changed every latch run's steps: seed 96,
    which held ``latch-stale-count-list`` (tests/sim/test_simulation.py), no longer
    shows it; seed 8 does, and runs clean without it."""
    plan = Plan(seed=8, family="lease", workload="latch")
    broken = run(Plan(seed=8, family="lease", workload="latch", bugs=("latch-stale-count-list",)))
    assert not broken.ok
    assert "wait passed a latch" in (broken.violation or "")
    assert run(plan).ok
