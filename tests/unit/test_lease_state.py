from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fencelock.engine.lease_state import TRANSITIONS, LeaseEvent, LeaseState, transition


def test_table_is_total() -> None:
    for state in LeaseState:
        assert set(TRANSITIONS[state]) == set(LeaseEvent)


@given(st.lists(st.sampled_from(LeaseEvent), max_size=40))
def test_lost_and_released_are_terminal(events: list[LeaseEvent]) -> None:
    state, seen_terminal = LeaseState.HELD, None
    for event in events:
        state = transition(state, event)
        if seen_terminal is not None:
            assert state is seen_terminal
        if state in (LeaseState.LOST, LeaseState.RELEASED):
            seen_terminal = state


def test_failed_renewal_puts_lease_at_risk_and_success_restores_it() -> None:
    state = transition(LeaseState.HELD, LeaseEvent.RENEW_FAILED)
    assert state is LeaseState.AT_RISK
    assert transition(state, LeaseEvent.RENEWED) is LeaseState.HELD
    assert transition(state, LeaseEvent.SAFE_TIME_PASSED) is LeaseState.LOST
