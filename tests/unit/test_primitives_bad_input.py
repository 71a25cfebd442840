"""Every coordination primitive names what is wrong with its arguments, before any I/O."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

import fencelock


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda c: c.rw_lock("bad name"), "lock name 'bad name'"),
        (lambda c: c.rw_lock("a", ttl=0), "ttl must be > 0"),
        (lambda c: c.semaphore("bad name", permits=2), "lock name 'bad name'"),
        (lambda c: c.semaphore("a", permits=0), "permits must be an int >= 1"),
        (lambda c: c.latch("a/"), "empty part"),
        (lambda c: c.election("bad name"), "lock name 'bad name'"),
        (lambda c: c.election("a", ttl=-1), "ttl must be > 0"),
        (lambda c: c.multi_lock(["a", "bad name"]), "lock name 'bad name'"),
        (lambda c: c.lock("a", reentrant=True, timeout=-1), "timeout must be None or >= 0"),
        (lambda c: c.barrier("a", 0), "parties must be an int >= 1"),
        (lambda c: c.double_barrier("bad name", 2), "lock name 'bad name'"),
        (lambda c: c.group("a").join(""), "non-empty str"),
        (lambda c: c.group("a").join("w", data="x" * 300), "fit beside this name"),
        (lambda c: c.group("bad name"), "lock name 'bad name'"),
        (lambda c: next(c.election("a").observe(float("nan"))), "interval must be finite"),
        (lambda c: next(c.election("a").observe(0)), "interval must be finite"),
        (lambda c: next(c.group("a").watch(float("inf"))), "interval must be finite"),
    ],
)
def test_bad_arguments_are_a_config_error(
    make: Callable[[fencelock.Client], object], message: str
) -> None:
    with (
        fencelock.connect("memory://bad-input") as client,
        pytest.raises(fencelock.ConfigError, match=message),
    ):
        make(client)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "bad name", "at_most": 10}, "lock name 'bad name'"),
        ({"name": "a", "at_most": 10, "on_skip": "ignore"}, "on_skip must be 'return' or 'raise'"),
        ({"name": "a", "at_most": 10, "at_least": 20}, "longer than at_most"),
        ({"name": "a", "at_most": 0}, "at_most must be > 0"),
    ],
)
def test_once_names_what_is_wrong_when_it_decorates(
    kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(fencelock.ConfigError, match=message):
        fencelock.once(**kwargs)  # type: ignore[arg-type]


def test_once_refuses_a_client_of_the_other_variant() -> None:
    with fencelock.connect("memory://bad-input") as client:

        async def job() -> None:
            return None

        with pytest.raises(fencelock.ConfigError, match="needs an AsyncClient"):
            fencelock.once("a", at_most=10, client=client)(job)


def test_a_decorator_of_the_wrong_variant_is_refused() -> None:
    async def coroutine_function() -> None:
        return None

    def plain_function() -> None:
        return None

    with (
        fencelock.connect("memory://bad-input") as client,
        pytest.raises(fencelock.ConfigError, match="is a coroutine function"),
    ):
        client.lock("a")(coroutine_function)

    async def main() -> None:
        async with fencelock.aconnect("memory://bad-input") as aclient:
            with pytest.raises(fencelock.ConfigError, match="is not a coroutine function"):
                aclient.lock("a")(plain_function)  # type: ignore[arg-type]  # on purpose

    asyncio.run(main())


def test_tracing_records_nothing_before_instrument() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from fencelock import tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with fencelock.connect("memory://bad-input") as client:
        with client.lock("a"):
            pass
        tracing.instrument(provider)
        tracing.uninstrument()
        with client.lock("a"):
            pass
    assert exporter.get_finished_spans() == ()


def test_a_barrier_arrival_while_another_party_arms_still_counts() -> None:
    """Arriving while another party is still arming (``try_set_count`` says False, the
    count not there yet), the count taken counts nothing: the party arms and counts
    again, and passes only with the last (it passed at once, alone, before)."""
    from fencelock.primitives.latch import Latch

    real = Latch.try_set_count
    calls: list[bool] = []

    def arming_elsewhere_first(self: Latch, count: int) -> bool:
        if not calls:
            calls.append(True)
            return False  # "another party is arming it": nothing armed yet
        return real(self, count)

    passed: list[float] = []
    with (
        fencelock.connect("memory://barrier-race") as client,
        pytest.MonkeyPatch.context() as patch,
    ):
        patch.setattr(Latch, "try_set_count", arming_elsewhere_first)
        first = threading.Thread(
            target=lambda: passed.append(
                time.monotonic() if client.barrier("b", 2).wait(30) else -1.0
            )
        )
        first.start()
        time.sleep(0.3)
        arrived_last = time.monotonic()
        assert client.barrier("b", 2).wait(30)
        first.join(30)
    assert passed
    assert passed[0] >= arrived_last
