"""Redlock tokens, proved by simulation: five nodes, virtual time, delays, pauses, expiry.

Each node runs the design's scripts exactly, each in one atomic step:

    phase 1   SET key owner NX PX ttl; if set, return the counter (when seeded, read
              as max(counter, the node's clock in microseconds)), else the key's PTTL
    phase 2   if key == owner then counter = max(counter, T)
    extend    if key == owner then PEXPIRE key ttl
    release   if key == owner then DEL key

Clients drive the decisions of ``fencelock.engine.redlock`` as the backend will: phase 1
to every node, phase 2 to the nodes won, extensions, release of every node, retries
when ``busy_result`` says. Every message is delayed at random, now and then by far more
than the TTL, and may be lost on the way to the node or on the way back (so a node can
run a script whose answer the client never sees). Clients pause between the phases and
while holding, and sometimes never release. Keys expire on each node's own clock.
Hypothesis picks the scenario and the seed of the delays. After every run:

* no token was issued to two successful acquisitions;
* if A succeeded before B's phase 1 began, token(A) < token(B);
* no two leases were trusted at the same time, and the later one has the larger token.

The first two need no timing assumption and are also checked with node clocks far off;
the third relies on node clocks staying within 1 % of real time, which the validity's
drift allowance covers. To show the checks have teeth, the one-phase INCR scheme fails
them, both found by search and in the explicit {1,2,3}, {3,4,5}, {1,2,4} case.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import Counter
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, find, given, note, settings
from hypothesis import strategies as st

from fencelock.engine.outcomes import Busy
from fencelock.engine.redlock import (
    Abort,
    AbortReason,
    NodeBusy,
    NodeError,
    NodeWon,
    PhaseOneResult,
    busy_result,
    decide_extend,
    decide_phase_one,
    decide_phase_two,
    quorum,
    reply_timeout,
)
from fencelock.engine.timing import trusted_until

N = 5
MAX_RATE_ERROR = 0.01  # node clocks up to 1 % fast or slow: what the drift allowance covers


# -- the nodes ------------------------------------------------------------------------


@dataclass
class Node:
    """One Redis node: a lock key (owner, expiry on this node's clock) and a counter."""

    rate: float = 1.0  # node seconds per real second
    offset: float = 0.0  # the node's clock at real time 0
    seeded: bool = False
    key: tuple[str, float] | None = None
    counter: int = 0

    def clock(self, t: float) -> float:
        return self.offset + self.rate * t

    def holder(self, t: float) -> str | None:
        if self.key is not None and self.key[1] <= self.clock(t):
            self.key = None  # expired (PX)
        return None if self.key is None else self.key[0]

    def set_nx(self, t: float, owner: str, ttl: float) -> NodeBusy | None:
        if self.holder(t) is not None:
            assert self.key is not None
            return NodeBusy(self.key[1] - self.clock(t), self.key[0])
        self.key = (owner, self.clock(t) + ttl)
        return None

    def phase_one(self, t: float, owner: str, ttl: float) -> PhaseOneResult:
        busy = self.set_nx(t, owner, ttl)
        if busy is not None:
            return busy
        if self.seeded:
            return NodeWon(max(self.counter, int(self.clock(t) * 1e6)))
        return NodeWon(self.counter)

    def phase_two(self, t: float, owner: str, token: int) -> bool:
        if self.holder(t) != owner:
            return False
        self.counter = max(self.counter, token)
        return True

    def incr(self, t: float, owner: str, ttl: float) -> PhaseOneResult:
        """The one-phase scheme: SET NX and, if set, INCR the counter and return it."""
        busy = self.set_nx(t, owner, ttl)
        if busy is not None:
            return busy
        self.counter += 1
        return NodeWon(self.counter)

    def extend(self, t: float, owner: str, ttl: float) -> bool:
        if self.holder(t) != owner:
            return False
        self.key = (owner, self.clock(t) + ttl)
        return True

    def release(self, t: float, owner: str) -> bool:
        if self.holder(t) != owner:
            return False
        self.key = None
        return True


Script = Callable[[Node, float], Any]


# -- virtual time and the network --------------------------------------------------------


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Send:
    """Run ``scripts[i]`` on node i; resume when every reply is in, or at the timeout."""

    scripts: Mapping[int, Script]
    timeout: float


Reply = tuple[float, dict[int, Any]]  # (the time now, replies that came in time)
Proc = Generator[Sleep | Send, Reply, None]


@dataclass(frozen=True)
class Scenario:
    clients: int
    attempts: int
    retries: int  # after a failed acquisition, at the time busy_result says
    ttl: float
    delay: float  # usual one-way delay, up to this (fraction of the reply timeout)
    late: float  # chance that a message takes up to 2 TTLs instead
    loss: float  # chance that a message is lost, each way
    timeout: float  # per-phase reply timeout cap (fraction of the TTL)
    pause: float  # chance of a pause at each pause point
    max_pause: float  # (fraction of the TTL)
    crash: float  # chance that a holder never releases (its keys expire)
    seeded: bool
    rates: tuple[float, ...]
    offsets: tuple[float, ...]
    seed: int

    @property
    def drift_bounded(self) -> bool:
        return all(abs(rate - 1) <= MAX_RATE_ERROR + 1e-12 for rate in self.rates)


class World:
    """A heap of timed events; clients are generators yielding Sleep and Send."""

    def __init__(self, scenario: Scenario) -> None:
        self.s = scenario
        self.rng = random.Random(scenario.seed)
        self.nodes = [
            Node(rate, offset, scenario.seeded)
            for rate, offset in zip(scenario.rates, scenario.offsets, strict=True)
        ]
        self.now = 0.0
        self.events: list[tuple[float, int, Callable[[], None]]] = []
        self.seq = itertools.count()
        self.trace: list[str] = []
        self.stats: Counter[str] = Counter()

    def at(self, t: float, action: Callable[[], None]) -> None:
        heapq.heappush(self.events, (t, next(self.seq), action))

    def spawn(self, proc: Proc) -> None:
        self.at(0.0, partial(self.step, proc, None))

    def run(self) -> None:
        while self.events:
            self.now, _, action = heapq.heappop(self.events)
            action()

    def step(self, proc: Proc, reply: Reply | None) -> None:
        try:
            op = next(proc) if reply is None else proc.send(reply)
        except StopIteration:
            return
        if isinstance(op, Sleep):
            self.at(self.now + op.seconds, lambda: self.step(proc, (self.now, {})))
        else:
            self.send(proc, op)

    def one_way(self) -> float | None:
        """A message's delay, or None if it is lost."""
        if self.rng.random() < self.s.loss:
            return None
        if self.rng.random() < self.s.late:
            return self.rng.uniform(0, 2 * self.s.ttl)
        return self.rng.uniform(1e-5, self.s.delay * self.s.timeout * self.s.ttl)

    def send(self, proc: Proc, op: Send) -> None:
        replies: dict[int, Any] = {}
        deadline = resume = self.now + op.timeout
        arrivals = [self.now]
        for i, script in op.scripts.items():
            there, back = self.one_way(), self.one_way()
            if there is None:
                continue
            on_time = back is not None and self.now + there + back <= deadline
            if on_time:
                assert back is not None
                arrivals.append(self.now + there + back)
            self.at(self.now + there, partial(self.deliver, i, script, replies, on_time))
        if len(arrivals) == len(op.scripts) + 1:
            resume = max(arrivals)  # every reply is in before the timeout
        self.at(resume, lambda: self.step(proc, (self.now, replies)))

    def deliver(self, i: int, script: Script, replies: dict[int, Any], on_time: bool) -> None:
        result = script(self.nodes[i], self.now)
        self.trace.append(f"{self.now:9.5f} node {i}: {_describe(script)} -> {result}")
        if on_time:
            replies[i] = result


def _describe(script: Script) -> str:
    assert isinstance(script, partial)
    args = ", ".join(f"{k}={v!r}" for k, v in script.keywords.items())
    return f"{script.func.__name__}({args})"


# -- the clients -------------------------------------------------------------------------


@dataclass
class ClientLease:
    owner: str
    token: int
    asked: float  # phase 1 began
    granted: float  # the acquisition succeeded
    until: float  # trusted until (moved by extensions, cut short by the release)


@dataclass
class Client:
    world: World
    name: str
    leases: list[ClientLease] = field(default_factory=list)

    @property
    def s(self) -> Scenario:
        return self.world.s

    def note(self, text: str, event: str) -> None:
        self.world.trace.append(f"{self.world.now:9.5f} {self.name}: {text}")
        self.world.stats[event] += 1

    def pause(self) -> Generator[Sleep | Send, Reply, float]:
        """Maybe freeze for a while (GC, SIGSTOP); returns the time after."""
        rng = self.world.rng
        seconds = (
            rng.uniform(0, self.s.max_pause * self.s.ttl) if rng.random() < self.s.pause else 0
        )
        now, _ = yield Sleep(seconds)
        return now

    def run(self, acquire: Acquire) -> Proc:
        for attempt in range(self.s.attempts):
            yield Sleep(self.world.rng.uniform(0, self.s.ttl))
            for retry in range(self.s.retries + 1):
                owner = f"{self.name}.{attempt}.{retry}"  # unique per attempt
                outcome = yield from acquire(self, owner)
                if isinstance(outcome, ClientLease):
                    self.note(f"{owner} token {outcome.token} until {outcome.until:.5f}", "granted")
                    self.leases.append(outcome)
                    yield from self.hold(outcome)
                    break
                assert outcome.retry_after is not None
                yield Sleep(outcome.retry_after)  # the holder's expiry, or a random delay

    def hold(self, lease: ClientLease) -> Generator[Sleep | Send, Reply, None]:
        ttl = self.s.ttl
        for _ in range(self.world.rng.randint(0, 2)):
            started = yield from self.pause()
            if started >= lease.until:
                break  # the renewer would have called it lost
            now, replies = yield Send(
                {i: partial(Node.extend, owner=lease.owner, ttl=ttl) for i in range(N)},
                reply_timeout(ttl, started=started, now=started, cap=self.s.timeout * ttl),
            )
            results = [replies.get(i, NodeError()) for i in range(N)]
            new = decide_extend(results, ttl=ttl, started=started, now=now, until=lease.until)
            self.note(f"{lease.owner} extend -> {new}", "extended" if new else "not extended")
            if new is None:
                break
            lease.until = new
        now = yield from self.pause()
        lease.until = min(lease.until, now)  # stop acting on it, then release
        if self.world.rng.random() >= self.s.crash:
            yield from self.release(lease.owner)

    def release(self, owner: str) -> Generator[Sleep | Send, Reply, None]:
        yield Send({i: partial(Node.release, owner=owner) for i in range(N)}, self.s.timeout)


Outcome = Generator[Sleep | Send, Reply, ClientLease | Busy]
Acquire = Callable[[Client, str], Outcome]


def two_phase(client: Client, owner: str) -> Outcome:
    """One acquisition as the redlock backend runs it."""
    ttl, cap = client.s.ttl, client.s.timeout * client.s.ttl
    started, _ = yield Sleep(0)
    _, replies = yield Send(
        {i: partial(Node.phase_one, owner=owner, ttl=ttl) for i in range(N)},
        reply_timeout(ttl, started=started, now=started, cap=cap),
    )
    now = yield from client.pause()
    step = decide_phase_one([replies.get(i, NodeError()) for i in range(N)], ttl, started, now)
    client.note(f"{owner} phase 1 -> {step}", _event(step))
    if isinstance(step, Abort):
        yield from client.release(owner)
        return busy_result(step, client.world.rng.random)
    now = yield from client.pause()  # noticed only when phase 2 is decided
    _, replies = yield Send(
        {i: partial(Node.phase_two, owner=owner, token=step.token) for i in step.nodes},
        reply_timeout(ttl, started=started, now=now, cap=cap),
    )
    now = yield from client.pause()
    done = decide_phase_two(step, replies, now)
    client.note(f"{owner} phase 2 -> {done}", _event(done))
    if isinstance(done, Abort):
        yield from client.release(owner)
        return busy_result(done, client.world.rng.random)
    return ClientLease(owner, done.token, started, now, done.trusted_until)


def _event(decision: object) -> str:
    if isinstance(decision, Abort):
        return f"abort: {decision.reason.name}"
    return type(decision).__name__


def one_phase_incr(client: Client, owner: str) -> Outcome:
    """The scheme phase 2 replaces: INCR on the nodes won, token = max of the results."""
    ttl, cap = client.s.ttl, client.s.timeout * client.s.ttl
    started, _ = yield Sleep(0)
    _, replies = yield Send(
        {i: partial(Node.incr, owner=owner, ttl=ttl) for i in range(N)},
        reply_timeout(ttl, started=started, now=started, cap=cap),
    )
    now = yield from client.pause()
    results = [replies.get(i, NodeError()) for i in range(N)]
    step = decide_phase_one(results, ttl, started, now)
    if isinstance(step, Abort):
        yield from client.release(owner)
        return busy_result(step, client.world.rng.random)
    token = max(r.counter for r in results if isinstance(r, NodeWon))
    return ClientLease(owner, token, started, now, trusted_until(started, ttl))


# -- the checks --------------------------------------------------------------------------


def simulate(scenario: Scenario, acquire: Acquire) -> tuple[list[ClientLease], World]:
    world = World(scenario)
    clients = [Client(world, f"c{k}") for k in range(scenario.clients)]
    for client in clients:
        world.spawn(client.run(acquire))
    world.run()
    return [lease for c in clients for lease in c.leases], world


def violations(leases: list[ClientLease], drift_bounded: bool = True) -> list[str]:
    """What went wrong: a shared token, tokens out of order, leases trusted at once.

    The last needs node clocks within the drift allowance; the token rules need nothing.
    """
    found = []
    tokens = [lease.token for lease in leases]
    if len(set(tokens)) != len(tokens):
        found.append(f"a token was issued twice: {sorted(tokens)}")
    for a, b in itertools.permutations(leases, 2):
        if a.granted < b.asked and not a.token < b.token:
            found.append(f"{a.owner} (token {a.token}) came before {b.owner} ({b.token})")
    if not drift_bounded:
        return found
    trusted = sorted((x for x in leases if x.granted < x.until), key=lambda x: x.granted)
    for a, b in itertools.pairwise(trusted):
        if a.until > b.granted:
            found.append(f"{a.owner} and {b.owner} were both trusted at {b.granted:.5f}")
        if a.token >= b.token:
            found.append(f"{b.owner} trusted after {a.owner} with a smaller token")
    return found


def check(scenario: Scenario, acquire: Acquire) -> list[str]:
    leases, world = simulate(scenario, acquire)
    found = violations(leases, scenario.drift_bounded)
    if found:
        note("\n".join(world.trace))
    return found


fractions = partial(st.floats, allow_nan=False)
FAST_CLOCKS = (1 + MAX_RATE_ERROR,) * N  # every node's clock as fast as allowed
SPACE: dict[str, st.SearchStrategy[Any]] = {
    "clients": st.integers(2, 5),
    "attempts": st.integers(1, 4),
    "retries": st.integers(0, 3),
    "ttl": st.sampled_from([0.05, 0.3, 1.0, 10.0]),
    "delay": fractions(0.001, 0.7),
    "late": st.sampled_from([0.0, 0.02, 0.1]),
    "loss": st.sampled_from([0.0, 0.02, 0.1, 0.25]),
    "timeout": fractions(0.01, 1.0),
    "pause": st.sampled_from([0.0, 0.1, 0.3]),
    "max_pause": fractions(0.0, 2.0),
    "crash": st.sampled_from([0.0, 0.3]),
    "seeded": st.booleans(),
    "rates": st.one_of(
        st.just(FAST_CLOCKS), st.tuples(*[fractions(1 - MAX_RATE_ERROR, 1 + MAX_RATE_ERROR)] * N)
    ),
    "offsets": st.tuples(*[fractions(0.0, 100.0)] * N),
    "seed": st.integers(0, 2**32 - 1),
}
scenarios = st.builds(Scenario, **SPACE)
# Handoffs at expiry, where the validity's drift allowance is all that separates two
# leases: fast node clocks, a quick network, holders paused past their lease, waiters
# retrying the moment busy_result says the keys expire.
handoffs = st.builds(
    Scenario,
    **{
        **SPACE,
        "retries": st.just(3),
        "delay": fractions(0.001, 0.05),
        "late": st.just(0.0),
        "loss": st.just(0.0),
        "pause": st.just(0.5),
        "max_pause": fractions(1.0, 2.0),
        "rates": st.just(FAST_CLOCKS),
    },
)
# Node clocks far off (keys expire early or late): mutual exclusion is gone, the token
# rules must still hold, and then the key == owner check of phase 2 is what keeps them.
wild_clocks = st.builds(Scenario, **{**SPACE, "rates": st.tuples(*[fractions(0.2, 5.0)] * N)})


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios)
def test_two_phase_tokens_are_unique_and_ordered(scenario: Scenario) -> None:
    found = check(scenario, two_phase)
    assert not found, found


@settings(max_examples=300, deadline=None)
@given(handoffs)
def test_leases_handed_over_at_expiry_never_overlap(scenario: Scenario) -> None:
    found = check(scenario, two_phase)
    assert not found, found


@settings(max_examples=1000, deadline=None)
@given(wild_clocks)
def test_tokens_need_no_clock_assumption(scenario: Scenario) -> None:
    assert not scenario.drift_bounded
    found = check(scenario, two_phase)
    assert not found, found


def test_the_simulation_exercises_every_path() -> None:
    """Guard against a simulation so gentle that it proves nothing."""
    stats: Counter[str] = Counter()

    @settings(max_examples=300, database=None, derandomize=True, phases=[Phase.generate])
    @given(st.one_of(scenarios, wild_clocks))
    def run(scenario: Scenario) -> None:
        stats.update(simulate(scenario, two_phase)[1].stats)

    run()
    assert stats["granted"] > 300
    assert stats["extended"] > 50
    assert stats["not extended"] > 20
    for reason in AbortReason:
        assert stats[f"abort: {reason.name}"] > 5, (reason, stats)


def test_the_simulation_finds_the_flaw_of_one_phase_incr() -> None:
    """The same checks, run on the one-phase scheme, must fail: they are not vacuous."""
    bad = find(
        scenarios,
        lambda s: bool(violations(simulate(s, one_phase_incr)[0], s.drift_bounded)),
        settings=settings(
            max_examples=2000, database=None, derandomize=True, phases=[Phase.generate]
        ),
    )
    assert violations(simulate(bad, one_phase_incr)[0], bad.drift_bounded)


# -- the explicit counterexample ---------------------------------------------------------


def _acquire_on(nodes: list[Node], won: set[int], t: float, scheme: str) -> int:
    """One acquisition at time ``t`` that reaches only the nodes ``won`` (numbered 1..5)."""
    owner, ttl = f"owner@{t}", 1.0
    reach = {i - 1 for i in won}
    script = Node.incr if scheme == "incr" else Node.phase_one
    results = [script(n, t, owner, ttl) if i in reach else NodeError() for i, n in enumerate(nodes)]
    step = decide_phase_one(results, ttl, t, t + 0.01)
    assert not isinstance(step, Abort)
    if scheme == "incr":
        return max(r.counter for r in results if isinstance(r, NodeWon))
    replies = {i: nodes[i].phase_two(t + 0.02, owner, step.token) for i in step.nodes}
    done = decide_phase_two(step, replies, t + 0.03)
    assert not isinstance(done, Abort)
    for node in nodes:
        node.release(t + 0.04, owner)
    return done.token


@pytest.mark.parametrize(("scheme", "expected"), [("incr", [1, 2, 2]), ("two-phase", [1, 2, 3])])
def test_quorums_123_345_124(scheme: str, expected: list[int]) -> None:
    """One-phase INCR issues token 2 twice; the two-phase protocol issues 1, 2, 3.

    Under INCR, {1,2,3} leaves counters 1 1 1 0 0 (token 1), {3,4,5} leaves 1 1 2 1 1
    (token 2), and {1,2,4} increments to 2 2 . 2 . (token 2 again): no node of the
    third quorum saw the second acquisition's highest counter. Phase 2 writes the chosen
    token on the whole quorum, so every later quorum meets it.
    """
    nodes = [Node() for _ in range(N)]
    assert quorum(N) == 3
    quorums = [{1, 2, 3}, {3, 4, 5}, {1, 2, 4}]  # each after the previous lease ended
    tokens = [_acquire_on(nodes, won, 10.0 * k, scheme) for k, won in enumerate(quorums)]
    assert tokens == expected
    counters = {"incr": [2, 2, 2, 2, 1], "two-phase": [3, 3, 2, 3, 2]}[scheme]
    assert [node.counter for node in nodes] == counters
