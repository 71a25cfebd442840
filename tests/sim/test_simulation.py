"""The deterministic simulator: the real asyncio client against each model family (TTL
leases, sessions; the real etcd, Redis and Redlock backends against models of their
servers) over a faulty network, in virtual time.
No run breaks an invariant; a run is decided by its seed alone; each historical bug put
back is found where it can show; the bugs the simulator found itself stay fixed."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fencelock import clock
from fencelock.errors import ConfigError
from fencelock.primitives import lock as lock_module
from fencelock.sim import Plan, run
from fencelock.sim.bugs import KNOWN
from fencelock.sim.loop import Stalled, VirtualClock, VirtualLoop
from fencelock.sim.model import GrantReply, LeaseStore, Taken
from fencelock.sim.workloads import WORKLOADS
from fencelock.sim.world import OUTLIVING

SWEEP_CPU = 0.75  # seconds of CPU each family's lock sweep below may use (5-30 runs)
PRIMITIVE_CPU = 0.25  # and each other workload's, on each family it runs on
FAMILIES = ("lease", "session", "redlock", "etcd", "redis")
CHEAP = ("lease", "session", "etcd")  # the families whose runs cost the least CPU
PRIMITIVES = [
    (workload, family)
    for workload in sorted(WORKLOADS)
    if workload != "lock"
    for family in FAMILIES
    if not (workload in OUTLIVING and family == "session")
    # the guards' tokens: a clock's (leases), one counter's (sessions), a revision that
    # starts again when etcd loses its data; Redis's and Redlock's clocks are as leases'
    and (workload != "fenced" or family in CHEAP)
]
# Where each put-back bug can show (family, workload): a session's timeout does not
# shrink with an extend; a reused holder needs a re-entrant lock; a renewer's round of
# several leases renewed one by one (Redis renews a round in one script), a client that
# holds two (a leader and its announcement).
SHOWS_ON = {
    "trust-from-reply": [(family, "lock") for family in FAMILIES],
    "no-trust-at-send": [("lease", "lock"), ("redlock", "lock"), ("redis", "lock")],
    # on the real Redlock backend found after about 8 s of CPU: held by its seed (below)
    "extend-renewal-race": [("lease", "lock"), ("redlock-model", "lock"), ("redis", "lock")],
    # a store that grants its holder's try again; since cancels are in the default mix,
    # found after about 45 s of CPU (seed 294): held by its seed (below)
    "late-try-forgotten": [],
    "reused-holder-id": [(family, "reentrant") for family in FAMILIES],
    # the real Redlock backend renews a round at once (each lease on its own, pipelined);
    # since cancels are in the default mix, found after 13 s of CPU on leases, 50 s on
    # Redlock's model: held by their seeds (below)
    "renewer-stale-round": [],
    # Redlock's inspect, when a node is slow as a writer looks for readers: found after
    # about 17 s of CPU on the model (3 s on the real backend, its nodes paused at
    # times), so held here by the seeds that found it (below), not searched for
    "redlock-guessed-holder": [],
    "etcd-late-release": [("etcd", "lock")],  # the etcd backend's own I/O
    "redis-reused-owner": [("redis", "lock")],  # the Redis backend's own undo
    "latch-stale-count-list": [],  # about 6 s of CPU: held by its seed (below)
    "sqlite-dead-holder-guess": [],  # no asyncio family: test_sqlite_host_sim.py finds it
    # broken variants that never shipped, one per invariant no historical bug breaks
    # (tests/sim/test_invariants.py holds each by a seed too)
    "redis-release-unchecked": [("redis", "lock")],  # the Redis backend's own script
    "election-evicts-first": [(family, "election") for family in CHEAP],
    "election-deposed-evicts": [],  # found by the announcement invariant: held by its seed
    "fence-equal-waves-all": [(family, "fenced") for family in CHEAP],
    "rwlock-own-lease-token": [],  # only where counters of names disagree: held by its seed
}


def _plan(seed: int, family: str, workload: str = "lock") -> Plan:
    """A run of the sweeps: the real Redlock backend's, a third as long (five nodes of
    Redis, every message in RESP, cost it four times the CPU of its model's)."""
    return Plan(
        seed, family=family, workload=workload, duration=10.0 if family == "redlock" else 30.0
    )


@pytest.mark.parametrize("family", FAMILIES)
def test_a_sweep_of_seeds_breaks_no_invariant(family: str) -> None:
    began, seed, steps = time.process_time(), 0, 0
    while time.process_time() - began < SWEEP_CPU or seed < 3:  # a loaded machine: 3 still
        outcome = run(_plan(seed, family))
        assert outcome.ok, f"seed {seed}: {outcome.violation}\n" + "\n".join(outcome.trace)
        assert outcome.grants > 5  # the clients did take the lock, again and again
        seed, steps = seed + 1, steps + outcome.steps
    assert seed >= 3
    assert steps > 10_000


@pytest.mark.parametrize(("workload", "family"), PRIMITIVES)
def test_each_primitive_keeps_its_invariant(workload: str, family: str) -> None:
    """A semaphore's permits, a read-write lock's exclusion, one leader at a time, a
    latch that opens only when counted down, a re-entrant lock nobody else enters:
    each checked after every turn, under the same faults, with every lock's invariants
    on every lease the primitive takes."""
    began, seed, grants = time.process_time(), 0, 0
    while time.process_time() - began < PRIMITIVE_CPU or seed < 2:
        outcome = run(_plan(seed, family, workload))
        assert outcome.ok, f"seed {seed}: {outcome.violation}\n" + "\n".join(outcome.trace)
        seed, grants = seed + 1, grants + outcome.grants
    assert grants > 5 or workload in OUTLIVING  # a latch takes no lock of the world's


@pytest.mark.parametrize(
    ("family", "workload"),
    [(family, "lock") for family in FAMILIES] + [("lease", w) for w in sorted(WORKLOADS)],
)
def test_a_run_is_decided_by_its_seed(family: str, workload: str) -> None:
    first, again = (
        run(_plan(7, family, workload)),
        run(_plan(7, family, workload)),
    )
    other = run(_plan(8, family, workload))
    assert (first.digest, first.steps, first.grants) == (again.digest, again.steps, again.grants)
    assert first.trace == again.trace
    assert other.digest != first.digest


def test_a_thread_outside_the_world_changes_no_run() -> None:
    """A thread of an earlier test or of a driver drawing from ``random``, the clock and
    the owner values while a run goes on leaves the run as its seed decides (in a suite,
    one left drawing gave the same seed two histories)."""
    stop = threading.Event()

    def draw() -> None:
        while not stop.is_set():
            random.random()
            random.getrandbits(8)
            clock.now()
            lock_module.new_owner()
            time.sleep(0.0002)

    alone = run(_plan(7, "redlock"))
    drawing = threading.Thread(target=draw, daemon=True)
    drawing.start()
    try:
        beside = [run(_plan(7, "redlock")) for _ in range(2)]
    finally:
        stop.set()
        drawing.join()
    assert [b.digest for b in beside] == [alone.digest, alone.digest]


@pytest.mark.parametrize(
    ("bug", "family", "workload"),
    [(bug, family, workload) for bug in sorted(KNOWN) for family, workload in SHOWS_ON[bug]],
)
def test_each_historical_bug_put_back_is_found(bug: str, family: str, workload: str) -> None:
    plans = (Plan(seed, bugs=(bug,), family=family, workload=workload) for seed in range(300))
    found = next((plan.seed for plan in plans if not run(plan).ok), None)
    assert found is not None, f"{bug} was not found in 300 seeds"


@pytest.mark.parametrize(
    ("bug", "family", "workload", "seed", "shows"),
    [
        # an extend's trust kept until its answer came
        ("no-trust-at-send", "lease", "lock", 0, "past the server's grant"),
        # an acquire's unanswered try landing after an extend
        ("late-try-forgotten", "lease", "lock", 294, "past the server's grant"),
        # an extend and a renewal in flight together
        ("extend-renewal-race", "lease", "lock", 15, "past the server's grant"),
        # the renewer's one-by-one round meeting a lease past its safe time
        ("renewer-stale-round", "redlock-model", "election", 47, "raised ValueError"),
        ("renewer-stale-round", "lease", "election", 69, "raised ValueError"),
        # Redlock's inspect taking "held on 2 of the 3 that answered" for "not held"
        ("redlock-guessed-holder", "redlock-model", "rwlock", 27, "a writer trusted beside"),
        # the same, the extend racing a renewal, and the latch's repair, on the real
        # Redlock backend (runs of 10 s, as the sweeps')
        ("redlock-guessed-holder", "redlock", "rwlock", 18, "a writer trusted beside"),
        ("extend-renewal-race", "redlock", "lock", 2, "past the server's grant"),
        ("latch-stale-count-list", "redlock", "latch", 27, "wait passed a latch"),
        # a latch's repair reading counts listed before an arming finished as none left
        ("latch-stale-count-list", "lease", "latch", 8, "wait passed a latch"),
    ],
)
def test_the_bugs_the_simulator_found_stay_fixed(
    bug: str, family: str, workload: str, seed: int, shows: str
) -> None:
    """The seeds that found them: broken with the bug put back, fine without it."""
    plan = _plan(seed, family, workload)
    broken = run(dataclasses.replace(plan, bugs=(bug,)))
    assert not broken.ok
    assert shows in (broken.violation or "")
    assert run(plan).ok


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
                assert isinstance(outcome, GrantReply)
                tokens.append(outcome.token)
            else:
                assert isinstance(outcome, Taken)
                assert outcome.remaining > 0
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
        ({"workload": "latch", "family": "session"}, "outlive their client"),
        ({"ttl": 0}, "ttl"),
        ({"duration": -1}, "duration"),
        ({"bugs": ("nope",)}, "no such historical bug: nope"),
    ],
)
def test_a_plan_says_what_is_wrong_with_it(plan: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Plan(seed=1, **plan)  # type: ignore[arg-type]
