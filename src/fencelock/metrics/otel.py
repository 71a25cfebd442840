"""The metrics through the OpenTelemetry API (``pip install fencelock[otel]``: the API
only; the application owns the SDK and its exporters). ``instrument()`` creates
observable instruments on a ``fencelock`` meter whose callbacks read the registry at
each collection, so the hot path never calls OpenTelemetry."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from fencelock.errors import ConfigError
from fencelock.metrics.registry import PrefixMetrics, Registry

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

# name, unit, description, what of a prefix's metrics (None: nothing to report)
_Read = Callable[[PrefixMetrics], "float | None"]
Callback = Callable[["CallbackOptions"], Iterable["Observation"]]
_COUNTERS = (
    ("fencelock.acquisitions", "{lease}", "Leases granted.", "acquisitions"),
    ("fencelock.acquisitions.contended", "{lease}", "Granted after a wait.", "contended"),
    ("fencelock.acquire.timeouts", "{acquisition}", "Acquisitions given up.", "timeouts"),
    ("fencelock.renewals", "{renewal}", "Renewals granted.", "renewals"),
    ("fencelock.renewal.failures", "{renewal}", "Unanswered or refused.", "renewal_failures"),
    ("fencelock.fencing.rejections", "{write}", "Stale tokens refused.", "fencing_rejections"),
)


def _finite(value: float | None) -> float | None:
    return None if value is None or value == math.inf else value


_GAUGES: tuple[tuple[str, str, str, _Read], ...] = (
    ("fencelock.waiting", "{acquisition}", "Acquisitions waiting now.", lambda m: m.waiting),
    ("fencelock.lease.ttl", "s", "The TTL of the last lease granted.", lambda m: m.ttl),
    ("fencelock.acquire.p99", "s", "Acquisition time, 99th percentile (bucket bound).",
     lambda m: _finite(m.acquire_seconds.quantile(0.99))),
    ("fencelock.hold.p99", "s", "Hold time, 99th percentile (bucket bound).",
     lambda m: _finite(m.hold_seconds.quantile(0.99))),
    ("fencelock.contention.rate", "1", "Share of grants that waited.", lambda m: m.contention_rate),
    ("fencelock.timeout.rate", "1", "Share of acquisitions given up.", lambda m: m.timeout_rate),
)  # fmt: skip


def _api() -> Any:
    try:
        from opentelemetry import metrics
    except ImportError as exc:
        raise ConfigError(
            "fencelock.metrics.otel needs the OpenTelemetry API: pip install 'fencelock[otel]'"
        ) from exc
    return metrics


def _observer(registry: Registry, read: _Read) -> Callback:
    api = _api()

    def observe(_options: CallbackOptions) -> Iterable[Observation]:
        for metrics in registry.snapshot().values():
            value = read(metrics)
            if value is not None:
                yield api.Observation(value, {"prefix": metrics.prefix})

    return observe


def instrument(meter_provider: MeterProvider | None = None) -> list[Any]:
    """Create fencelock's instruments on the ``fencelock`` meter of ``meter_provider``
    (the global one unless given); the instruments made."""
    from fencelock.metrics import REGISTRY

    api = _api()
    meter = api.get_meter("fencelock", meter_provider=meter_provider)
    made: list[Any] = []
    for name, unit, description, field in _COUNTERS:
        callback = _observer(REGISTRY, operator.attrgetter(field))
        made.append(meter.create_observable_counter(name, [callback], unit, description))
    lost = _observer_lost(REGISTRY)
    made.append(
        meter.create_observable_counter(
            "fencelock.leases.lost", [lost], "{lease}", "Leases lost, by cause."
        )
    )
    for name, unit, description, read in _GAUGES:
        callback = _observer(REGISTRY, read)
        made.append(meter.create_observable_gauge(name, [callback], unit, description))
    return made


def _observer_lost(registry: Registry) -> Callback:
    api = _api()

    def observe(_options: CallbackOptions) -> Iterable[Observation]:
        for metrics in registry.snapshot().values():
            for cause, count in metrics.lost.items():
                yield api.Observation(count, {"prefix": metrics.prefix, "cause": cause})

    return observe
