"""fencelock.integrations.celery, run by a real Celery prefork worker (two processes)
over a real Redis: a task holds its lock (named from its arguments) and sees the lease,
two runs of a locked task never overlap, a ``once`` task runs once and then skips for
``at_least`` while one of another name runs, and a misconfigured task fails with
ConfigError. (Stop on loss: the example's charge, tests/examples/test_celery_example.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import fencelock
from tests.examples.celery_worker import celery_worker, tasks_module

MODULE = "tests.examples.celery_integration_tasks"
WAIT = 60.0


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with celery_worker(MODULE, tmp_path_factory.mktemp("celery")) as env:
        yield tasks_module(MODULE, env)


def test_the_task_holds_the_lock_its_arguments_name(tasks: Any) -> None:
    first = tasks.debit.delay(7, 100).get(timeout=WAIT)
    second = tasks.debit.delay(account=7, cents=50, kind="refund").get(timeout=WAIT)
    assert first["name"] == "accounts/7/debit"
    assert second["name"] == "accounts/7/refund"
    assert first["same"] is True
    assert first["token"] > 0
    again = tasks.debit.delay(7, 25).get(timeout=WAIT)
    assert again["token"] > first["token"]  # a newer lease on the name, a larger token
    with fencelock.connect(tasks.app.conf.fencelock_url) as client:
        assert not client.locked("accounts/7/debit")  # released after the run


def test_two_runs_of_a_locked_task_never_overlap(tasks: Any) -> None:
    runs = [tasks.slow.delay(0.5) for _ in range(2)]  # one on each worker process
    first, second = sorted(r.get(timeout=WAIT) for r in runs)
    assert first[1] <= second[0]  # time.monotonic is one clock for the whole machine


def test_a_once_task_runs_once_then_skips_for_at_least(tasks: Any) -> None:
    said = [r.get(timeout=WAIT) for r in [tasks.job.delay("nightly") for _ in range(3)]]
    assert said.count("ran nightly") == 1
    assert said.count(None) == 2  # on_skip
    assert tasks.job.delay("nightly").get(timeout=WAIT) is None  # within at_least (60 s)
    assert tasks.job.delay("weekly").get(timeout=WAIT) == "ran weekly"  # another name


@pytest.mark.parametrize(
    ("task", "args"),
    [("misnamed", (1,)), ("unlocked", ()), ("unbounded", ()), ("nameless", ("",))],
)
def test_a_misconfigured_task_fails_with_config_error(
    tasks: Any, task: str, args: tuple[int, ...]
) -> None:
    result = getattr(tasks, task).delay(*args)
    with pytest.raises(Exception) as failed:  # noqa: PT011 - Celery rebuilds the class
        result.get(timeout=WAIT)
    assert "ConfigError" in type(failed.value).__name__ + repr(failed.value)
