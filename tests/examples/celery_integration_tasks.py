"""Tasks of fencelock.integrations.celery's tests (run by a real prefork worker)."""

from __future__ import annotations

import os
import time

from celery import Celery

from fencelock.integrations.celery import LockedTask, current_lease

BROKER = os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/1")
app = Celery("fencelock_tests", broker=BROKER, backend=BROKER)
app.conf.fencelock_url = os.environ.get("FENCELOCK_URL")


@app.task(base=LockedTask, bind=True, lock="accounts/{account}/{kind}", lock_ttl=5)
def debit(self: LockedTask, account: int, cents: int, kind: str = "debit") -> dict[str, object]:
    """What the run held: its lock's name and token, the same through current_lease()."""
    lease = current_lease()
    return {
        "name": self.lease.name,
        "token": self.lease.token,
        "same": lease is self.lease,
        "cents": cents,
    }


@app.task(base=LockedTask, lock="shared/slow", lock_ttl=5, lock_timeout=30)
def slow(seconds: float) -> list[float]:
    """Holds ``shared/slow`` for ``seconds``: when it ran (two runs never overlap)."""
    started = time.monotonic()
    time.sleep(seconds)
    return [started, time.monotonic()]


@app.task(base=LockedTask, once="jobs/{job}", at_most=120, at_least=60)
def job(job: str) -> str:
    time.sleep(0.3)
    return f"ran {job}"


@app.task(base=LockedTask, lock="accounts/{missing}")
def misnamed(account: int) -> None:
    """Its lock name names no argument: the call fails with ConfigError."""


@app.task(base=LockedTask)
def unlocked() -> None:
    """Neither lock= nor once=: the call fails with ConfigError."""


@app.task(base=LockedTask, once="jobs/unbounded")
def unbounded() -> None:
    """once= without at_most=: the call fails with ConfigError."""


@app.task(base=LockedTask, lock="accounts/{account}")
def nameless(account: str) -> None:
    """Called with an empty account, its lock's name ends in "/": ConfigError."""
