"""The check harness's checker: hand-built histories, a small simulator and hypothesis."""

from __future__ import annotations

import heapq
import json
import math
import random
from collections.abc import Generator
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fencelock.check.checker import Overlap, RegisterCheck, SeatsCheck, check
from fencelock.check.history import History, Op

# ---------------------------------------------------------------- builders


def acq(p: int, token: int, end: float, start: float | None = None) -> Op:
    """A successful acquire by process ``p`` that returned at ``end``."""
    return Op(p, "acquire", end if start is None else start, end, "ok", token=token)


def rel(p: int, token: int, at: float, result: str = "ok") -> Op:
    return Op(p, "release", at, at + 0.001, result, token=token)  # type: ignore[arg-type]


def lost(p: int, token: int, at: float) -> Op:
    return Op(p, "lost", at, at, "info", token=token)


def crash(p: int, at: float) -> Op:
    return Op(p, "crash", at, at, "info")


def wr(p: int, token: int, at: float, seq: int | None, key: str = "register") -> Op:
    """An accepted write; ``seq`` is the resource's commit sequence number."""
    value = None if seq is None else str(seq)
    return Op(p, "write", at, at + 0.001, "accepted", token=token, key=key, value=value)


def stale(p: int, token: int, at: float, key: str = "register") -> Op:
    return Op(p, "write", at, at + 0.001, "stale", token=token, key=key)


def final(value: int, at: float = 100.0) -> Op:
    return Op(-1, "read", at, at, "ok", key="register", value=str(value))


def hist(*ops: Op, workload: str = "register") -> History:
    return History(list(ops), {"workload": workload})


# ---------------------------------------------------------------- overlaps


def test_touching_belief_intervals_do_not_overlap() -> None:
    result = check(hist(acq(1, 1, 0.0), rel(1, 1, 1.0), acq(2, 2, 1.0), rel(2, 2, 2.0)))
    assert result.overlaps == ()
    assert result.overlap_count == 0


def test_intersecting_belief_intervals_overlap_exactly_where_they_intersect() -> None:
    result = check(hist(acq(1, 1, 0.0), rel(1, 1, 2.0), acq(2, 2, 1.5), rel(2, 2, 3.0)))
    assert result.overlaps == (
        Overlap(process_a=1, process_b=2, token_a=1, token_b=2, start=1.5, end=2.0),
    )
    assert result.overlaps[0].duration == pytest.approx(0.5)
    assert result.total_overlap_seconds == pytest.approx(0.5)


def test_belief_starts_when_the_acquire_returns_not_when_it_was_asked() -> None:
    # process 2 asked at 0.5 but only got the lease at 2.0, when process 1 released
    result = check(hist(acq(1, 1, 0.0), rel(1, 1, 2.0), acq(2, 2, 2.0, start=0.5)))
    assert result.overlaps == ()
    assert result.leases[1].asked == 0.5


def test_a_process_does_not_overlap_itself() -> None:
    assert check(hist(acq(1, 1, 0.0), acq(1, 2, 0.5), rel(1, 2, 1.0))).overlaps == ()


def test_three_way_overlap_is_reported_pairwise() -> None:
    result = check(hist(acq(1, 1, 0.0), acq(2, 2, 1.0), acq(3, 3, 2.0), final(0, 4.0)))
    assert [(o.process_a, o.process_b) for o in result.overlaps] == [(1, 2), (1, 3), (2, 3)]
    assert result.total_overlap_seconds == pytest.approx(3.0 + 2.0 + 2.0)
    assert result.longest_overlap_seconds == pytest.approx(3.0)
    assert result.to_dict()["longest_overlap_seconds"] == pytest.approx(3.0)
    assert "the longest 3.00s" in "\n".join(result.summary_lines())


def test_no_overlap_is_a_longest_overlap_of_zero() -> None:
    result = check(hist(acq(1, 1, 0.0), rel(1, 1, 1.0), acq(2, 2, 1.0), rel(2, 2, 2.0)))
    assert result.longest_overlap_seconds == 0.0


def test_lost_notice_ends_the_belief() -> None:
    result = check(
        hist(acq(1, 1, 0.0), lost(1, 1, 1.0), rel(1, 1, 5.0, "lost"), acq(2, 2, 1.0), final(0))
    )
    assert result.overlaps == ()
    assert result.leases[0].end == 1.0
    assert result.leases[0].fate == "lost"
    assert result.counts.leases_lost == 1


def test_lost_notice_for_another_token_does_not_end_the_belief() -> None:
    result = check(hist(acq(1, 5, 0.0), lost(1, 4, 1.0), rel(1, 5, 3.0), acq(2, 6, 2.0)))
    assert result.leases[0].end == 3.0
    assert result.overlap_count == 1


def test_release_that_finds_the_lease_lost_counts_as_lost() -> None:
    result = check(hist(acq(1, 1, 0.0), rel(1, 1, 2.0, "lost"), acq(2, 2, 1.0), rel(2, 2, 3.0)))
    assert result.leases[0].fate == "lost"
    assert result.overlaps == (
        Overlap(process_a=1, process_b=2, token_a=1, token_b=2, start=1.0, end=2.0),
    )


def test_crash_ends_the_belief() -> None:
    result = check(hist(acq(1, 1, 0.0), crash(1, 1.0), acq(2, 2, 1.5), rel(2, 2, 2.0)))
    assert result.overlaps == ()
    assert result.leases[0].fate == "crashed"
    assert result.counts.crashes == 1


def test_a_crash_of_another_process_does_not_end_the_belief() -> None:
    result = check(hist(acq(1, 1, 0.0), crash(3, 1.0), acq(2, 2, 1.5), rel(2, 2, 2.0)))
    assert result.overlap_count == 1


def test_an_unreleased_lease_lasts_to_the_end_of_the_history() -> None:
    result = check(hist(acq(1, 1, 0.0), acq(2, 2, 1.0), rel(2, 2, 2.0), final(0, at=9.0)))
    assert result.leases[0].end == 9.0
    assert result.leases[0].fate == "open"
    assert result.overlaps == (
        Overlap(process_a=1, process_b=2, token_a=1, token_b=2, start=1.0, end=2.0),
    )


# ---------------------------------------------------------------- token order


def test_token_order_violation_detected() -> None:
    later_lower = wr(2, 4, 2.0, seq=2)
    earlier = wr(1, 5, 1.0, seq=1)
    result = check(hist(earlier, later_lower, final(2)))
    assert len(result.token_violations) == 1
    assert result.token_violations[0].op == later_lower
    assert result.token_violations[0].earlier == earlier
    assert not result.ok
    assert "token-order violation" in result.reasons()[0]


def test_equal_tokens_of_different_processes_violate() -> None:
    result = check(hist(wr(1, 5, 1.0, 1), wr(2, 5, 2.0, 2), final(2)))
    assert len(result.token_violations) == 1


def test_order_is_the_commit_sequence_not_the_clock() -> None:
    # recorded out of clock order, but committed in token order: fine
    fine = check(hist(wr(1, 5, 1.0, seq=2), wr(2, 4, 2.0, seq=1), final(2)))
    assert fine.token_violations == ()
    # recorded in clock order, but committed out of token order: violation
    bad = check(hist(wr(1, 4, 1.0, seq=2), wr(2, 5, 2.0, seq=1), final(2)))
    assert [v.op.token for v in bad.token_violations] == [4]


def test_one_lease_may_write_several_keys_with_its_token() -> None:
    ops = [wr(1, 7, 1.0, 1, "seat:1"), wr(1, 7, 1.1, 2, "seat:2"), wr(2, 8, 2.0, 3, "seat:3")]
    assert check(hist(*ops, workload="seats")).token_violations == ()


def test_violation_names_the_best_earlier_rival_not_the_same_lease() -> None:
    ops = [wr(1, 5, 1.0, 1, "seat:1"), wr(2, 9, 1.5, 2, "seat:2"), wr(2, 9, 1.6, 3, "seat:3")]
    ops.append(wr(3, 6, 2.0, 4, "seat:4"))
    result = check(hist(*ops, workload="seats"))
    assert [(v.op.token, v.earlier.token) for v in result.token_violations] == [(6, 9)]


def test_accepted_write_without_sequence_number_is_warned_about() -> None:
    result = check(hist(wr(1, 5, 1.0, None), final(1)))
    assert result.warnings
    assert result.token_violations == ()


# ---------------------------------------------------------------- invariants


def test_register_lost_update_detected() -> None:
    ops = [wr(1, 1, 1.0, 1), wr(2, 2, 2.0, 2), wr(3, 3, 3.0, 3), final(2)]
    result = check(hist(*ops))
    assert isinstance(result.invariant, RegisterCheck)
    assert result.invariant.lost_updates == 1
    assert not result.ok
    assert "lost update" in result.invariant.explain()


def test_register_without_final_read_cannot_pass() -> None:
    result = check(hist(wr(1, 1, 1.0, 1)))
    assert not result.invariant.holds
    assert not result.ok


def test_register_tolerates_indeterminate_writes_but_not_unexplained_ones() -> None:
    error = Op(2, "write", 2.0, 2.1, "error", token=2, key="register")
    assert check(hist(wr(1, 1, 1.0, 1), error, final(2))).ok
    assert check(hist(wr(1, 1, 1.0, 1), error, final(1))).ok
    assert not check(hist(wr(1, 1, 1.0, 1), error, final(3))).ok


def test_register_matching_final_value_passes() -> None:
    result = check(hist(acq(1, 1, 0.0), wr(1, 1, 0.5, 1), rel(1, 1, 0.6), final(1)))
    assert result.ok
    assert result.summary_lines()[0].startswith("PASS")


def test_seats_double_sale_detected() -> None:
    first, again = wr(1, 1, 1.0, 1, "seat:3"), wr(2, 2, 2.0, 3, "seat:3")
    result = check(hist(first, wr(1, 1, 1.1, 2, "seat:4"), again, workload="seats"))
    assert isinstance(result.invariant, SeatsCheck)
    assert [d.key for d in result.invariant.double_sales] == ["seat:3"]
    assert result.invariant.double_sales[0].writes == (first, again)
    assert result.violating_writes() == [again]
    assert result.token_violations == ()  # token order was fine: the lock alone failed
    assert not result.ok
    assert "seat:3" in result.invariant.explain()


def test_seats_final_read_reveals_a_double_sale_the_history_missed() -> None:
    """A seller killed between its commit and its record: only the resource knows."""
    summary = Op(-1, "read", 9.0, 9.0, "ok", key="seats", value='{"sold":2,"sold_twice":[1]}')
    ops = [wr(1, 1, 1.0, 1, "seat:1"), wr(2, 2, 2.0, 3, "seat:2"), summary]
    result = check(hist(*ops, workload="seats"))
    assert isinstance(result.invariant, SeatsCheck)
    assert result.invariant.unrecorded == ("seat:1",)
    assert not result.ok
    assert "final read" in result.invariant.explain()


def test_seats_final_read_that_agrees_changes_nothing() -> None:
    summary = Op(-1, "read", 9.0, 9.0, "ok", key="seats", value='{"sold":2,"sold_twice":[]}')
    ops = [wr(1, 1, 1.0, 1, "seat:1"), wr(2, 2, 2.0, 2, "seat:2"), summary]
    assert check(hist(*ops, workload="seats")).ok


def test_workload_guessed_from_keys_when_not_in_params() -> None:
    history = History([wr(1, 1, 1.0, 1, "seat:1")], {})
    assert check(history).workload == "seats"


def test_fenced_history_with_a_pause_passes() -> None:
    """Client 1 is frozen past its TTL; client 2 takes over; client 1's late write is rejected."""
    ops = [
        acq(1, 1, 0.0),
        Op(1, "nemesis", 0.1, 2.1, "info", detail="pause client 1 for 2.0s"),
        acq(2, 2, 1.1, start=0.2),
        wr(2, 2, 1.2, 1),
        rel(2, 2, 1.3),
        stale(1, 1, 2.2),
        lost(1, 1, 2.3),
        final(1, 3.0),
    ]
    result = check(History(ops, {"workload": "register", "fencing": True}))
    assert result.ok
    assert result.overlaps == (
        Overlap(process_a=1, process_b=2, token_a=1, token_b=2, start=1.1, end=1.3),
    )
    c = result.counts
    assert (c.acquisitions, c.accepted_writes, c.stale_writes) == (2, 1, 1)
    assert (c.leases_lost, c.faults, c.errors) == (1, 1, 0)
    assert any("harmless" in line for line in result.summary_lines())


def test_to_dict_is_json() -> None:
    result = check(hist(wr(1, 5, 1.0, 1), wr(2, 4, 2.0, 2), acq(1, 5, 0.0), acq(2, 4, 0.5)))
    data = json.loads(json.dumps(result.to_dict()))
    assert data["ok"] is False
    assert data["token_violations"][0]["op"]["token"] == 4
    assert data["overlap_count"] == 1
    assert data["invariant"]["workload"] == "register"


# ---------------------------------------------------------------- hypothesis


@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.floats(0, 2), st.floats(0, 2)), min_size=1, max_size=30
    )
)
def test_sequential_schedules_never_overlap(schedule: list[tuple[int, float, float]]) -> None:
    """Leases handed from process to process with gaps >= 0 (including touching)."""
    ops, t = [], 0.0
    for token, (process, gap, hold) in enumerate(schedule, start=1):
        t += gap
        ops.append(acq(process, token, t))
        t += hold
        ops.append(rel(process, token, t))
    assert check(hist(*ops)).overlaps == ()


@given(st.floats(0, 10), st.floats(0, 10), st.floats(0, 10), st.floats(0, 10))
def test_two_leases_overlap_iff_their_intervals_intersect(
    a0: float, a1: float, b0: float, b1: float
) -> None:
    (a0, a1), (b0, b1) = sorted((a0, a1)), sorted((b0, b1))
    result = check(hist(acq(1, 1, a0), rel(1, 1, a1), acq(2, 2, b0), rel(2, 2, b1)))
    start, end = max(a0, b0), min(a1, b1)
    assert result.overlap_count == (1 if end > start else 0)
    if result.overlaps:
        assert (result.overlaps[0].start, result.overlaps[0].end) == (start, end)


@given(st.permutations(list(range(1, 13))))
def test_token_violations_appear_iff_commit_order_is_not_token_order(tokens: list[int]) -> None:
    ops = [wr(p % 4, tok, 0.1 * p, seq) for seq, (p, tok) in enumerate(enumerate(tokens), 1)]
    result = check(hist(*ops, final(len(ops))))
    assert bool(result.token_violations) == (tokens != sorted(tokens))
    running_max = [max(tokens[:i]) for i in range(1, len(tokens))]
    expected = [tok for tok, best in zip(tokens[1:], running_max, strict=True) if tok < best]
    assert [v.op.token for v in result.token_violations] == expected


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["register", "seats"]))
def test_simulated_fenced_runs_pass(seed: int, workload: str) -> None:
    history = simulate(seed=seed, workload=workload, fencing=True, duration=6.0)
    result = check(history)
    assert result.ok, result.summary_lines()


def test_simulated_unfenced_run_with_pauses_fails() -> None:
    for workload in ("register", "seats"):
        result = check(simulate(seed=3, workload=workload, fencing=False, duration=10.0))
        assert result.overlap_count > 0
        assert not result.ok, result.summary_lines()


def test_simulated_fenced_run_rejects_stale_writes() -> None:
    result = check(simulate(seed=3, workload="seats", fencing=True, duration=10.0))
    assert result.ok
    assert result.overlap_count > 0
    assert result.counts.stale_writes > 0
    assert result.counts.crashes > 0


# ---------------------------------------------------------------- simulator

T0 = 1000.0  # histories use the host's boot clock: never starts at zero
POLL = 0.01
LATENCY = 0.002
ACQUIRE_TIMEOUT = 2.0


@dataclass
class _Sim:
    """A toy run: one lock server with TTL leases, one fenced (or not) resource, nemeses."""

    rng: random.Random
    duration: float
    ttl: float
    fencing: bool
    workload: str
    pause_rate: float
    kill_rate: float
    error_rate: float
    ops: list[Op] = field(default_factory=list)
    now: float = 0.0
    holder: tuple[int, int] | None = None
    expires: float = math.inf  # renewed while the holder runs
    counter: int = 0
    server_paused_until: float = -1.0
    guard: int = 0
    seq: int = 0
    register: int = 0
    sold: dict[int, int] = field(default_factory=dict)
    next_client: int = 0

    def record(
        self, p: int, kind: str, start: float, end: float, result: str, **kw: object
    ) -> None:
        self.ops.append(Op(p, kind, T0 + start, T0 + end, result, **kw))  # type: ignore[arg-type]

    def client(self, c: int) -> Generator[float, None, None]:
        """One client slot: a killed client is replaced by a new one, as the runner does."""
        while self.now < self.duration:
            asked, token = self.now, None
            while token is None and self.now - asked < ACQUIRE_TIMEOUT:
                free = self.holder is None or self.now >= self.expires
                if free and self.now >= self.server_paused_until:
                    self.counter += 1
                    self.holder, self.expires, token = (c, self.counter), math.inf, self.counter
                else:
                    yield self.now + POLL * self.rng.uniform(0.5, 1.5)
            yield self.now + LATENCY
            if token is None:
                self.record(c, "acquire", asked, self.now, "timeout")
                continue
            self.record(c, "acquire", asked, self.now, "ok", token=token)
            killed = yield from self.hold(c, token)
            if killed:
                c, self.next_client = self.next_client, self.next_client + 1

    def hold(self, c: int, token: int) -> Generator[float, None, bool]:
        seen = self.read(token)
        work = self.rng.uniform(0.02, 0.12)
        if self.rng.random() < self.kill_rate:
            yield self.now + work / 2
            detail = (
                f"kill client {c} (token {token}): SIGKILL; replaced by client {self.next_client}"
            )
            self.record(c, "nemesis", self.now, self.now, "info", token=token, detail=detail)
            self.record(c, "crash", self.now, self.now, "info", token=token)
            self.expires = self.now + self.ttl
            yield self.now + 0.3  # the replacement starts
            return True
        if self.rng.random() < self.pause_rate:
            span = self.rng.uniform(1.5, 3.0) * self.ttl
            self.expires, start = self.now + self.ttl, self.now
            yield self.now + span  # frozen, or cut off from the lock server: no renewals
            if self.rng.random() < 0.25:
                detail = f"partition client {c} (token {token}) from the servers for {span:.2f}s"
            else:
                detail = f"pause client {c} (token {token}) for {span:.2f}s: SIGSTOP"
            self.record(c, "nemesis", start, self.now, "info", token=token, detail=detail)
        yield self.now + work
        self.write(c, token, seen)
        yield self.now + 0.003
        if self.holder == (c, token) and self.now < self.expires:
            self.record(c, "release", self.now, self.now + LATENCY, "ok", token=token)
            self.holder = None
        else:
            self.record(c, "lost", self.now, self.now, "info", token=token)
            self.record(c, "release", self.now, self.now + LATENCY, "lost", token=token)
        yield self.now + self.rng.uniform(0.0, 0.05)
        return False

    def read(self, token: int) -> int:
        """The register's value, or the lowest unsold seat; a fenced read raises the guard."""
        if self.fencing:
            self.guard = max(self.guard, token)
        if self.workload == "register":
            return self.register
        return next(n for n in range(1, 10_000) if n not in self.sold)

    def write(self, c: int, token: int, seen: int) -> None:
        key = "register" if self.workload == "register" else f"seat:{seen}"
        at, failed = self.now, self.rng.random() < self.error_rate
        if failed and self.rng.random() < 0.5:  # the connection broke before the commit
            self.record(c, "write", at, at + 0.003, "error", token=token, key=key)
            return
        if self.fencing and token < self.guard:
            self.record(c, "write", at, at + 0.003, "stale", token=token, key=key)
            return
        self.guard, self.seq = max(self.guard, token), self.seq + 1
        if self.workload == "register":
            self.register = seen + 1
        else:
            self.sold[seen] = self.sold.get(seen, 0) + 1
        if failed:  # committed, but the client never heard back: indeterminate
            self.record(c, "write", at, at + 0.003, "error", token=token, key=key)
            return
        value = str(self.seq)
        self.record(c, "write", at, at + 0.003, "accepted", token=token, key=key, value=value)

    def server_nemesis(self) -> Generator[float, None, None]:
        while True:
            yield self.now + self.rng.uniform(2.0, 5.0)
            if self.now >= self.duration:
                return
            if self.rng.random() < 0.5:
                span = self.rng.uniform(0.3, 0.8) * self.ttl
                self.server_paused_until = self.now + span
                start = self.now
                yield self.now + span
                detail = f"pause server redis-7001 for {span:.2f}s: SIGSTOP"
                self.record(-1, "nemesis", start, self.now, "info", detail=detail)
            else:
                detail = "clock of server redis-7001 stepped +1.00s (total +1.00s)"
                self.record(-1, "nemesis", self.now, self.now, "info", detail=detail)


def simulate(
    seed: int = 1,
    *,
    clients: int = 5,
    duration: float = 10.0,
    ttl: float = 0.5,
    fencing: bool = True,
    workload: str = "register",
    pause_rate: float = 0.06,
    kill_rate: float = 0.02,
    error_rate: float = 0.01,
) -> History:
    """A deterministic synthetic history of a check run (clients numbered from 1)."""
    rng = random.Random(seed)
    sim = _Sim(rng, duration, ttl, fencing, workload, pause_rate, kill_rate, error_rate)
    sim.next_client = clients + 1
    runners = [sim.client(c) for c in range(1, clients + 1)] + [sim.server_nemesis()]
    queue = [(sim.rng.uniform(0, 0.05), i) for i in range(len(runners))]
    while queue:
        sim.now, i = heapq.heappop(queue)
        wake = next(runners[i], None)
        if wake is not None:
            heapq.heappush(queue, (wake, i))
    if workload == "register":
        sim.record(
            -1, "read", sim.now, sim.now + LATENCY, "ok", key="register", value=str(sim.register)
        )
    params: dict[str, object] = {
        "workload": workload,
        "url": "redis://***@127.0.0.1:7001",
        "clients": clients,
        "duration": duration,
        "ttl": ttl,
        "nemeses": ["pause", "partition", "kill", "server-pause", "clock"],
        "fencing": fencing,
        "seed": seed,
    }
    return History(sim.ops, params)
