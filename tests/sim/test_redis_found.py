"""The Redis backend's double grant (fixed in 1631548), put back by the simulator as a
patch of the code under test (``--bug redis-reused-owner``: ``UndoTracker.before_try``
keeps the attempt's owner for every try) and found by it on the real backend.

A waiter's try goes unanswered (a message lost, a client or the server paused past the
call's timeout), a later try of the same attempt is granted, and the attempt's undo of
the unanswered try, sent once the server answers again, names the owner the grant has:
it deletes the grant, which the client goes on trusting, and the next waiter takes it.
The simulator tells it as the grant ends on the server, before its time, by no release
of its own (before the client's trust in it outlives the grant).
"""

from __future__ import annotations

import pytest

from fencelock.sim import Plan, run
from fencelock.sim.bugs import KNOWN, REDIS_REUSED_OWNER
from fencelock.sim.network import NetworkConditions

CALM = NetworkConditions(slow=0.0, drop=0.0, duplicate=0.0)  # no message lost or late: pauses only


def test_the_switch_is_registered_beside_the_librarys_own() -> None:
    assert REDIS_REUSED_OWNER in KNOWN
    with pytest.raises(Exception, match="no such historical bug"):
        Plan(seed=0, family="redis", bugs=("redis-reused-owner-typo",))


@pytest.mark.parametrize(
    ("seed", "conditions"),
    [
        (0, NetworkConditions()),  # found in the first run
        (0, CALM),  # no message lost or late: a try held up by the server's pause
    ],
)
def test_the_reused_owner_is_found_and_the_fix_holds(
    seed: int, conditions: NetworkConditions
) -> None:
    plan = Plan(seed=seed, family="redis", conditions=conditions)
    broken = run(Plan(seed=seed, family="redis", conditions=conditions, bugs=(REDIS_REUSED_OWNER,)))
    assert not broken.ok
    assert "by no release of its own" in (broken.violation or ""), broken.violation
    fixed = run(plan)
    assert fixed.ok, f"{fixed.violation}\n" + "\n".join(fixed.trace)
