"""The metrics registry without I/O: histogram quantiles, labels, thresholds, and the
text format both ways (what ``fencelock stats`` adds up is what a process served)."""

from __future__ import annotations

import math
import os
import signal
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

import fencelock
from fencelock import metrics
from fencelock.metrics.exposition import parse, render
from fencelock.metrics.registry import (
    BUCKETS,
    LOSS_CAUSES,
    Histogram,
    PrefixMetrics,
    Registry,
    prefix_labeller,
)

durations = st.floats(min_value=0, max_value=300, allow_nan=False)


@given(st.lists(durations, min_size=1, max_size=200), st.sampled_from([0.5, 0.9, 0.99]))
def test_a_quantile_is_the_bound_of_the_bucket_it_falls_in(values: list[float], q: float) -> None:
    histogram = Histogram()
    for value in values:
        histogram.observe(value)
    estimate = histogram.quantile(q)
    assert estimate is not None
    assert histogram.count == len(values)
    truth = sorted(values)[max(0, math.ceil(q * len(values)) - 1)]
    assert estimate >= truth  # an upper estimate
    below = [b for b in (0.0, *BUCKETS) if b < estimate]
    assert truth > max(below) or truth == 0  # and the tightest bucket bound above it
    assert math.isclose(histogram.total, sum(values))


def test_an_empty_histogram_has_no_quantile() -> None:
    assert Histogram().quantile(0.99) is None


def test_names_are_labelled_by_prefix_never_by_name() -> None:
    label = prefix_labeller()
    assert label("orders/12/lines") == "orders"
    assert label("nightly-report") == "-"
    assert prefix_labeller(2)("orders/12/lines") == "orders/12"
    assert prefix_labeller(2)("orders/12") == "-"
    by_pattern = prefix_labeller(1, ["tenant-a/", "tenant-a/billing/"])
    assert by_pattern("tenant-a/billing/run") == "tenant-a/billing/"  # the longest
    assert by_pattern("tenant-a/x") == "tenant-a/"
    for bad in (0, -1, True, 1.5):
        with pytest.raises(fencelock.ConfigError, match="prefix depth must be an int"):
            prefix_labeller(bad)  # type: ignore[arg-type]
    with pytest.raises(fencelock.ConfigError, match="patterns must be a list"):
        prefix_labeller(1, "orders/")


def test_serving_on_a_taken_or_bad_port_is_one_clear_error() -> None:
    first = metrics.serve(0)
    try:
        with pytest.raises(fencelock.ConfigError, match="cannot serve scrapes on"):
            metrics.serve(first.server_port)
        with pytest.raises(fencelock.ConfigError, match="cannot serve scrapes on"):
            metrics.serve(70000)
    finally:
        first.shutdown()


# a fork beside threads is what these tests are about (3.12 warns of it)
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_records_even_if_a_parent_thread_held_the_registry() -> None:
    """The registry's lock is made anew in a child (forking.register): a parent thread
    that held it at the fork would otherwise leave the child stuck on it forever."""
    registry = metrics.REGISTRY
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with registry._guard:
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(10)
    pid = os.fork()
    if pid == 0:  # the child: record and report by exit status, within 5 s
        signal.alarm(5)
        registry.acquired("forked/1", 0.001, 1, 5.0)
        os._exit(0 if registry.snapshot()["forked"].acquisitions >= 1 else 1)
    release.set()
    holder.join(10)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), status
    assert os.WEXITSTATUS(status) == 0, status


def test_the_registry_counts_by_prefix_and_can_be_switched_off() -> None:
    registry = Registry()
    registry.acquired("orders/1", 0.002, 1, 10.0)
    registry.acquired("orders/2", 0.3, 3, 10.0)
    registry.timed_out("orders/3", 1.0)
    registry.waiting("orders/4", 1)
    registry.ended("orders/1", 0.5)
    registry.renewed("orders/1", True)
    registry.renewed("orders/1", False)
    registry.lost("orders/2", "taken_over")
    registry.rejected(None)
    orders, other = registry.snapshot()["orders"], registry.snapshot()["-"]
    assert (orders.acquisitions, orders.contended, orders.timeouts) == (2, 1, 1)
    assert orders.contention_rate == 0.5
    assert orders.timeout_rate == pytest.approx(1 / 3)
    assert (orders.renewals, orders.renewal_failures, orders.waiting) == (1, 1, 1)
    assert orders.lost["taken_over"] == 1
    assert orders.hold_seconds.count == 1
    assert other.fencing_rejections == 1
    registry.configure(enabled=False)
    registry.acquired("orders/5", 0.1, 1, 10.0)
    assert registry.snapshot()["orders"].acquisitions == 2
    registry.reset()
    assert registry.snapshot() == {}


def test_the_thresholds_of_the_article() -> None:
    quiet = PrefixMetrics("ok", acquisitions=100, contended=10, ttl=10.0)
    quiet.acquire_seconds.observe(0.01)
    quiet.hold_seconds.observe(1.0)
    assert quiet.warnings() == []
    loud = PrefixMetrics("bad", acquisitions=10, contended=4, timeouts=1, ttl=1.0)
    loud.fencing_rejections = 1
    loud.acquire_seconds.observe(0.9)  # p99 bucket 1 s > 50 % of the TTL
    loud.hold_seconds.observe(0.9)  # > 80 % of the TTL
    said = " | ".join(loud.warnings())
    for part in ("acquisition p99", "contention 40%", "hold p99", "timeouts 9%", "fencing"):
        assert part in said


prefixes = st.text('abcdefghij-/"\\', min_size=1, max_size=12)
counts = st.integers(0, 10**6)


@st.composite
def prefix_metrics(draw: st.DrawFn) -> PrefixMetrics:
    metrics = PrefixMetrics(draw(prefixes))
    for field in ("acquisitions", "contended", "timeouts", "renewals", "renewal_failures"):
        setattr(metrics, field, draw(counts))
    metrics.fencing_rejections, metrics.waiting = draw(counts), draw(counts)
    metrics.lost = {cause: draw(counts) for cause in LOSS_CAUSES}
    metrics.ttl = draw(st.sampled_from([None, 0.5, 30.0]))
    for histogram in (metrics.acquire_seconds, metrics.hold_seconds):
        for value in draw(st.lists(durations, max_size=20)):
            histogram.observe(value)
    return metrics


@given(st.lists(prefix_metrics(), max_size=4, unique_by=lambda m: m.prefix))
def test_a_scrape_reads_back_as_what_was_served(served: list[PrefixMetrics]) -> None:
    back = parse(render(served))
    assert set(back) == {m.prefix for m in served}
    for sent in served:
        again = back[sent.prefix]
        assert again.acquisitions == sent.acquisitions
        assert again.timeouts == sent.timeouts
        assert again.lost == sent.lost
        assert again.fencing_rejections == sent.fencing_rejections
        assert again.acquire_seconds.counts == sent.acquire_seconds.counts
        assert again.hold_seconds.count == sent.hold_seconds.count
        assert math.isclose(again.hold_seconds.total, sent.hold_seconds.total)
        assert again.ttl == sent.ttl


def test_two_scrapes_add_up() -> None:
    one = PrefixMetrics("orders", acquisitions=3, contended=1, ttl=5.0)
    one.acquire_seconds.observe(0.01)
    two = PrefixMetrics("orders", acquisitions=4, timeouts=2, ttl=5.0)
    two.acquire_seconds.observe(2.0)
    fleet = parse(render([two]), parse(render([one])))
    orders = fleet["orders"]
    assert (orders.acquisitions, orders.contended, orders.timeouts) == (7, 1, 2)
    assert orders.acquire_seconds.count == 2
    assert orders.acquire_seconds.quantile(0.99) == 2.5


def test_cycles_recorded_from_many_threads_are_all_counted() -> None:
    """Acquisitions and holds are recorded without a lock and counted in later (every
    FOLD_AT, and at each snapshot, some taken while the threads still record): none is
    lost or counted twice."""
    registry = Registry()
    threads, each = 8, 3000
    seen_meanwhile: list[int] = []

    def record(n: int) -> None:
        for i in range(each):
            registry.acquired(f"orders/{n}", 0.001 * (i % 7), 1 + i % 2, 30.0)
            registry.ended(f"orders/{n}", 0.5)
            if n == 0 and i % 500 == 0:
                seen_meanwhile.append(registry.snapshot()["orders"].acquisitions)

    workers = [threading.Thread(target=record, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    orders = registry.snapshot()["orders"]
    assert orders.acquisitions == threads * each == orders.acquire_seconds.count
    assert orders.contended == threads * each // 2
    assert sum(orders.acquire_seconds.counts) == threads * each
    assert orders.hold_seconds.count == sum(orders.hold_seconds.counts) == threads * each
    assert math.isclose(orders.hold_seconds.total, 0.5 * threads * each)
    assert seen_meanwhile == sorted(seen_meanwhile)  # counts only grow
