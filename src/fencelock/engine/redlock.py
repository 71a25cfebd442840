"""Redlock over N independent nodes: quorum, validity, and two-phase fencing tokens.

Pure: no I/O, no clock reads; the backend passes in what its nodes answered and
the times it read. One acquisition, as a backend drives it::

    started = clock()
    results = [phase 1 on node i for i in range(n)]        # concurrently, each within
                                                           # reply_timeout(...)
    step = decide_phase_one(results, ttl, started, clock())
    if isinstance(step, Abort):
        release on step.release; return busy_result(step, random)
    replies = {i: phase 2 with step.token on node i for i in step.nodes}
    done = decide_phase_two(step, replies, clock())
    if isinstance(done, Abort):
        release on done.release; return busy_result(done, random)
    return Acquired(done.token)

Node scripts, one atomic step each: phase 1 is ``SET key owner NX PX ttl`` and, if
it set the key, returns the node's counter (:class:`NodeWon`), else the key's PTTL
and owner (:class:`NodeBusy`); phase 2 with ``T = max(counters) + 1`` is "if key ==
owner then counter = max(counter, T)" (``True``), else ``False``. Timeouts and
errors are :class:`NodeError`. Why two phases give unique, increasing tokens:
``docs/redlock-tokens.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

from fencelock.engine.outcomes import Busy
from fencelock.engine.timing import clock_drift, trusted_until
from fencelock.errors import BackendUnavailable, ConfigError

MIN_NODES = 3
# A failed attempt that saw no holder (a split vote, slow or unreachable nodes) retries
# after a random delay in this range, so that competing clients fall out of step.
RETRY_DELAY_MIN = 0.01
RETRY_DELAY_MAX = 0.2

NodeT = TypeVar("NodeT", bound=Hashable)


# -- what one node answers ----------------------------------------------------------


@dataclass(frozen=True)
class NodeWon:
    """Phase 1 set our key on the node; ``counter`` is the node's token counter."""

    counter: int


@dataclass(frozen=True)
class NodeBusy:
    """Phase 1 found another owner's key; it expires in ``remaining`` s (None: no TTL).

    ``owner`` is that key's owner, if the node said (None: unknown).
    """

    remaining: float | None
    owner: str | None = None


@dataclass(frozen=True)
class NodeError:
    """The node did not answer within the timeout, or answered with an error."""

    reason: str = "no reply"


PhaseOneResult = NodeWon | NodeBusy | NodeError
# Phase 2, extend and release: True if the key was still ours (and the script ran),
# False if it was not, NodeError if we do not know.
NodeReply = bool | NodeError


# -- what the backend does next -----------------------------------------------------


class AbortReason(Enum):
    """Why an acquisition stopped; the values read as the end of "not acquired: ..."."""

    BUSY = "held by another owner on too many nodes"
    CONTENDED = "no quorum: other clients took some of the nodes"
    UNREACHABLE = "too many nodes did not answer"
    LOST = "our keys expired or were taken before phase 2 reached them"
    TOO_SLOW = "a quorum answered, but after the validity time ran out"


@dataclass(frozen=True)
class Stamp:
    """Go on to phase 2: write ``token`` on ``nodes``, the nodes won in phase 1."""

    token: int
    nodes: tuple[int, ...]
    n: int
    ttl: float
    started: float


@dataclass(frozen=True)
class Confirmed:
    """The lease is ours: ``token`` is stamped on ``nodes``, a quorum, in time."""

    token: int
    nodes: tuple[int, ...]
    trusted_until: float


@dataclass(frozen=True)
class Abort:
    """Not acquired: compare-and-delete our key on ``release`` (every node), then retry.

    ``unreachable`` lists the nodes that gave no answer (for the error message);
    ``retry_after`` is when a quorum could next be free, if the busy nodes tell.
    """

    reason: AbortReason
    release: tuple[int, ...]
    unreachable: tuple[int, ...]
    retry_after: float | None = None


# -- arithmetic ---------------------------------------------------------------------


def quorum(n: int) -> int:
    """A majority of ``n`` nodes: any two majorities share at least one node."""
    return n // 2 + 1


def validate_node_count(n: object) -> int:
    """Return ``n`` if Redlock can run on that many nodes, else raise ConfigError."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise ConfigError(f"redlock node count must be an int, not {type(n).__name__}")
    if n < MIN_NODES:
        raise ConfigError(
            f"redlock needs at least {MIN_NODES} independent nodes, got {n}: with fewer, "
            "one node down stops every lock (for a single server use redis://)"
        )
    return n


def validate_nodes(nodes: Sequence[NodeT]) -> tuple[NodeT, ...]:
    """Return ``nodes`` as a tuple if there are enough and none is listed twice.

    A node listed twice would vote twice, and two majorities might then share no node.
    """
    validate_node_count(len(nodes))
    seen: set[NodeT] = set()
    for node in nodes:
        if node in seen:
            raise ConfigError(f"redlock node {node!r} is listed twice; each node votes once")
        seen.add(node)
    return tuple(nodes)


def validity(ttl: float, started: float, now: float) -> float:
    """Seconds the lease is still safe to act on, measured from before the first request.

    The TTL minus the time elapsed since ``started`` minus the clock-drift allowance.
    """
    return ttl - (now - started) - clock_drift(ttl)


def reply_timeout(ttl: float, *, started: float, now: float, cap: float) -> float:
    """How long to wait for a node's reply: at most ``cap``, never past the validity."""
    return max(0.0, min(cap, validity(ttl, started, now)))


def phase_two_token(counters: Iterable[int]) -> int:
    """The token of an acquisition: one more than the largest counter read in phase 1."""
    return max(counters) + 1


def release_nodes(n: int) -> tuple[int, ...]:
    """Which nodes to release: all of them, since a node that timed out may have our key."""
    return tuple(range(n))


def retry_delay(
    random: Callable[[], float], low: float = RETRY_DELAY_MIN, high: float = RETRY_DELAY_MAX
) -> float:
    """A random pause in [low, high) before the next try; ``random`` returns [0, 1)."""
    return low + (high - low) * random()


def retry_after(results: Sequence[PhaseOneResult]) -> float | None:
    """When enough busy nodes will have expired for a quorum to be free, if known.

    Nodes not busy count as free; of the busy ones, the ``quorum - free`` soonest to
    expire must go. None when no busy node stands in the way, or their TTLs are unknown.
    """
    n = len(results)
    busy = [r.remaining for r in results if isinstance(r, NodeBusy)]
    must_expire = quorum(n) - (n - len(busy))
    known = sorted(max(r, 0.0) for r in busy if r is not None)
    if must_expire <= 0 or len(known) < must_expire:
        return None
    return known[must_expire - 1]


def _busy_owners(results: Sequence[PhaseOneResult]) -> dict[str | None, int]:
    owners: dict[str | None, int] = {}
    for r in results:
        if isinstance(r, NodeBusy):
            owners[r.owner] = owners.get(r.owner, 0) + 1
    return owners


def may_be_held(results: Sequence[PhaseOneResult]) -> bool:
    """False only if no single owner can hold a quorum: the busy nodes are a split vote.

    Each busy node names its owner; one owner's busy nodes, with every node that did
    not answer, would have to make a quorum. Rivals that split the nodes all give up
    and release quietly, so none of them publishes a release to wait for.
    """
    owners = _busy_owners(results)
    if None in owners:
        return True  # a busy node that did not say whose key it has
    silent = sum(isinstance(r, NodeError) for r in results)
    return max(owners.values(), default=0) + silent >= quorum(len(results))


def held_by_one(results: Sequence[PhaseOneResult]) -> bool:
    """True if one named owner's key is on a quorum of the nodes: held, whatever the rest say."""
    owners = _busy_owners(results)
    owners.pop(None, None)
    return max(owners.values(), default=0) >= quorum(len(results))


def busy_result(abort: Abort, random: Callable[[], float]) -> Busy:
    """What ``try_acquire`` returns after an abort: when to retry, or a random delay."""
    if abort.retry_after is not None:
        return Busy(abort.retry_after)
    return Busy(retry_delay(random))


# -- decisions ----------------------------------------------------------------------


def decide_phase_one(
    results: Sequence[PhaseOneResult], ttl: float, started: float, now: float
) -> Stamp | Abort:
    """After phase 1 (``results[i]`` from node i): stamp a token, or give up.

    Go on when we won a quorum and the validity (from ``started``, before the first
    request, to ``now``, after the last reply) is still positive.
    """
    n = validate_node_count(len(results))
    won = {i: r.counter for i, r in enumerate(results) if isinstance(r, NodeWon)}
    if len(won) >= quorum(n) and validity(ttl, started, now) > 0:
        return Stamp(phase_two_token(won.values()), tuple(won), n, ttl, started)
    failed = tuple(i for i, r in enumerate(results) if isinstance(r, NodeError))
    busy = sum(isinstance(r, NodeBusy) for r in results)
    held = may_be_held(results)
    reason = _phase_one_reason(n=n, won=len(won), busy=busy, failed=len(failed), held=held)
    # A split vote retries after a random delay: waiting for the rivals' keys to
    # expire would wait a TTL for keys their owners are deleting.
    return Abort(reason, release_nodes(n), failed, retry_after(results) if held else None)


def _phase_one_reason(*, n: int, won: int, busy: int, failed: int, held: bool) -> AbortReason:
    spare = n - quorum(n)  # how many nodes a quorum can do without
    if won >= quorum(n):
        return AbortReason.TOO_SLOW
    if busy > spare and held:
        return AbortReason.BUSY
    if failed > spare:
        return AbortReason.UNREACHABLE
    return AbortReason.CONTENDED


def decide_phase_two(
    stamp: Stamp, results: Mapping[int, NodeReply], now: float
) -> Confirmed | Abort:
    """After phase 2 (``results[i]`` from each node i of ``stamp.nodes``): held or not.

    Held when the token was stamped on a quorum (replies from nodes outside
    ``stamp.nodes`` do not count: their counters were not read) within the validity.
    """
    stamped = tuple(i for i in stamp.nodes if results.get(i) is True)
    q = quorum(stamp.n)
    if len(stamped) >= q and validity(stamp.ttl, stamp.started, now) > 0:
        return Confirmed(stamp.token, stamped, trusted_until(stamp.started, stamp.ttl))
    failed = tuple(i for i in stamp.nodes if not isinstance(results.get(i), bool))
    if len(stamped) >= q:
        reason = AbortReason.TOO_SLOW
    elif any(results.get(i) is False for i in stamp.nodes):
        reason = AbortReason.LOST
    else:
        reason = AbortReason.UNREACHABLE
    return Abort(reason, release_nodes(stamp.n), failed)


def decide_extend(
    results: Sequence[NodeReply], *, ttl: float, started: float, now: float, until: float
) -> float | None:
    """After a compare-and-extend to ``ttl`` on every node: the new trust bound, or None.

    It held when a quorum extended, the replies came before the lease's current
    bound ``until`` and the new validity (from ``started``, before the requests)
    is positive. The new bound replaces the old one even if it is sooner.
    """
    n = validate_node_count(len(results))
    extended = sum(r is True for r in results)
    if extended >= quorum(n) and now < until and validity(ttl, started, now) > 0:
        return trusted_until(started, ttl)
    return None


class NotExtended(Enum):
    """Why :func:`decide_extend` gave no new bound; the values end "not extended: ..."."""

    LOST = "too few nodes still had our key to make a quorum"
    UNREACHABLE = "too many nodes did not answer to tell"
    TOO_SLOW = "a quorum extended it, but answered after the lease's safe time"


def why_not_extended(results: Sequence[NodeReply]) -> NotExtended:
    """For a compare-and-extend that :func:`decide_extend` refused: lost, unknown, or late."""
    n = len(results)
    if sum(r is True for r in results) >= quorum(n):
        return NotExtended.TOO_SLOW
    if sum(r is False for r in results) > n - quorum(n):
        return NotExtended.LOST  # even the nodes that did not answer cannot make a quorum
    return NotExtended.UNREACHABLE


def decide_release(results: Sequence[NodeReply]) -> bool | None:
    """After a compare-and-delete on every node: released (True), not ours (False), or unknown.

    True when a quorum had our key, or when a quorum answered and our key may have
    been on a quorum (the nodes that had it with those that did not answer): it is
    now gone from a quorum, so nobody can take it for ours. False when too few nodes
    had it, even counting every node that did not answer. None when fewer than a
    quorum answered: the release is not confirmed, and our key lingers on the
    others until it expires.
    """
    n, q = len(results), quorum(len(results))
    held = sum(r is True for r in results)
    answered = sum(isinstance(r, bool) for r in results)
    if held >= q:
        return True
    if answered < q:
        return None
    return held + (n - answered) >= q


def silent_could_make_a_holder(agreeing: Iterable[Sequence[int]], silent: int, quorum: int) -> bool:
    """Whether the nodes that did not answer could, with those that name one owner (the
    groups of ``agreeing``), make that owner a quorum."""
    return any(len(group) + silent >= quorum for group in agreeing)


# One node's answer on a name: its key's owner (or None), PTTL in ms, token (or None).
NodeView = tuple[str | None, int | str | bytes, int | str | bytes | None]


def quorum_view(
    name: str, answers: Sequence[NodeView], quorum: int, nodes: int
) -> tuple[str | None, int, float | None] | None:
    """What a quorum of nodes says of ``name``: (holder, token, seconds left) from each
    answering node's key owner, PTTL and token; None if no node knows the name. The
    holder is the owner a quorum agrees on; its time left, the quorum's shortest.

    Raises :class:`BackendUnavailable` when the nodes that did not answer could make an
    owner a quorum: "not held" would then be a guess that lets a second holder in."""
    owners: dict[str, list[int]] = {}
    tokens = [int(token) for _, _, token in answers if token is not None]
    for owner, pttl, _ in answers:
        if owner is not None:
            owners.setdefault(owner, []).append(int(pttl))
    if not owners and not tokens:
        return None
    holder = next((o for o, ttls in owners.items() if len(ttls) >= quorum), None)
    silent = nodes - len(answers)
    if holder is None and silent_could_make_a_holder(owners.values(), silent, quorum):
        most = max(len(ttls) for ttls in owners.values())
        raise BackendUnavailable(
            f"redlock: cannot tell whether {name!r} is held: {most} of the {len(answers)} "
            f"nodes that answered say so, and {silent} did not answer"
        )
    remaining = None
    if holder is not None:
        remaining = sorted(owners[holder], reverse=True)[quorum - 1] / 1000
    return holder, max(tokens, default=0), remaining
