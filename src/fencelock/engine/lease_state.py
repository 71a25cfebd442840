"""Lease states and their transitions, as one table (h11 style).

HELD      the lease is ours and was renewed in time
AT_RISK   a renewal failed (server unreachable); still inside the safe time
LOST      the safe time passed, or the server says another owner has it, or its
          session ended (expired, revoked), or this is a forked child's copy of
          its parent's lease
RELEASED  we gave it back
"""

from __future__ import annotations

from enum import Enum


class LeaseState(Enum):
    HELD = "held"
    AT_RISK = "at risk"
    LOST = "lost"
    RELEASED = "released"


class LeaseEvent(Enum):
    RENEWED = "renewed"
    RENEW_FAILED = "renew failed"
    RENEW_REJECTED = "renew rejected"
    SAFE_TIME_PASSED = "safe time passed"
    RELEASED = "released"
    FORKED = "copied into a forked child"
    SESSION_ENDED = "its session ended"


_S, _E = LeaseState, LeaseEvent
_LIVE = {
    _E.RENEWED: _S.HELD,
    _E.RENEW_FAILED: _S.AT_RISK,
    _E.RENEW_REJECTED: _S.LOST,
    _E.SAFE_TIME_PASSED: _S.LOST,
    _E.RELEASED: _S.RELEASED,
    _E.FORKED: _S.LOST,
    _E.SESSION_ENDED: _S.LOST,
}
TRANSITIONS: dict[LeaseState, dict[LeaseEvent, LeaseState]] = {
    _S.HELD: _LIVE,
    _S.AT_RISK: _LIVE,
    # Terminal states absorb every event: a loss is never undone by a late renewal.
    _S.LOST: dict.fromkeys(_E, _S.LOST),
    _S.RELEASED: dict.fromkeys(_E, _S.RELEASED),
}


def transition(state: LeaseState, event: LeaseEvent) -> LeaseState:
    """The state after ``event`` happens in ``state``."""
    return TRANSITIONS[state][event]


def is_live(state: LeaseState) -> bool:
    return state in (LeaseState.HELD, LeaseState.AT_RISK)
