"""The deterministic simulator: the real asyncio client against each model family (TTL
leases, sessions, Redlock's independent nodes) over a faulty network, in virtual time.
No run breaks an invariant; a run is decided by its seed alone; each historical bug put
back is found where it can show; the bugs the simulator found itself stay fixed."""

from __future__ import annotations

import asyncio
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fencelock.engine.reintroduced import KNOWN
from fencelock.errors import ConfigError
from fencelock.sim import Plan, run
from fencelock.sim.loop import Stalled, VirtualClock, VirtualLoop
from fencelock.sim.model import Granted, LeaseStore, Taken

SWEEP_CPU = 1.5  # seconds of CPU each family's sweep below may use (5-40 runs)
FAMILIES = ("lease", "session", "redlock")
# Where each put-back bug can show: a session's timeout does not shrink with an extend.
SHOWS_ON = {
    "trust-from-reply": FAMILIES,
    "no-trust-at-send": ("lease", "redlock"),
    "extend-renewal-race": ("lease", "redlock"),
    # a store that grants its holder's try again: found only after about 40 s of CPU,
    # so held here by the seed that found it (below), not searched for
    "late-try-forgotten": (),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_a_sweep_of_seeds_breaks_no_invariant(family: str) -> None:
    began, seed, steps = time.process_time(), 0, 0
    while time.process_time() - began < SWEEP_CPU:
        outcome = run(Plan(seed=seed, family=family))
        assert outcome.ok, f"seed {seed}: {outcome.violation}\n" + "\n".join(outcome.trace)
        assert outcome.grants > 5  # the clients did take the lock, again and again
        seed, steps = seed + 1, steps + outcome.steps
    assert seed >= 3 and steps > 10_000


@pytest.mark.parametrize("family", ("lease", "session"))
def test_a_semaphore_never_lets_more_holders_in_than_it_has_permits(family: str) -> None:
    """Its own invariant (at most 2 of its permits trusted at once) and every lock's,
    for each slot and its gate, under the same faults."""
    began, seed = time.process_time(), 0
    while time.process_time() - began < SWEEP_CPU / 2:
        outcome = run(Plan(seed=seed, family=family, workload="semaphore"))
        assert outcome.ok, f"seed {seed}: {outcome.violation}\n" + "\n".join(outcome.trace)
        assert outcome.grants > 5
        seed += 1
    assert seed >= 2


@pytest.mark.parametrize("family", FAMILIES)
def test_a_run_is_decided_by_its_seed(family: str) -> None:
    first, again = run(Plan(seed=7, family=family)), run(Plan(seed=7, family=family))
    other = run(Plan(seed=8, family=family))
    assert (first.digest, first.steps, first.grants) == (again.digest, again.steps, again.grants)
    assert first.trace == again.trace
    assert other.digest != first.digest


@pytest.mark.parametrize(
    ("bug", "family"), [(bug, family) for bug in sorted(KNOWN) for family in SHOWS_ON[bug]]
)
def test_each_historical_bug_put_back_is_found(bug: str, family: str) -> None:
    began = time.process_time()
    plans = (Plan(seed=seed, bugs=(bug,), family=family) for seed in range(300))
    found = next((plan.seed for plan in plans if not run(plan).ok), None)
    assert found is not None, f"{bug} was not found in 300 seeds"
    assert time.process_time() - began < 60


@pytest.mark.parametrize(
    ("bug", "seed"),
    [
        ("no-trust-at-send", 0),  # an extend's trust kept until its answer came
        ("late-try-forgotten", 667),  # an acquire's unanswered try landing after an extend
        ("extend-renewal-race", 17),  # an extend and a renewal in flight together
    ],
)
def test_the_bugs_the_simulator_found_stay_fixed(bug: str, seed: int) -> None:
    """The seeds that found them: broken with the bug put back, fine without it."""
    broken = run(Plan(seed=seed, bugs=(bug,)))
    assert not broken.ok and "past the server's grant" in (broken.violation or "")
    assert run(Plan(seed=seed)).ok


def test_virtual_time_jumps_to_the_next_timer_and_a_stall_is_named() -> None:
    clock = VirtualClock(start=0.0)
    loop = VirtualLoop(clock)
    try:
        loop.run_until_complete(asyncio.sleep(3600))  # an hour, in no time
        assert clock.now == pytest.approx(3600)
        with pytest.raises(Stalled):
            loop.run_until_complete(loop.create_future())  # nothing will ever set it
    finally:
        loop.close()


ops = st.lists(
    st.tuples(
        st.sampled_from(["acquire", "release", "renew", "wait"]),
        st.integers(0, 2),  # which owner
        st.floats(0.01, 2.0),  # a TTL, or how long to wait
    ),
    max_size=60,
)


@given(ops)
def test_the_lease_store_model(sequence: list[tuple[str, int, float]]) -> None:
    """Tokens grow with every grant; only the holder releases or renews; a lease ends
    by the server's clock."""
    store, now, tokens = LeaseStore(rate=1.0), 0.0, []
    for op, who, seconds in sequence:
        owner = f"owner-{who}"
        before = store.holder("n", now)
        if op == "acquire":
            outcome = store.acquire("n", owner, seconds, now)
            if before is None:
                assert isinstance(outcome, Granted)
                tokens.append(outcome.token)
            else:
                assert isinstance(outcome, Taken) and outcome.remaining > 0
        elif op == "release":
            assert store.release("n", owner, now) == (before is not None and before.owner == owner)
        elif op == "renew":
            assert store.renew("n", owner, seconds, now) == (
                before is not None and before.owner == owner
            )
        else:
            now += seconds
    assert tokens == sorted(set(tokens))


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ({"family": "raft"}, "no model family 'raft'"),
        ({"workload": "queue"}, "no workload 'queue'"),
        ({"clients": 1}, "at least 2 clients"),
        ({"ttl": 0}, "ttl"),
        ({"duration": -1}, "duration"),
        ({"bugs": ("nope",)}, "no such historical bug: nope"),
    ],
)
def test_a_plan_says_what_is_wrong_with_it(plan: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Plan(seed=1, **plan)  # type: ignore[arg-type]
