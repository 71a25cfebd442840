"""When to renew a lease, when to retry a failed renewal, when to call it lost."""

from __future__ import annotations

# A failed renewal is retried this often (as a fraction of the TTL) ...
RETRY_FRACTION = 0.1
# ... but never more often than this.
MIN_RETRY = 0.02


def renew_at(started: float, ttl: float) -> float:
    """Renew at about a third of the TTL: two more tries fit before it runs out."""
    return started + ttl / 3


def retry_at(now: float, ttl: float, trusted_until: float) -> float:
    """After a failed renewal: soon, but not past the end of the safe time."""
    return min(now + max(ttl * RETRY_FRACTION, MIN_RETRY), trusted_until)


def next_check(started: float, ttl: float, trusted_until: float, renew: bool) -> float:
    """The next time the renewer must look at a lease granted or renewed at ``started``."""
    return renew_at(started, ttl) if renew else trusted_until
