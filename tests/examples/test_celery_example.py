"""examples/celery_tasks.py, run by a real Celery prefork worker over a real Redis: the
nightly report runs once however many workers get it, and a charge whose lease is
taken away stops at once with LeaseLost."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

import fencelock
from tests.examples.celery_worker import celery_worker, tasks_module
from tests.polling import wait_until

MODULE = "examples.celery_tasks"


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A Redis and a prefork worker of two processes; the environment they use."""
    with celery_worker(MODULE, tmp_path_factory.mktemp("celery")) as env:
        yield env


def _tasks(env: dict[str, str]) -> Any:
    return tasks_module(MODULE, env)


def test_the_nightly_report_runs_once_across_the_workers(worker: dict[str, str]) -> None:
    tasks = _tasks(worker)
    results = [tasks.nightly_report.delay() for _ in range(4)]
    said = sorted(result.get(timeout=60) for result in results)
    made = [line for line in said if line.startswith("report made")]
    assert len(made) == 1, said
    assert said.count("skipped: another worker has it") == 3


def test_a_charge_whose_lease_is_taken_away_stops_at_once(worker: dict[str, str]) -> None:
    tasks = _tasks(worker)
    started = time.monotonic()
    result = tasks.charge.delay(7, 30)
    with fencelock.connect(worker["FENCELOCK_URL"]) as operator:
        wait_until(
            lambda: operator.locked("orders/7"),
            what="the charge to take its lock",
            timeout=60,
            interval=0.05,
        )
        assert operator.evict("orders/7") is not None  # fencelock release --force
    # Celery rebuilds the task's exception: fencelock's class, or one it makes of that
    # name; so any exception, checked by its name below.
    with pytest.raises(Exception) as failed:  # noqa: PT011
        result.get(timeout=30)
    assert "LeaseLost" in type(failed.value).__name__ + repr(failed.value)
    assert time.monotonic() - started < 25  # stopped, not run to its 30 s
