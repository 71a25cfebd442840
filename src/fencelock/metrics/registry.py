"""The in-process metrics, without I/O: what every lock of this process did, by name
prefix (never by raw name: a fleet's lock names are unbounded, a prefix is not).

The five the lock comparison article tells an operator to watch, and the thresholds
it gives: acquisition time p99 (danger above 50 % of the TTL), contention rate (above
30 %), hold time p99 (above 80 % of the TTL), timeout rate (above 5 %) and fencing
rejections (investigate any); beside them renewals, renewal failures, leases lost (by
cause) and the acquisitions waiting now.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from fencelock.errors import ConfigError

# Seconds: 0.5 ms to 2 min, about x2 a step (Prometheus-style upper bounds).
BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
)  # fmt: skip
FOLD_AT = 1024  # cycles recorded before they are counted in (or at a snapshot)
OTHER = "-"  # the label of names without a prefix part (and of rejections by name)
LOSS_CAUSES = ("taken_over", "expired", "max_hold", "session_ended", "forked")

# The article's thresholds.
ACQUIRE_P99_OF_TTL = 0.5
CONTENTION_RATE = 0.30
HOLD_P99_OF_TTL = 0.8
TIMEOUT_RATE = 0.05


@dataclass
class Histogram:
    """Counts per bucket (the last: above every bound), their sum and count."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    total: float = 0.0
    count: int = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.total += seconds
        self.count += 1

    def quantile(self, q: float) -> float | None:
        """The bucket bound under which a ``q`` share of the observations fell (an
        upper estimate, as Prometheus's ``histogram_quantile`` makes); None if empty,
        ``inf`` if it lies above the last bound."""
        if self.count == 0:
            return None
        rank = q * self.count
        seen = 0
        for bound, count in zip((*BUCKETS, math.inf), self.counts, strict=True):
            seen += count
            if seen >= rank:
                return bound
        return math.inf

    def copy(self) -> Histogram:
        return Histogram(list(self.counts), self.total, self.count)


@dataclass
class PrefixMetrics:
    """What the locks under one prefix did in this process."""

    prefix: str
    acquisitions: int = 0  # leases granted
    contended: int = 0  # of those, the ones that had to wait (more than one try)
    timeouts: int = 0  # acquisitions given up
    acquire_seconds: Histogram = field(default_factory=Histogram)  # granted or not
    hold_seconds: Histogram = field(default_factory=Histogram)  # acquire to release or loss
    renewals: int = 0
    renewal_failures: int = 0  # unanswered or refused
    lost: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LOSS_CAUSES, 0))
    fencing_rejections: int = 0
    waiting: int = 0  # acquisitions waiting now (a gauge)
    ttl: float | None = None  # the TTL of the last lease granted (for the thresholds)

    @property
    def contention_rate(self) -> float | None:
        return self.contended / self.acquisitions if self.acquisitions else None

    @property
    def timeout_rate(self) -> float | None:
        tried = self.acquisitions + self.timeouts
        return self.timeouts / tried if tried else None

    def warnings(self) -> list[str]:
        """The article's thresholds this prefix is past, each as a short sentence."""
        found: list[str] = []
        acquire_p99, hold_p99 = (
            self.acquire_seconds.quantile(0.99),
            self.hold_seconds.quantile(0.99),
        )
        if self.ttl and acquire_p99 is not None and acquire_p99 > ACQUIRE_P99_OF_TTL * self.ttl:
            found.append(f"acquisition p99 {acquire_p99:g}s is over 50% of the TTL")
        if (rate := self.contention_rate) is not None and rate > CONTENTION_RATE:
            found.append(f"contention {rate:.0%} is over 30%")
        if self.ttl and hold_p99 is not None and hold_p99 > HOLD_P99_OF_TTL * self.ttl:
            found.append(f"hold p99 {hold_p99:g}s is over 80% of the TTL")
        if (rate := self.timeout_rate) is not None and rate > TIMEOUT_RATE:
            found.append(f"timeouts {rate:.0%} are over 5%")
        if self.fencing_rejections:
            found.append(f"{self.fencing_rejections} fencing rejection(s): investigate")
        return found

    def copy(self) -> PrefixMetrics:
        return PrefixMetrics(
            self.prefix,
            self.acquisitions,
            self.contended,
            self.timeouts,
            self.acquire_seconds.copy(),
            self.hold_seconds.copy(),
            self.renewals,
            self.renewal_failures,
            dict(self.lost),
            self.fencing_rejections,
            self.waiting,
            self.ttl,
        )


def prefix_labeller(depth: int = 1, patterns: Iterable[str] = ()) -> Callable[[str], str]:
    """How a lock name becomes its label: the first of ``patterns`` (name prefixes) it
    starts with, else its first ``depth`` ``/``-parts if it has more than that, else
    ``-``. ``orders/12/lines`` is ``orders`` at depth 1; ``nightly-report`` is ``-``."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ConfigError(f"metrics: prefix depth must be an int >= 1, got {depth!r}")
    if isinstance(patterns, str):  # one pattern given bare would be split into letters
        raise ConfigError(f"metrics: patterns must be a list of name prefixes, not {patterns!r}")
    chosen = tuple(sorted(patterns, key=len, reverse=True))

    def label(name: str) -> str:
        for pattern in chosen:
            if name.startswith(pattern):
                return pattern
        parts = name.split("/", depth)
        return "/".join(parts[:depth]) if len(parts) > depth else OTHER

    return label


class Registry:
    """Thread-safe metrics by prefix; one per process (:data:`REGISTRY`)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._by_prefix: dict[str, PrefixMetrics] = {}
        self._cache: dict[str, PrefixMetrics] = {}  # name -> its prefix's, bounded (_of)
        # The two events of every lock cycle, recorded without a lock (a deque's append
        # and popleft are atomic) and counted in (folded) under it, by FOLD_AT of them
        # or at the next snapshot: a cycle on the fastest backend costs half as much.
        self._acquisitions: deque[tuple[PrefixMetrics, float, bool, float]] = deque()
        self._holds: deque[tuple[Histogram, float]] = deque()
        self.enabled = True
        self.label_of = prefix_labeller()

    def configure(self, depth: int = 1, patterns: Iterable[str] = (), enabled: bool = True) -> None:
        """How names become labels, and whether anything is recorded."""
        labeller = prefix_labeller(depth, patterns)
        with self._guard:
            self.label_of, self.enabled, self._cache = labeller, enabled, {}

    def reset(self) -> None:
        with self._guard:
            self._by_prefix, self._cache = {}, {}
            self._acquisitions.clear()
            self._holds.clear()

    def _reset_after_fork(self) -> None:
        self._guard = threading.Lock()  # a parent's thread may have held it; counts go on

    def _of(self, name: str) -> PrefixMetrics:
        """The metrics of ``name``'s prefix: from the cache without a lock (a dict read
        is atomic), else looked up and cached under it."""
        metrics = self._cache.get(name)
        if metrics is not None:
            return metrics
        with self._guard:
            label = self.label_of(name)
            metrics = self._by_prefix.get(label)
            if metrics is None:
                metrics = self._by_prefix[label] = PrefixMetrics(label)
            if len(self._cache) < 10_000:  # a cache, not a record of every name
                self._cache[name] = metrics
            return metrics

    def acquired(self, name: str, seconds: float, tries: int, ttl: float) -> None:
        if self.enabled:
            recent = self._acquisitions
            recent.append((self._cache.get(name) or self._of(name), seconds, tries > 1, ttl))
            if len(recent) > FOLD_AT:
                self._fold()

    def timed_out(self, name: str, seconds: float) -> None:
        if self.enabled:
            metrics = self._of(name)
            with self._guard:
                metrics.timeouts += 1
                metrics.acquire_seconds.observe(seconds)

    def waiting(self, name: str, change: int) -> None:
        if self.enabled:
            metrics = self._of(name)
            with self._guard:
                metrics.waiting += change

    def ended(self, name: str, held_seconds: float) -> None:
        """A lease ended (released or lost) after ``held_seconds``."""
        if self.enabled:
            recent = self._holds
            recent.append(((self._cache.get(name) or self._of(name)).hold_seconds, held_seconds))
            if len(recent) > FOLD_AT:
                self._fold()

    def _fold(self) -> None:
        with self._guard:
            self._fold_held()

    def _fold_held(self) -> None:
        """Count in the cycles recorded since the last fold (the guard held)."""
        take, slot = self._acquisitions.popleft, bisect.bisect_left
        for _ in range(len(self._acquisitions)):
            metrics, seconds, contended, ttl = take()
            metrics.acquisitions += 1
            metrics.contended += contended
            metrics.ttl = ttl
            histogram = metrics.acquire_seconds
            histogram.counts[slot(BUCKETS, seconds)] += 1  # Histogram.observe, inlined
            histogram.total += seconds
            histogram.count += 1
        take_hold = self._holds.popleft
        for _ in range(len(self._holds)):
            histogram, seconds = take_hold()
            histogram.counts[slot(BUCKETS, seconds)] += 1
            histogram.total += seconds
            histogram.count += 1

    def renewed(self, name: str, ok: bool) -> None:
        if self.enabled:
            metrics = self._of(name)
            with self._guard:
                if ok:
                    metrics.renewals += 1
                else:
                    metrics.renewal_failures += 1

    def lost(self, name: str, cause: str) -> None:
        if self.enabled:
            lost = self._of(name).lost
            with self._guard:
                lost[cause] = lost.get(cause, 0) + 1

    def rejected(self, name: str | None) -> None:
        """A fenced write refused a stale token (``name``: the lock's, if known)."""
        if self.enabled:
            metrics = self._of(name or "")
            with self._guard:
                metrics.fencing_rejections += 1

    def snapshot(self) -> dict[str, PrefixMetrics]:
        """A copy of every prefix's metrics, by label."""
        with self._guard:
            self._fold_held()
            return {label: m.copy() for label, m in sorted(self._by_prefix.items())}
