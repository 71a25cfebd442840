"""``fencelock run NAME -- CMD...``: hold a lease while CMD runs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType

import click

import fencelock
from fencelock.cli import errors_as_exit_codes, exitcodes, fail, url_option
from fencelock.lease import Lease

_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_SEPARATOR = "--"


class GroupStopper:
    """Stops CMD's whole process group: SIGTERM, then SIGKILL after ``grace`` seconds."""

    def __init__(self, pgid: int, grace: float) -> None:
        self.pgid, self.grace = pgid, grace
        self.stopping = threading.Event()

    def signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, signum)

    def stop(self) -> None:
        if not self.stopping.is_set():
            self.stopping.set()
            self.signal(signal.SIGTERM)

    def group_alive(self) -> bool:
        try:
            os.killpg(self.pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def finish(self, started: float) -> None:
        """After CMD exits: give the rest of its group the grace period, then SIGKILL."""
        while self.group_alive() and time.monotonic() - started < self.grace:
            time.sleep(0.02)
        self.signal(signal.SIGKILL)


def _spawn(command: tuple[str, ...], lease: Lease) -> subprocess.Popen[bytes]:
    env = dict(os.environ, FENCELOCK_TOKEN=str(lease.token), FENCELOCK_NAME=lease.name)
    try:
        return subprocess.Popen(command, env=env, start_new_session=True)
    except OSError as exc:
        lease.release()
        fail(f"cannot run {command[0]!r}: {exc.strerror}", 127 if exc.errno == 2 else 126)


def _forward_signals(stopper: GroupStopper) -> None:
    def forward(signum: int, _frame: FrameType | None) -> None:
        stopper.signal(signum)

    for signum in _FORWARDED:
        signal.signal(signum, forward)


def _exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def run_locked(lease: Lease, command: tuple[str, ...], grace: float) -> int:
    """Run CMD under ``lease``; CMD's exit status, or LEASE_LOST if the lease was lost."""
    proc = _spawn(command, lease)
    stopper = GroupStopper(proc.pid, grace)
    lost_at: list[float] = []

    def stop_command(_lease: Lease) -> None:
        lost_at.append(time.monotonic())
        stopper.stop()

    lease.on_lost(stop_command)
    _forward_signals(stopper)
    returncode = proc.wait()
    if lost_at:
        stopper.finish(lost_at[0])
        reason = lease.lost_reason
        with contextlib.suppress(fencelock.LeaseLost):
            lease.release()
        fail(
            f"lease on {lease.name!r} (token {lease.token}) lost while the command ran "
            f"({reason}); the command was stopped",
            exitcodes.LEASE_LOST,
        )
    with errors_as_exit_codes():
        lease.release()
    return _exit_status(returncode)


class RunCommand(click.Command):
    """Options may also stand between NAME and the ``--`` that starts CMD.

    Without options after NAME, everything after NAME is CMD, as given: CMD keeps
    its own options and its own ``--``.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        valued = {
            opt
            for p in self.params
            if isinstance(p, click.Option) and not p.is_flag
            for opt in p.opts
        }
        name_at = _next_positional(args, 0, valued)
        ctx.allow_interspersed_args = _options_follow(args, name_at)
        if ctx.allow_interspersed_args:
            end = _next_positional(args, name_at + 1, valued)
            if end == len(args) or args[end] != _SEPARATOR:
                raise click.UsageError(
                    f"options after NAME must end with {_SEPARATOR}: "
                    f"fencelock run NAME [OPTIONS] {_SEPARATOR} CMD [ARG...]",
                    ctx,
                )
        return super().parse_args(ctx, args)


def _next_positional(args: Sequence[str], start: int, valued: set[str]) -> int:
    """Index of the first argument from ``start`` that is not an option or its value
    (a ``--`` counts as one); ``len(args)`` if there is none."""
    at = start
    while at < len(args):
        arg = args[at]
        if arg == _SEPARATOR or not arg.startswith("-") or arg == "-":
            return at
        at += 2 if arg in valued else 1
    return len(args)


def _options_follow(args: Sequence[str], name_at: int) -> bool:
    """Whether an option, or the ``--``, comes right after NAME."""
    if name_at + 1 >= len(args) or args[name_at] == _SEPARATOR:
        return False
    after = args[name_at + 1]
    return after.startswith("-") and after != "-"


@click.command(cls=RunCommand)
@url_option
@click.option(
    "--ttl",
    type=float,
    default=30.0,
    show_default=True,
    help="Lease TTL in seconds; renewed at about a third of it while CMD runs.",
)
@click.option(
    "--wait",
    "wait",
    type=click.FloatRange(min=0),
    default=None,
    metavar="SECONDS",
    help="Give up after waiting this long for the lock (default: wait forever).",
)
@click.option("--no-wait", is_flag=True, help="Try once; exit 75 at once if the lock is busy.")
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Seconds between SIGTERM and SIGKILL when the lease is lost.",
)
@click.argument("name")
@click.argument("command", nargs=-1, required=True)
def run(
    url: str | None,
    ttl: float,
    wait: float | None,
    no_wait: bool,
    grace: float,
    name: str,
    command: tuple[str, ...],
) -> None:
    """Hold lock NAME while COMMAND runs: fencelock run [OPTIONS] NAME -- COMMAND...

    COMMAND gets FENCELOCK_TOKEN and FENCELOCK_NAME in its environment. Exits
    with COMMAND's status; 75 if the lock was not acquired; 76 if the lease was
    lost while COMMAND ran (COMMAND and its process group are then stopped).
    """
    if no_wait and wait is not None:
        fail("--wait and --no-wait exclude each other", exitcodes.USAGE)
    with errors_as_exit_codes():
        client = fencelock.connect(url)
        lease = client.lock(name, ttl=ttl).acquire(timeout=0 if no_wait else wait)
    code = run_locked(lease, command, grace)
    client.close()
    sys.exit(code)


def register(group: click.Group) -> None:
    group.add_command(run)
