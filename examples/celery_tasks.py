"""Celery with fencelock: a nightly report that runs once across the whole fleet, and a
charge that stops the moment its lock is lost.

    CELERY_BROKER_URL=redis://127.0.0.1:6379/1 FENCELOCK_URL=redis://127.0.0.1:6379/0 \\
        celery -A examples.celery_tasks worker --pool=prefork --concurrency=4

Celery beat (or every node's cron) may start ``nightly_report`` on many workers at
once: the first takes ``reports/nightly`` and runs; the others skip, and for
``at_least`` after the start so does anyone a little late. The client is made at import,
before the prefork pool forks: each worker process gets a working copy of it.
"""

from __future__ import annotations

import os
import time

from celery import Celery

import fencelock

BROKER = os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/1")
app = Celery("shop", broker=BROKER, backend=BROKER)
app.conf.beat_schedule = {
    "nightly-report": {"task": "examples.celery_tasks.nightly_report", "schedule": 24 * 3600.0},
}
locks = fencelock.connect(os.environ.get("FENCELOCK_URL"))  # forks with the pool


@fencelock.once("reports/nightly", at_most=600, at_least=30, client=locks)
def make_report() -> str:
    time.sleep(0.5)  # the work
    return f"report made by worker process {os.getpid()}"


@app.task
def nightly_report() -> str:
    """Runs ``make_report`` if no other worker has within ``at_least``; else says so."""
    made = make_report()
    return "skipped: another worker has it" if made is fencelock.SKIPPED else str(made)


@app.task
def charge(order: int, seconds: float) -> str:
    """Charge an order under its lock; if the lease is lost meanwhile (a pause, a forced
    release), the work stops at once with ``LeaseLost`` and the task fails with it."""
    with locks.lock(f"orders/{order}", ttl=2, timeout=10, stop_on_loss=True) as lease:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(0.05)  # the work, in steps (a loss is raised between them)
        return f"charged order {order} under token {lease.token}"
