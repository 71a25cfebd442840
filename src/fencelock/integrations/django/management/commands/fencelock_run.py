"""``manage.py fencelock_run NAME COMMAND [ARGS...]``: a management command under a lock.

As ``fencelock run``, inside Django's process: the command runs while this process
holds ``NAME`` (waiting up to ``--timeout`` for it), renewed meanwhile; if the lease is
lost, :class:`~fencelock.LeaseLost` is raised in the command at its next bytecode and it
fails. ``--once``: a job for every node's cron, run by the first to take ``NAME``;
the others skip it (exit 0), and for ``--at-least`` seconds after a run's start so does
anyone a little late. The command sees ``FENCELOCK_TOKEN`` and ``FENCELOCK_NAME`` in
``os.environ`` while it runs: fence its writes with the token.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

import fencelock
from fencelock.client_leases import this_thread
from fencelock.integrations.django.fences import locks
from fencelock.lease import Lease


class Command(BaseCommand):
    help = "Run a management command under a fencelock lock (--once: on one node only)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="the lock's name")
        parser.add_argument("command", help="the management command to run")
        parser.add_argument("args", nargs="*", help="its arguments (after --)")
        parser.add_argument("--ttl", type=float, default=30.0, help="lease TTL, seconds")
        parser.add_argument(
            "--timeout", type=float, default=None, help="wait at most this long for the lock"
        )
        parser.add_argument("--once", action="store_true", help="skip if another node has it")
        parser.add_argument(
            "--at-most", type=float, default=3600.0, help="--once: the run's lease, seconds"
        )
        parser.add_argument(
            "--at-least", type=float, default=0.0, help="--once: keep the name this long"
        )

    def handle(self, *args: str, **options: Any) -> None:
        name, command = options["name"], options["command"]
        try:
            if options["once"]:
                self._once(name, command, args, options)
                return
            lock = locks().lock(
                name, ttl=options["ttl"], timeout=options["timeout"], stop_on_loss=True
            )
            with lock as lease, _announced(lease):
                call_command(command, *args)
        except fencelock.LeaseLost as exc:
            raise CommandError(f"{command} stopped: the lease on {name!r} was lost") from exc
        except fencelock.FencelockError as exc:  # a busy lock, a bad TTL, no server
            raise CommandError(str(exc)) from exc

    def _once(self, name: str, command: str, args: tuple[str, ...], options: Any) -> None:
        ran: list[bool] = []

        def job() -> None:
            held = locks().internals.holdings.held_by(name, this_thread())
            with _announced(held[-1] if held else None):
                call_command(command, *args)
            ran.append(True)

        runs = fencelock.once(
            name, at_most=options["at_most"], at_least=options["at_least"], client=locks()
        )
        runs(job)()
        if not ran:
            self.stdout.write(f"skipped: {name!r} is held by another run")


@contextmanager
def _announced(lease: Lease | None) -> Iterator[None]:
    """``FENCELOCK_TOKEN`` and ``FENCELOCK_NAME`` in ``os.environ`` while the command runs."""
    if lease is None:
        yield
        return
    before = {key: os.environ.get(key) for key in ("FENCELOCK_TOKEN", "FENCELOCK_NAME")}
    os.environ.update(FENCELOCK_TOKEN=str(lease.token), FENCELOCK_NAME=lease.name)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
