"""The optional exporters hand the same numbers on: prometheus_client's exposition
(parsed back by prometheus_client's own parser) and the OpenTelemetry API (read by the
SDK's in-memory reader, as an application's SDK would)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import fencelock
from fencelock import metrics
from fencelock.metrics import otel, prometheus


@pytest.fixture
def recorded() -> Iterator[None]:
    """A few locks taken and one timed out, on a registry of this test's own."""
    metrics.reset()
    with fencelock.connect("memory://exporters") as client:
        for _ in range(3):
            client.lock("jobs/nightly", ttl=7).acquire().release()
        with (
            client.lock("jobs/nightly"),
            fencelock.connect("memory://exporters") as other,
            pytest.raises(fencelock.LockTimeout),
        ):
            other.lock("jobs/nightly").acquire(timeout=0.05)
    yield
    metrics.reset()


def test_prometheus_client_exposes_the_registry(recorded: None) -> None:
    registry = CollectorRegistry()
    prometheus.register(registry)
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for sample in family.samples
    }
    jobs = (("prefix", "jobs"),)
    assert samples[("fencelock_acquisitions_total", jobs)] == 4
    assert samples[("fencelock_acquire_timeouts_total", jobs)] == 1
    assert samples[("fencelock_acquire_seconds_count", jobs)] == 5
    assert samples[("fencelock_hold_seconds_count", jobs)] == 4
    assert samples[("fencelock_lease_ttl_seconds", jobs)] == 30.0  # the last lease's TTL
    assert samples[("fencelock_acquire_seconds_bucket", (("le", "+Inf"), *jobs))] == 5


def test_the_opentelemetry_api_is_given_the_registry(recorded: None) -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    otel.instrument(provider)
    data = reader.get_metrics_data()
    assert data is not None
    points = {
        (metric.name, point.attributes.get("prefix") if point.attributes else None): point.value
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        for point in metric.data.data_points
        if hasattr(point, "value")
    }
    assert points[("fencelock.acquisitions", "jobs")] == 4
    assert points[("fencelock.acquire.timeouts", "jobs")] == 1
    assert points[("fencelock.timeout.rate", "jobs")] == pytest.approx(0.2)
    assert points[("fencelock.hold.p99", "jobs")] > 0
    provider.shutdown()
