"""Tracing, the same on every backend: a ``fencelock.acquire`` span per acquire in the
caller's trace, granted or timed out, and a ``fencelock.lease.lost`` span linked to it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import fencelock
from fencelock import tracing
from tests.contract.conftest import BackendCase
from tests.polling import wait_until


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.instrument(provider)
    yield exporter
    tracing.uninstrument()
    provider.shutdown()


def test_an_acquire_is_a_span_in_the_callers_trace(
    client: fencelock.Client,
    other: fencelock.Client,
    name: str,
    spans: InMemorySpanExporter,
) -> None:
    tracer = TracerProvider().get_tracer("app")  # a parent from another provider: the
    with tracer.start_as_current_span("handle request") as request:  # context is shared
        lease = client.lock(name, ttl=5).acquire(timeout=10)
    with pytest.raises(fencelock.LockTimeout):
        other.lock(name).acquire(timeout=0.1)
    lease.release()
    granted, timed_out = (s for s in spans.get_finished_spans() if s.name == "fencelock.acquire")
    assert granted.parent is not None
    assert granted.parent.span_id == request.get_span_context().span_id
    assert granted.attributes is not None
    assert timed_out.attributes is not None
    assert granted.attributes["fencelock.lock.name"] == name
    assert granted.attributes["fencelock.outcome"] == "granted"
    assert granted.attributes["fencelock.lease.token"] == lease.token
    assert granted.attributes["fencelock.acquire.attempts"] == 1
    assert timed_out.attributes["fencelock.outcome"] == "timed_out"
    assert timed_out.attributes["fencelock.acquire.timeout"] == 0.1
    assert timed_out.status.status_code is StatusCode.ERROR


def test_an_acquire_refused_for_its_timeout_ends_its_span_with_the_error(
    client: fencelock.Client, name: str, spans: InMemorySpanExporter
) -> None:
    with pytest.raises(fencelock.ConfigError):
        client.lock(name).acquire(timeout=-1)
    (refused,) = spans.get_finished_spans()
    assert refused.attributes is not None
    assert refused.attributes["fencelock.outcome"] == "error"
    assert refused.status.status_code is StatusCode.ERROR
    (event,) = refused.events
    assert event.attributes is not None
    assert event.attributes["exception.type"] == "fencelock.errors.ConfigError"
    client.lock(name).acquire(timeout=0).release()  # the next span is not its child
    assert spans.get_finished_spans()[-1].parent is None


def test_a_lost_lease_is_a_span_linked_to_its_acquire(
    client: fencelock.Client,
    other: fencelock.Client,
    name: str,
    spans: InMemorySpanExporter,
) -> None:
    lease = client.lock(name, ttl=1).acquire()
    other.evict(name)
    assert lease.wait_lost(30)
    lost = wait_until(
        lambda: [s for s in spans.get_finished_spans() if s.name == "fencelock.lease.lost"],
        what="the fencelock.lease.lost span",
        timeout=10,
    )
    (acquired,) = (s for s in spans.get_finished_spans() if s.name == "fencelock.acquire")
    assert len(lost) == 1
    assert lost[0].attributes is not None
    assert lost[0].attributes["fencelock.lease.token"] == lease.token
    assert lost[0].attributes["fencelock.lease.lost_reason"]
    assert [link.context.span_id for link in lost[0].links] == [acquired.context.span_id]


def test_asyncio_acquires_are_spans_too(
    backend: BackendCase, name: str, spans: InMemorySpanExporter
) -> None:
    async def main() -> None:
        async with fencelock.aconnect(backend.url) as client, client.lock(name) as lease:
            token = lease.token
        (granted,) = spans.get_finished_spans()
        assert granted.attributes is not None
        assert granted.attributes["fencelock.lease.token"] == token

    asyncio.run(main())
