"""The checker: reads a :class:`~fencelock.check.history.History` and says whether the run was safe.

Pure functions, no I/O. Three questions are asked of a history:

1. **Overlaps.** Each successful acquire starts a *belief interval*: from the
   acquire's end until the client's next ``release`` starts, it notices the lease
   was ``lost``, it is killed (``crash``), or the history ends. Two processes
   believing at once is an overlap. Pauses longer than the TTL make overlaps
   unavoidable, so they are *reported*, not failed: fencing makes them harmless.
2. **Token order.** Accepted writes, in the order the resource committed them
   (their ``value``, a commit sequence number), must carry strictly increasing
   tokens, except that one lease may write several keys with its own token.
   The whole resource is one fence scope.
3. **The workload's invariant.** register: the final value equals the number of
   accepted writes (fewer means lost updates); seats: no seat accepted twice.

A run is ``ok`` when there is no token-order violation and the invariant holds.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

from fencelock.check.history import History, Op

REGISTER_KEY = "register"
Fate = Literal["released", "lost", "crashed", "open"]


@dataclass(frozen=True)
class LeaseInterval:
    """One successful acquisition and the interval its client believed it held the lock."""

    process: int
    token: int
    asked: float  # the acquire's start: the client began waiting
    start: float  # the acquire's end: the client believes from here ...
    end: float  # ... to here
    fate: Fate  # what ended the belief ("open": the history ended first)

    @property
    def duration(self) -> float:
        """Seconds of belief."""
        return self.end - self.start


@dataclass(frozen=True, kw_only=True)
class Overlap:
    """Two processes believed they held the lock at once, from ``start`` to ``end``.

    ``process_a`` holds the lease that began first.
    """

    process_a: int
    process_b: int
    token_a: int
    token_b: int
    start: float
    end: float

    @property
    def duration(self) -> float:
        """Seconds both believed."""
        return self.end - self.start

    def to_dict(self) -> dict[str, object]:
        """JSON-ready fields, with the duration."""
        return {**asdict(self), "duration": self.duration}


@dataclass(frozen=True)
class TokenViolation:
    """``op`` was accepted after ``earlier`` (by commit order) yet its token is not greater."""

    op: Op
    earlier: Op

    def to_dict(self) -> dict[str, object]:
        """JSON-ready fields: both operations in full."""
        return {"op": asdict(self.op), "earlier": asdict(self.earlier)}


@dataclass(frozen=True)
class RegisterCheck:
    """The register's final value against the accepted increments.

    Writes that ended in ``error`` and clients killed while holding a lease may
    have committed without being recorded as accepted, so the final value may
    exceed the accepted count by up to ``indeterminate``; it may never fall short.
    """

    final: int | None  # None: the history has no final read
    accepted: int
    indeterminate: int

    @property
    def lost_updates(self) -> int:
        """Accepted increments missing from the final value."""
        return 0 if self.final is None else max(self.accepted - self.final, 0)

    @property
    def holds(self) -> bool:
        """The final value accounts for every accepted write and nothing unexplained."""
        if self.final is None:
            return False
        return self.accepted <= self.final <= self.accepted + self.indeterminate

    def explain(self) -> str:
        """One line for humans."""
        if self.final is None:
            return "register: no final read in the history, the invariant cannot be checked"
        if self.lost_updates:
            return (
                f"register: final value {self.final} < {self.accepted} accepted writes: "
                f"{self.lost_updates} lost update{_s(self.lost_updates)}"
            )
        if not self.holds:
            return (
                f"register: final value {self.final} > {self.accepted} accepted writes "
                f"+ {self.indeterminate} indeterminate: unexplained writes"
            )
        extra = self.final - self.accepted
        note = f" (+{extra} indeterminate)" if extra else ""
        return f"register: final value {self.final} = {self.accepted} accepted writes{note}"

    def to_dict(self) -> dict[str, object]:
        """JSON-ready fields."""
        return {
            "workload": "register",
            "holds": self.holds,
            "final": self.final,
            "accepted": self.accepted,
            "indeterminate": self.indeterminate,
            "lost_updates": self.lost_updates,
            "explain": self.explain(),
        }


@dataclass(frozen=True)
class DoubleSale:
    """A seat accepted more than once: every accepted write of it, in commit order."""

    key: str
    writes: tuple[Op, ...]


@dataclass(frozen=True)
class SeatsCheck:
    """No seat may be sold (accepted) twice.

    ``unrecorded`` lists seats the resource itself reports sold twice (the runner's
    final read) although the history shows fewer than two accepted sales: a seller
    killed between its commit and its record.
    """

    sold: int  # distinct seats sold
    double_sales: tuple[DoubleSale, ...]
    unrecorded: tuple[str, ...] = ()

    @property
    def holds(self) -> bool:
        """No seat was sold twice."""
        return not self.double_sales and not self.unrecorded

    def explain(self) -> str:
        """One line for humans."""
        if self.holds:
            return f"seats: {self.sold} seats sold, none twice"
        keys = [d.key for d in self.double_sales] + list(self.unrecorded)
        shown = ", ".join(keys[:6]) + (", …" if len(keys) > 6 else "")
        n = len(keys)
        note = (
            f"; {len(self.unrecorded)} seen only by the resource's final read"
            if self.unrecorded
            else ""
        )
        return f"seats: {n} seat{_s(n)} sold twice ({shown}){note}"

    def to_dict(self) -> dict[str, object]:
        """JSON-ready fields."""
        return {
            "workload": "seats",
            "holds": self.holds,
            "sold": self.sold,
            "double_sales": [
                {"key": d.key, "writes": [asdict(w) for w in d.writes]} for d in self.double_sales
            ],
            "unrecorded": list(self.unrecorded),
            "explain": self.explain(),
        }


@dataclass(frozen=True)
class CapacityCheck:
    """A semaphore's resource: never more than ``permits`` holders inside at once.

    Each holder, on entering, counts who is inside in the same transaction; the
    resource logs every entry that found ``permits`` or more already there (a holder
    the harness killed leaves at once: the runner takes it out).
    """

    permits: int | None
    entries: int
    crowded: tuple[str, ...]

    @property
    def holds(self) -> bool:
        """Nobody entered a full pool (and the final read was there to say so)."""
        return self.permits is not None and not self.crowded

    def explain(self) -> str:
        """One line for humans."""
        if self.permits is None:
            return "semaphore: no final read in the history, the invariant cannot be checked"
        if self.holds:
            return (
                f"semaphore: {self.entries} entries, never more than {self.permits} "
                "holders inside at once"
            )
        n = len(self.crowded)
        shown = "; ".join(self.crowded[:3]) + ("; …" if n > 3 else "")
        return f"semaphore: {n} entr{'y' if n == 1 else 'ies'} into a full pool ({shown})"

    def to_dict(self) -> dict[str, object]:
        """JSON-ready fields."""
        return {
            "workload": "semaphore",
            "holds": self.holds,
            "permits": self.permits,
            "entries": self.entries,
            "crowded": list(self.crowded),
            "explain": self.explain(),
        }


@dataclass(frozen=True)
class BarrierCheck:
    """A barrier's resource: no party passes a round before every party has arrived.

    Each party records its arrival before it arrives; on passing it counts the round's
    recorded arrivals in the transaction that records the pass, and the resource logs
    every pass that counted fewer than ``parties``.
    """

    parties: int | None
    passes: int
    rounds: int
    early: tuple[str, ...]

    @property
    def holds(self) -> bool:
        """Nobody passed early (and the final read was there to say so)."""
        return self.parties is not None and not self.early

    def explain(self) -> str:
        """One line for humans."""
        if self.parties is None:
            return "barrier: no final read in the history, the invariant cannot be checked"
        if self.holds:
            return (
                f"barrier: {self.passes} passes through {self.rounds} rounds, none before "
                f"all {self.parties} parties had arrived"
            )
        n = len(self.early)
        shown = "; ".join(self.early[:3]) + ("; …" if n > 3 else "")
        return f"barrier: {n} pass{'' if n == 1 else 'es'} before all parties arrived ({shown})"

    def to_dict(self) -> dict[str, object]:
        """JSON-ready fields."""
        return {
            "workload": "barrier",
            "holds": self.holds,
            "parties": self.parties,
            "passes": self.passes,
            "rounds": self.rounds,
            "early": list(self.early),
            "explain": self.explain(),
        }


Invariant = RegisterCheck | SeatsCheck | CapacityCheck | BarrierCheck


@dataclass(frozen=True, kw_only=True)
class Counts:
    """How many of each thing happened in the run."""

    acquisitions: int
    acquire_timeouts: int
    accepted_writes: int
    stale_writes: int
    errors: int
    leases_lost: int
    crashes: int
    faults: int


@dataclass(frozen=True)
class CheckResult:
    """Everything :func:`check` found; ``ok`` is the verdict."""

    workload: str
    leases: tuple[LeaseInterval, ...]
    overlaps: tuple[Overlap, ...]
    token_violations: tuple[TokenViolation, ...]
    invariant: Invariant
    counts: Counts
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """No token-order violation and the invariant holds (overlaps alone are not failures)."""
        return not self.token_violations and self.invariant.holds

    @property
    def overlap_count(self) -> int:
        """Number of pairwise overlaps."""
        return len(self.overlaps)

    @property
    def total_overlap_seconds(self) -> float:
        """Sum of the pairwise overlaps' durations."""
        return sum(o.duration for o in self.overlaps)

    @property
    def longest_overlap_seconds(self) -> float:
        """The longest time two clients both believed they held the lock (0 if never)."""
        return max((o.duration for o in self.overlaps), default=0.0)

    def violating_writes(self) -> list[Op]:
        """Accepted writes that broke the rules: token-order violations and repeat sales."""
        bad = [v.op for v in self.token_violations]
        if isinstance(self.invariant, SeatsCheck):
            bad += [w for d in self.invariant.double_sales for w in d.writes[1:]]
        return list(dict.fromkeys(bad))

    def reasons(self) -> list[str]:
        """Why the run failed (empty when ``ok``)."""
        out = []
        if self.token_violations:
            n = len(self.token_violations)
            v = self.token_violations[0]
            out.append(
                f"{n} token-order violation{_s(n)}: e.g. token {v.op.token} (client "
                f"{v.op.process}) accepted after token {v.earlier.token} "
                f"(client {v.earlier.process})"
            )
        if not self.invariant.holds:
            out.append(self.invariant.explain())
        return out

    def summary_lines(self) -> list[str]:
        """A few short lines for humans: verdict, why, overlaps, counts."""
        c = self.counts
        verdict = "PASS" if self.ok else "FAIL"
        lines = [f"{verdict}: {self.workload} workload"]
        lines += [f"  {r}" for r in self.reasons()]
        if self.ok:
            lines.append(f"  tokens in commit order; {self.invariant.explain()}")
        if self.overlaps:
            harmless = " (harmless: no stale write got through)" if self.ok else ""
            lines.append(
                f"{self.overlap_count} overlapping lease pair{_s(self.overlap_count)}, "
                f"{seconds(self.total_overlap_seconds)} in total, the longest "
                f"{seconds(self.longest_overlap_seconds)}{harmless}"
            )
        else:
            lines.append("no overlapping leases")
        lines.append(
            f"{c.acquisitions} acquisitions ({c.acquire_timeouts} timed out), "
            f"{c.accepted_writes} writes accepted, {c.stale_writes} stale rejected, "
            f"{c.errors} errors"
        )
        lines.append(
            f"{c.leases_lost} leases lost, {c.crashes} crashes, {c.faults} faults injected"
        )
        lines += [f"warning: {w}" for w in self.warnings]
        return lines

    def to_dict(self) -> dict[str, object]:
        """JSON-ready: verdict, reasons, counts, overlaps, violations and invariant."""
        return {
            "ok": self.ok,
            "workload": self.workload,
            "reasons": self.reasons(),
            "counts": asdict(self.counts),
            "leases": len(self.leases),
            "overlap_count": self.overlap_count,
            "total_overlap_seconds": self.total_overlap_seconds,
            "longest_overlap_seconds": self.longest_overlap_seconds,
            "overlaps": [o.to_dict() for o in self.overlaps],
            "token_violations": [v.to_dict() for v in self.token_violations],
            "invariant": self.invariant.to_dict(),
            "warnings": list(self.warnings),
        }


def check(history: History) -> CheckResult:
    """Check a whole history: overlaps, token order, the workload's invariant, counts."""
    ops = history.ops
    held = leases(history)
    accepted = [op for op in ops if op.kind == "write" and op.result == "accepted"]
    ordered, warnings = commit_order(accepted)
    workload = workload_of(history)
    invariant: Invariant
    # a semaphore's holders overlap by design, a barrier's parties hold nothing: no
    # overlap or token order to check
    shared = workload in ("semaphore", "barrier")
    if workload == "seats":
        invariant = seats_check(ordered, ops)
    elif workload == "barrier":
        invariant = barrier_check(ops)
    elif shared:
        invariant = capacity_check(ops)
    else:
        invariant = register_check(ops, len(accepted), held)
    return CheckResult(
        workload=workload,
        leases=tuple(held),
        overlaps=() if shared else tuple(overlaps(held)),
        token_violations=() if shared else tuple(token_violations(ordered)),
        invariant=invariant,
        counts=counts(ops, held),
        warnings=tuple(warnings),
    )


def workload_of(history: History) -> str:
    """``params["workload"]``, else guessed from the keys written."""
    named = history.params.get("workload")
    if isinstance(named, str):
        return named
    seats = any((op.key or "").startswith("seat:") for op in history.of_kind("write"))
    return "seats" if seats else "register"


def leases(history: History) -> list[LeaseInterval]:
    """Every successful acquire with its belief interval, in order of acquisition."""
    by_process: dict[int, list[Op]] = {}
    for op in history.ops:
        by_process.setdefault(op.process, []).append(op)
    horizon = max((op.end for op in history.ops), default=0.0)
    out = []
    for op in history.ops:
        if op.kind == "acquire" and op.result == "ok" and op.token is not None:
            end, fate = _belief_end(op, op.token, by_process[op.process], horizon)
            out.append(LeaseInterval(op.process, op.token, op.start, op.end, end, fate))
    return sorted(out, key=lambda lease: (lease.start, lease.process))


def _belief_end(acquire: Op, token: int, mine: Sequence[Op], horizon: float) -> tuple[float, Fate]:
    """The first release, lost notice or crash of this lease after its acquire ended.

    ``mine`` is the process's operations sorted by start, so the first match is the earliest.
    """
    for op in mine:
        if op is acquire or op.start < acquire.end:
            continue
        same_lease = op.token is None or op.token == token
        if op.kind == "release" and same_lease:
            return op.start, "lost" if op.result == "lost" else "released"
        if op.kind == "lost" and same_lease:
            return op.start, "lost"
        if op.kind == "crash":
            return op.start, "crashed"
    return max(horizon, acquire.end), "open"


def overlaps(held: Iterable[LeaseInterval]) -> list[Overlap]:
    """Every pair of different processes' belief intervals that intersect for a positive time.

    Intervals that merely touch (one ends exactly when the other begins) do not overlap.
    """
    out = []
    active: list[LeaseInterval] = []
    for lease in sorted(held, key=lambda le: (le.start, le.end)):
        active = [a for a in active if a.end > lease.start]
        for a in active:
            end = min(a.end, lease.end)
            if a.process != lease.process and end > lease.start:
                out.append(
                    Overlap(
                        process_a=a.process,
                        process_b=lease.process,
                        token_a=a.token,
                        token_b=lease.token,
                        start=lease.start,
                        end=end,
                    )
                )
        active.append(lease)
    return out


def commit_order(accepted: Iterable[Op]) -> tuple[list[Op], list[str]]:
    """Accepted writes sorted by their commit sequence number (``value``).

    Writes without a token or a numeric ``value`` cannot be placed; they are
    left out, with a warning each.
    """
    placed: list[tuple[int, Op]] = []
    warnings = []
    for op in accepted:
        seq = _int(op.value)
        if seq is None or op.token is None:
            warnings.append(
                f"accepted write of client {op.process} at {op.start:.3f} has no "
                f"{'token' if op.token is None else 'commit sequence number'}: not ordered"
            )
            continue
        placed.append((seq, op))
    placed.sort(key=lambda p: p[0])
    return [op for _, op in placed], warnings


def token_violations(ordered: Sequence[Op]) -> list[TokenViolation]:
    """Writes (in commit order) whose token is not above every earlier lease's token.

    ``earlier`` is the write with the highest token among earlier writes of *other*
    leases (a lease is a process and its token).
    """
    out = []
    top: list[Op] = []  # the highest-token write of each of the (at most) two best leases
    for op in ordered:
        rival = next((t for t in top if _lease(t) != _lease(op)), None)
        if rival is not None and _token(op) <= _token(rival):
            out.append(TokenViolation(op, rival))
        mine = [t for t in top if _lease(t) == _lease(op)]
        if not mine or _token(op) > _token(mine[0]):
            top = [t for t in top if _lease(t) != _lease(op)] + [op]
        top = sorted(top, key=_token, reverse=True)[:2]
    return out


def register_check(
    ops: Sequence[Op], accepted: int, held: Sequence[LeaseInterval]
) -> RegisterCheck:
    """The last final read of the register against the accepted writes."""
    reads = [
        op
        for op in ops
        if op.kind == "read" and op.key in (REGISTER_KEY, None) and op.result == "ok"
    ]
    final = _int(reads[-1].value) if reads else None
    errors = sum(1 for op in ops if op.kind == "write" and op.result == "error")
    crashed = sum(1 for lease in held if lease.fate == "crashed")
    return RegisterCheck(final, accepted, errors + crashed)


def seats_check(ordered: Sequence[Op], ops: Sequence[Op] = ()) -> SeatsCheck:
    """Group accepted writes (in commit order) by seat; list the seats sold more than once.

    A final read whose value is the resource's summary (JSON with ``sold_twice``, a
    list of seat numbers) adds the seats it names that the history does not show twice.
    """
    by_key: dict[str, list[Op]] = {}
    for op in ordered:
        by_key.setdefault(op.key or "", []).append(op)
    doubles = tuple(DoubleSale(k, tuple(ws)) for k, ws in by_key.items() if len(ws) > 1)
    reported = _reported_double_sales(ops)
    shown = {d.key for d in doubles}
    return SeatsCheck(len(by_key), doubles, tuple(k for k in reported if k not in shown))


def _final_summary(ops: Sequence[Op]) -> object:
    """The run's final read, a JSON summary of the resource (None if absent)."""
    reads = [op for op in ops if op.kind == "read" and op.result == "ok" and op.value]
    try:
        return json.loads(reads[-1].value or "") if reads else None
    except ValueError:
        return None


def barrier_check(ops: Sequence[Op]) -> BarrierCheck:
    """The resource's own account of a barrier run (its final read)."""
    summary = _final_summary(ops)
    if not isinstance(summary, dict):
        return BarrierCheck(None, 0, 0, ())
    early = summary.get("early")
    return BarrierCheck(
        _int(str(summary.get("parties"))),
        _int(str(summary.get("passes"))) or 0,
        _int(str(summary.get("rounds"))) or 0,
        tuple(str(e) for e in early) if isinstance(early, list) else (),
    )


def capacity_check(ops: Sequence[Op]) -> CapacityCheck:
    """The resource's own account of a semaphore run (its final read)."""
    summary = _final_summary(ops)
    if not isinstance(summary, dict):
        return CapacityCheck(None, 0, ())
    crowded = summary.get("crowded")
    return CapacityCheck(
        _int(str(summary.get("permits"))),
        _int(str(summary.get("entries"))) or 0,
        tuple(str(c) for c in crowded) if isinstance(crowded, list) else (),
    )


def _reported_double_sales(ops: Sequence[Op]) -> list[str]:
    reads = [op for op in ops if op.kind == "read" and op.result == "ok" and op.value]
    if not reads:
        return []
    try:
        summary = json.loads(reads[-1].value or "")
    except ValueError:
        return []
    twice = summary.get("sold_twice") if isinstance(summary, dict) else None
    if not isinstance(twice, list):
        return []
    return [f"seat:{n}" for n in twice if isinstance(n, int)]


def counts(ops: Sequence[Op], held: Sequence[LeaseInterval]) -> Counts:
    """Tally the history."""
    tally = Counter((op.kind, op.result) for op in ops)
    return Counts(
        acquisitions=tally["acquire", "ok"],
        acquire_timeouts=tally["acquire", "timeout"],
        accepted_writes=tally["write", "accepted"],
        stale_writes=tally["write", "stale"],
        errors=sum(n for (_, result), n in tally.items() if result == "error"),
        leases_lost=sum(1 for lease in held if lease.fate == "lost"),
        crashes=sum(n for (kind, _), n in tally.items() if kind == "crash"),
        faults=sum(n for (kind, _), n in tally.items() if kind == "nemesis"),
    )


def seconds(value: float) -> str:
    """``2.35s``, or ``1.3ms`` below a tenth of a second."""
    return f"{value:.2f}s" if value >= 0.1 or value == 0 else f"{value * 1000:.1f}ms"


def _lease(op: Op) -> tuple[int, int | None]:
    return op.process, op.token


def _token(op: Op) -> int:
    return op.token if op.token is not None else -1


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _s(n: int) -> str:
    return "" if n == 1 else "s"
