"""Short sweeps reach the paths the review found never run: a re-entrant lock entered
again by its holder (nested 2 or 3 deep, left in order), and a renewal or an extend
interrupted in flight (a client's loop shut down with its request out), which the
default mix of faults has."""

from __future__ import annotations

import pytest

from fencelock.lease import LeaseBase
from fencelock.sim import Plan, run

CHEAP = ("lease", "session", "etcd")  # the families a short sweep runs quickly


def test_the_reentrant_workload_nests(monkeypatch: pytest.MonkeyPatch) -> None:
    entered, real = [0], LeaseBase._enter_again

    def counted(lease: LeaseBase) -> None:
        entered[0] += 1
        real(lease)

    monkeypatch.setattr(LeaseBase, "_enter_again", counted)
    for family in CHEAP:
        for seed in range(2):
            outcome = run(Plan(seed, family=family, workload="reentrant", duration=10.0))
            assert outcome.ok, f"{family} seed {seed}: {outcome.violation}\n" + "\n".join(
                outcome.trace
            )
    assert entered[0] >= 10  # a holder entered its lease again, again and again


@pytest.mark.parametrize("workload", ["lock", "reentrant"])
def test_a_request_interrupted_in_flight_is_reached(
    monkeypatch: pytest.MonkeyPatch, workload: str
) -> None:
    interrupted, real = [0], LeaseBase._unanswered

    def counted(lease: LeaseBase, started: float, ttl: float, why: str) -> None:
        interrupted[0] += why == "renewal interrupted"
        real(lease, started, ttl, why)

    monkeypatch.setattr(LeaseBase, "_unanswered", counted)
    for family in CHEAP:
        for seed in range(2):
            plan = Plan(seed, family=family, workload=workload, duration=10.0)
            outcome = run(plan)
            assert outcome.ok, f"{family} seed {seed}: {outcome.violation}\n" + "\n".join(
                outcome.trace
            )
    assert interrupted[0] >= 1


def test_cancels_are_decided_by_the_seed_and_can_be_left_out() -> None:
    plan = Plan(3, family="lease", workload="lock", duration=10.0)
    assert plan.cancels  # in the default mix
    first, again = run(plan), run(plan)
    assert (first.digest, first.steps) == (again.digest, again.steps)
    without = run(Plan(3, family="lease", workload="lock", duration=10.0, cancels=False))
    assert without.digest != first.digest
    cancelling = [line for line in without.trace if "cancelled" in line or "shuts down" in line]
    assert not [line for line in cancelling if "nemesis" in line]
