"""Process-local counters; the five operational metrics build on these."""

from __future__ import annotations

import threading
from collections import Counter

from fencelock import forking


class Counters:
    """Thread-safe named counters."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._guard = threading.Lock()
        forking.register(self)

    def _reset_after_fork(self) -> None:
        self._guard = threading.Lock()  # a parent thread may have held it; counts go on

    def add(self, name: str, amount: int = 1) -> None:
        with self._guard:
            self._counts[name] += amount

    def get(self, name: str) -> int:
        with self._guard:
            return self._counts[name]

    def snapshot(self) -> dict[str, int]:
        with self._guard:
            return dict(self._counts)


COUNTERS = Counters()
FENCING_REJECTIONS = "fencing_rejections"
