"""Celery tasks that hold a lock while they run, or run once across the fleet.

``base=LockedTask`` and one option on ``@app.task``:

- ``lock="orders/{order}"``: the task runs holding that lock (its name formatted with the
  call's arguments), renewed meanwhile; if the lease is lost, :class:`~fencelock.LeaseLost`
  is raised in the task at its next bytecode and the task fails with it (stop on loss).
  ``lock_ttl`` (30 s) and ``lock_timeout`` (None: wait as long as it takes) as
  :meth:`fencelock.Client.lock`'s ``ttl`` and ``timeout``.
- ``once="reports/nightly"``: a run takes the name without waiting and runs; a call that
  finds it taken returns ``on_skip`` (None) without running, and so does one within
  ``at_least`` seconds of a run's start; ``at_most`` (required) is the run's lease, never
  renewed. :func:`fencelock.once`'s rules.

In the task, ``self.lease`` (``bind=True``) or :func:`current_lease` is the lease the run
holds: fence its writes with ``lease.token``::

    from fencelock.integrations.celery import LockedTask

    @app.task(base=LockedTask, bind=True, lock="orders/{order}", lock_ttl=10)
    def charge(self, order: int) -> None:
        charge_card(order, fence=self.lease.token)

The client is made on first use in each worker process, for ``fencelock_url`` (a task
option), else ``app.conf.fencelock_url``, else fencelock's default URL
(``$FENCELOCK_URL``).
"""

from __future__ import annotations

import contextvars
import inspect
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

try:
    from celery import Task
except ImportError as missing:  # a plain install
    raise ImportError(
        "fencelock.integrations.celery needs Celery: pip install 'fencelock[celery]'"
    ) from missing

import fencelock
from fencelock.client_leases import this_thread
from fencelock.engine.names import validate_name
from fencelock.engine.once import once_terms
from fencelock.errors import ConfigError
from fencelock.lease import Lease
from fencelock.run_once import SKIPPED, run_once

__all__ = ["LockedTask", "current_lease"]

_lease: contextvars.ContextVar[Lease | None] = contextvars.ContextVar("fencelock_task_lease")


def current_lease() -> Lease | None:
    """The lease the running task holds (``lock`` or ``once``); None outside one."""
    return _lease.get(None)


class LockedTask(Task):  # type: ignore[misc]
    """A task that holds a lock while it runs (``lock=``) or runs once (``once=``)."""

    lock: str | None = None
    lock_ttl: float = 30.0
    lock_timeout: float | None = None
    once: str | None = None
    at_most: float | None = None
    at_least: float = 0.0
    on_skip: Any = None
    fencelock_url: str | None = None
    _clients: ClassVar[dict[tuple[int, str | None], fencelock.Client]] = {}
    _clients_lock: ClassVar[threading.Lock] = threading.Lock()

    @property
    def lease(self) -> Lease:
        """The lease this run holds; :class:`~fencelock.ConfigError` outside the body."""
        lease = current_lease()
        if lease is None:
            raise ConfigError(f"task {self.name}: self.lease is the running task's lease only")
        return lease

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if (self.lock is None) == (self.once is None):
            raise ConfigError(
                f"task {self.name}: base=LockedTask takes one of lock= and once=, "
                f"not {'both' if self.lock else 'neither'}"
            )
        client = self._client()
        if self.once is not None:
            return self._run_once(client, self._name(self.once, args, kwargs), args, kwargs)
        name = self._name(self.lock or "", args, kwargs)
        lock = client.lock(name, ttl=self.lock_ttl, timeout=self.lock_timeout, stop_on_loss=True)
        with lock as lease, _holding(lease):
            return super().__call__(*args, **kwargs)

    def _run_once(
        self, client: fencelock.Client, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if self.at_most is None:
            raise ConfigError(f"task {self.name}: once= needs at_most= (seconds)")
        terms = once_terms(self.at_most, self.at_least)

        def call() -> Any:
            held = client.internals.holdings.held_by(name, this_thread())
            with _holding(held[-1] if held else None):
                return super(LockedTask, self).__call__(*args, **kwargs)

        result = run_once(client, name, terms, call)
        return self.on_skip if result is SKIPPED else result

    def _name(self, template: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """The lock's name: ``template`` formatted with the call's arguments by name."""
        if "{" not in template:
            return validate_name(template)
        try:
            bound = inspect.signature(self.run).bind(*args, **kwargs)
        except TypeError as exc:
            raise ConfigError(f"task {self.name}: {exc}") from exc
        bound.apply_defaults()
        try:
            return validate_name(template.format(**bound.arguments))
        except (KeyError, IndexError) as exc:
            raise ConfigError(
                f"task {self.name}: the lock name {template!r} names {exc}, which is not "
                "one of the task's arguments"
            ) from exc

    def _client(self) -> fencelock.Client:
        url = self.fencelock_url or self.app.conf.get("fencelock_url")
        key = (os.getpid(), url)  # one client per worker process and URL
        with self._clients_lock:
            client = self._clients.get(key)
            if client is None:
                client = self._clients[key] = fencelock.connect(url)
            return client


@contextmanager
def _holding(lease: Lease | None) -> Iterator[None]:
    reset = _lease.set(lease)
    try:
        yield
    finally:
        _lease.reset(reset)
