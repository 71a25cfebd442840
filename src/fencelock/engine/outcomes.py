"""What one attempt to take a lease can return (shared by engine and backends)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Acquired:
    """The lease is ours; ``token`` is greater than every token issued before for the name.

    ``owner`` is set when the backend stored a different owner value than the one
    the attempt began with (Redlock uses a fresh one per try).
    """

    token: int
    owner: str | None = None


@dataclass(frozen=True)
class Busy:
    """Someone else holds the lease; ``retry_after`` is its remaining TTL when known."""

    retry_after: float | None = None


AttemptResult = Acquired | Busy
