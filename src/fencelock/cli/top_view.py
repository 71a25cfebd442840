"""What ``fencelock top`` shows, without I/O: each refresh's held locks and, when given,
the processes' metrics, turned into rows and per-prefix rates between two refreshes.

A lease's *held for* is counted from when its holder took it where the backend records
that (:attr:`LockInfo.since`); elsewhere from the first refresh that saw it (same owner,
same token): a lower bound, marked ``≥`` until the lease is seen from its start (a new
token appearing between two refreshes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fencelock.backends.base import LockInfo
from fencelock.metrics.registry import PrefixMetrics


@dataclass(frozen=True)
class Row:
    name: str
    holder: str  # host:PID, or the first 8 hex of the owner value of a holder that says nothing
    token: int
    held_for: float
    since_start: bool  # seen from its grant (else held_for is a lower bound)
    remaining: float | None
    waiters: int | None


@dataclass(frozen=True)
class Rates:
    prefix: str
    acquisitions_per_s: float
    contention: float | None  # of the grants between the two refreshes
    rejections: int  # in all
    waiting: int


@dataclass
class TopState:
    """What the view remembers from one refresh to the next."""

    first_seen: dict[tuple[str, str, int], tuple[float, bool]] = field(default_factory=dict)
    refreshed_at: float | None = None
    last_metrics: dict[str, PrefixMetrics] = field(default_factory=dict)
    metrics_at: float | None = None

    def rows(self, infos: list[LockInfo], now: float, wall: float) -> list[Row]:
        """The held locks, longest held first; forgets leases no longer held. ``now`` is
        the refresh's monotonic time, ``wall`` its Unix time."""
        seen: dict[tuple[str, str, int], tuple[float, bool]] = {}
        rows: list[Row] = []
        for info in infos:
            if not info.held or info.owner is None:
                continue
            key = (info.name, info.owner, info.token)
            since, from_start = self.first_seen.get(key, (now, self.refreshed_at is not None))
            seen[key] = (since, from_start)
            held_for, from_start = (
                (now - since, from_start) if info.since is None else (wall - info.since, True)
            )
            holder = info.holder
            rows.append(
                Row(
                    info.name,
                    info.owner[:8] if holder is None else holder.short(),
                    info.token,
                    max(held_for, 0.0),
                    from_start,
                    info.remaining,
                    info.waiters,
                )
            )
        self.first_seen, self.refreshed_at = seen, now
        return sorted(rows, key=lambda row: (-row.held_for, row.name))

    def rates(self, metrics: dict[str, PrefixMetrics], now: float) -> list[Rates]:
        """Per prefix, since the previous scrape (the first scrape gives no rates yet)."""
        before, then = self.last_metrics, self.metrics_at
        self.last_metrics, self.metrics_at = metrics, now
        found: list[Rates] = []
        for prefix in sorted(metrics):
            m = metrics[prefix]
            old = before.get(prefix)
            if old is None or then is None or now <= then:
                found.append(Rates(prefix, 0.0, None, m.fencing_rejections, m.waiting))
                continue
            granted = m.acquisitions - old.acquisitions
            contended = m.contended - old.contended
            per_s = granted / (now - then)
            share = contended / granted if granted > 0 else None
            found.append(Rates(prefix, per_s, share, m.fencing_rejections, m.waiting))
        return found


def under(metrics: dict[str, PrefixMetrics], prefix: str) -> dict[str, PrefixMetrics]:
    """The metrics of the labels that overlap ``prefix`` (``top orders/`` shows
    ``orders``, not every other prefix the scraped processes lock): a label whose
    path parts begin ``prefix``'s, or the other way round."""
    asked = [part for part in prefix.split("/") if part]
    return {
        label: found
        for label, found in metrics.items()
        if _overlap(asked, [part for part in label.split("/") if part])
    }


def _overlap(one: list[str], other: list[str]) -> bool:
    shorter = min(len(one), len(other))
    return one[:shorter] == other[:shorter]
