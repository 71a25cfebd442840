"""examples/celery_tasks.py, run by a real Celery prefork worker over a real Redis: the
nightly report runs once however many workers get it, and a charge whose lease is
taken away stops at once with LeaseLost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import fencelock
from fencelock.testing.pool import ServerPool
from tests.polling import wait_until

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A Redis and a prefork worker of two processes; the environment they use."""
    with ServerPool(tmp_path_factory.mktemp) as pool:
        redis_url = pool.redis(name="celery").url
        env = dict(
            os.environ,
            CELERY_BROKER_URL=redis_url.replace("/0", "/1"),
            FENCELOCK_URL=redis_url,
            PYTHONPATH=str(ROOT),
        )
        log = (tmp_path_factory.mktemp("celery") / "worker.log").open("w")
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "examples.celery_tasks", "worker",
             "--pool=prefork", "--concurrency=2", "--loglevel=warning", "--without-heartbeat",
             "--without-gossip", "--without-mingle"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            yield env
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)


def _tasks(env: dict[str, str]):  # type: ignore[no-untyped-def]
    """The example module, imported with the worker's settings (this process's own
    environment is left as it was)."""
    saved = {key: os.environ.get(key) for key in ("CELERY_BROKER_URL", "FENCELOCK_URL")}
    os.environ.update({key: env[key] for key in saved})
    try:
        import examples.celery_tasks as tasks
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    tasks.app.conf.broker_url = tasks.app.conf.result_backend = env["CELERY_BROKER_URL"]
    return tasks


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
