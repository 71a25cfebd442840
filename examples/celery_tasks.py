"""Celery with fencelock: a nightly report that runs once across the whole fleet, and a
charge that stops the moment its lock is lost.

    CELERY_BROKER_URL=redis://127.0.0.1:6379/1 FENCELOCK_URL=redis://127.0.0.1:6379/0 \\
        celery -A examples.celery_tasks worker --pool=prefork --concurrency=4

Celery beat (or every node's cron) may start ``nightly_report`` on many workers at
once: the first takes ``reports/nightly`` and runs; the others skip, and for
``at_least`` after the start so does anyone a little late. Both tasks are
``fencelock.integrations.celery.LockedTask``s: each worker process makes its client on
first use, for ``app.conf.fencelock_url``.
"""

from __future__ import annotations

import os
import time

from celery import Celery

from fencelock.integrations.celery import LockedTask

BROKER = os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/1")
app = Celery("shop", broker=BROKER, backend=BROKER)
app.conf.beat_schedule = {
    "nightly-report": {"task": "examples.celery_tasks.nightly_report", "schedule": 24 * 3600.0},
}
app.conf.fencelock_url = os.environ.get("FENCELOCK_URL")  # each worker process's client


@app.task(
    base=LockedTask,
    once="reports/nightly",
    at_most=600,
    at_least=30,
    on_skip="skipped: another worker has it",
)
def nightly_report() -> str:
    """Runs on one worker however many get it, and not again within ``at_least``."""
    time.sleep(0.5)  # the work
    return f"report made by worker process {os.getpid()}"


@app.task(base=LockedTask, bind=True, lock="orders/{order}", lock_ttl=2, lock_timeout=10)
def charge(self: LockedTask, order: int, seconds: float) -> str:
    """Charge an order under its lock; if the lease is lost meanwhile (a pause, a forced
    release), the work stops at once with ``LeaseLost`` and the task fails with it."""
    token = self.lease.token  # fence the charge's writes with it
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.05)  # the work, in steps (a loss is raised between them)
    return f"charged order {order} under token {token}"
