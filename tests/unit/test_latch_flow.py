"""The latch's flows against a model server, interleaved as hypothesis likes: counts
go down one per successful count_down, the latch opens exactly when the last goes, and
a waiter is released only then."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fencelock.engine.latch import (
    ARM_SLICE,
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
    validate_count,
    wait_flow,
)
from fencelock.engine.operations import AwaitRelease, Holding, ListHeld
from fencelock.errors import ConfigError

NAMES = LatchNames("jobs")


def _answer(op: Op, held: dict[str, bool]) -> Reply | None:
    """The model server's reply to ``op`` (``held``: name -> left to last); None: the
    op waits (a held name)."""
    if isinstance(op, ListHeld):
        names = sorted(n for n in held if n.startswith(op.prefix))
        return Reply(0.0, held=tuple(Holding(n, None) for n in names))
    if isinstance(op, Held):
        return Reply(0.0, granted=op.name in held, lasting=held.get(op.name, False))
    if isinstance(op, Evict):
        granted = op.name in held
        held.pop(op.name, None)
        return Reply(0.0, granted=granted)
    if isinstance(op, Take):
        if op.name in held:
            return Reply(0.0, granted=False)
        held[op.name] = False
        return Reply(0.0)
    if isinstance(op, Leave):
        if op.name in held:
            held[op.name] = True
        return Reply(0.0)
    assert isinstance(op, AwaitRelease)
    return None if op.name in held else Reply(0.0)


def _finish(flow: LatchFlow, held: dict[str, bool]) -> bool:
    reply: Reply | None = None
    try:
        while True:
            op = flow.send(reply) if reply is not None else next(flow)
            reply = _answer(op, held)
            assert reply is not None
    except StopIteration as done:
        result: bool = done.value
        return result


def _crash_after(flow: LatchFlow, steps: int, held: dict[str, bool]) -> None:
    """Run ``flow`` for ``steps`` server replies, then its process dies: what it took
    briefly runs out (its TTL), what it left to last stays."""
    op = next(flow)
    for _ in range(steps):
        reply = _answer(op, held)
        assert reply is not None
        try:
            op = flow.send(reply)
        except StopIteration:
            break
    for name in [n for n, lasting in held.items() if not lasting]:
        del held[name]


def _consistent(held: dict[str, bool]) -> bool:
    counts = [n for n in held if n.startswith(NAMES.counts)]
    armed = held.get(NAMES.closed, False) and bool(counts)
    opened = NAMES.closed not in held and not counts
    return armed or opened


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4), st.integers(0, 3), st.integers(0, 30), st.sampled_from(["down", "set"]))
def test_a_crash_at_any_step_leaves_a_latch_the_next_call_can_use(
    count: int, downs: int, crash_at: int, crashing: str
) -> None:
    held: dict[str, bool] = {}
    assert _finish(set_count_flow(NAMES, count), held)
    for _ in range(downs):
        _finish(count_down_flow(NAMES), held)
    flow = count_down_flow(NAMES) if crashing == "down" else set_count_flow(NAMES, count)
    _crash_after(flow, crash_at, held)
    # whatever the next call is, it sees (and leaves) an armed latch or an open one
    for next_call in (count_down_flow(NAMES), set_count_flow(NAMES, 2)):
        state = dict(held)
        _finish(next_call, state)
        assert _consistent(state), state
    _finish(count_down_flow(NAMES), held)
    assert _consistent(held), held


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 6), st.integers(0, 9), st.lists(st.integers(0, 20), max_size=200))
def test_counts_go_down_once_each_and_the_last_opens(
    count: int, downs: int, choices: list[int]
) -> None:
    held: dict[str, bool] = {}
    assert _finish(set_count_flow(NAMES, count), held)
    assert not _finish(set_count_flow(NAMES, count + 1), held)  # counting already
    flows: list[LatchFlow] = [count_down_flow(NAMES) for _ in range(downs)]
    pending: dict[int, Op] = {i: next(f) for i, f in enumerate(flows)}
    results: list[bool] = []
    waiter = wait_flow(NAMES, None, 0.0)
    waiter_op: Op | None = next(waiter)
    opened_at: int | None = None
    for step, choice in enumerate([*choices, *([0] * 100)]):
        if pending:
            i = sorted(pending)[choice % len(pending)]
            reply = _answer(pending[i], held)
            assert reply is not None
            try:
                pending[i] = flows[i].send(reply)
            except StopIteration as done:
                results.append(done.value)
                del pending[i]
        if waiter_op is not None:
            reply = _answer(waiter_op, held)
            if reply is not None:
                try:
                    waiter_op = waiter.send(reply)
                except StopIteration as done:
                    waiter_op, opened_at, woke = None, step, done.value
                if waiter_op is None:  # the wait ended
                    assert woke is True
                    assert not any(n.startswith(NAMES.counts) for n in held), "woken early"
    assert results.count(True) == min(downs, count)
    left = count - min(downs, count)
    assert len([n for n in held if n.startswith(NAMES.counts)]) == left
    assert (NAMES.closed in held) == (left > 0)
    assert (opened_at is not None) == (left == 0)


@pytest.mark.parametrize("bad", [0, -3, 1.5, True, 10_001])
def test_counts_must_be_whole_and_positive(bad: object) -> None:
    with pytest.raises(ConfigError, match="count"):
        validate_count(bad)
    assert validate_count(7) == 7


def test_arming_while_another_arms_gives_up_once_it_has_armed() -> None:
    """Two arm at once: the second finds ``closed`` held briefly, looks again after a
    slice of its wait, sees the latch counting and says False, not after all of it."""
    held: dict[str, bool] = {NAMES.closed: False}  # the first is arming
    flow = set_count_flow(NAMES, 2)
    op = next(flow)
    waited = 0.0
    try:
        while True:
            if isinstance(op, Take) and op.name == NAMES.closed:
                assert op.timeout == ARM_SLICE
                waited += op.timeout
                # meanwhile the first finished arming: closed left to last, two counts
                held.update({NAMES.closed: True, NAMES.count(0): True, NAMES.count(1): True})
                reply = Reply(0.0, granted=False)
            else:
                answered = _answer(op, held)
                assert answered is not None
                reply = answered
            op = flow.send(reply)
    except StopIteration as done:
        armed = done.value
    assert armed is False
    assert waited == ARM_SLICE  # one slice, not ARM_WAIT
