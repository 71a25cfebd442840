"""What one attempt to take a lease, or one renewal, can come to (engine and backends)."""

from __future__ import annotations

from dataclasses import dataclass

from fencelock.engine.session import SharedSession


@dataclass(frozen=True)
class Acquired:
    """The lease is ours; ``token`` is greater than every token issued before for the name.

    ``owner`` is set when the backend stored a different owner value than the one
    the attempt began with (Redlock uses a fresh one per try). ``session`` is set by
    a backend whose leases live in a session shared by many (etcd's lease, ZooKeeper's
    session): the session pushes its loss into every lease held in it at once.
    ``as_of``: the server's grant counts from this clock reading, taken before the
    try (the shared session's last keepalive), not from when the try was sent.
    """

    token: int
    owner: str | None = None
    session: SharedSession | None = None
    as_of: float | None = None


@dataclass(frozen=True)
class Busy:
    """Someone else holds the lease.

    ``retry_after``: the holder's remaining TTL, when known. ``notified``: the
    attempt is queued and its ``wait`` returns when its turn may have come (its
    predecessor left); the acquire loop then waits for that alone, never on a timer,
    except for a long liveness bound against a notice that never comes.
    """

    retry_after: float | None = None
    notified: bool = False


@dataclass(frozen=True)
class RenewedAsOf:
    """A renewal the server granted as of ``at``, a clock reading taken before the
    request: a session renewed once for many leases grants each of them from when
    that one keepalive was sent, not from when each lease asked."""

    at: float


AttemptResult = Acquired | Busy
