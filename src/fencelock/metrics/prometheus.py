"""The metrics for ``prometheus_client`` (``pip install fencelock[prometheus]``): a
collector that reads the registry at each scrape, so the hot path never touches
prometheus_client. ``fencelock.metrics.prometheus.register()`` adds it to the
application's registry (prometheus_client's default unless another is given)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from fencelock.errors import ConfigError
from fencelock.metrics.exposition import COUNTERS, HISTOGRAMS
from fencelock.metrics.registry import BUCKETS, Registry

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry


def _client() -> Any:
    try:
        from prometheus_client import core
    except ImportError as exc:
        raise ConfigError(
            "fencelock.metrics.prometheus needs prometheus-client: "
            "pip install 'fencelock[prometheus]'"
        ) from exc
    return core


class FencelockCollector:
    """Yields the registry's metrics as prometheus_client metric families."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._core = _client()

    def collect(self) -> Iterator[Any]:
        core, snapshot = self._core, self._registry.snapshot().values()
        for field, metric, help_text in COUNTERS:
            family = core.CounterMetricFamily(metric, help_text, labels=["prefix"])
            for m in snapshot:
                family.add_metric([m.prefix], getattr(m, field))
            yield family
        lost = core.CounterMetricFamily(
            "fencelock_leases_lost", "Leases lost, by cause.", labels=["prefix", "cause"]
        )
        for m in snapshot:
            for cause, count in sorted(m.lost.items()):
                lost.add_metric([m.prefix, cause], count)
        yield lost
        for field, metric, help_text in HISTOGRAMS:
            family = core.HistogramMetricFamily(metric, help_text, labels=["prefix"])
            for m in snapshot:
                histogram, seen, buckets = getattr(m, field), 0, []
                for bound, count in zip((*BUCKETS, math.inf), histogram.counts, strict=True):
                    seen += count
                    buckets.append(("+Inf" if bound == math.inf else repr(bound), seen))
                family.add_metric([m.prefix], buckets, histogram.total)
            yield family
        waiting = core.GaugeMetricFamily(
            "fencelock_waiting", "Acquisitions waiting now.", labels=["prefix"]
        )
        ttl = core.GaugeMetricFamily(
            "fencelock_lease_ttl_seconds", "The TTL of the last lease granted.", labels=["prefix"]
        )
        for m in snapshot:
            waiting.add_metric([m.prefix], m.waiting)
            if m.ttl:
                ttl.add_metric([m.prefix], m.ttl)
        yield waiting
        yield ttl


def register(registry: CollectorRegistry | None = None) -> FencelockCollector:
    """Add fencelock's collector to ``registry`` (prometheus_client's default one)."""
    from fencelock.metrics import REGISTRY

    collector = FencelockCollector(REGISTRY)
    target = registry if registry is not None else _client().REGISTRY
    target.register(collector)
    return collector
