"""``fencelock run NAME -- CMD...``: hold a lease while CMD runs."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
from collections.abc import Sequence
from subprocess import Popen
from typing import NamedTuple

import click

import fencelock
from fencelock import clock, holder
from fencelock.backends.base import leaves_names_taken
from fencelock.cli import errors_as_exit_codes, exitcodes, fail, url_option
from fencelock.cli.numbers import SECONDS, TTL, Duration, Number, ttl_option
from fencelock.cli.process_group import ProcessGroup, Watchdog, spawn
from fencelock.cli.run_signals import Interrupted, SignalRelay, Wakeup
from fencelock.client import Client
from fencelock.engine.lease_state import LeaseState
from fencelock.engine.once import OnceTerms
from fencelock.errors import FencelockError, LockTimeout
from fencelock.lease import Lease

_SEPARATOR = "--"
# How often to look whether what CMD left in its group is gone: nothing signals that.
_GROUP_POLL = 0.05


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


class LeaseWanted(NamedTuple):
    """The lease ``run`` asks for: its TTL, how long it may be held at most, whether a
    busy name skips the run (``--once``) and how long it stays taken (``--at-least``)."""

    ttl: float
    max_hold: float | None
    once: bool = False
    at_least: float = 0.0


def exit_status(returncode: int) -> int:
    return exitcodes.SIGNALLED - returncode if returncode < 0 else returncode


def release_quietly(lease: Lease) -> None:
    with contextlib.suppress(FencelockError):
        lease.release()


def _acquire(
    url: str | None,
    name: str,
    terms: LeaseWanted,
    timeout: float | None,
    relay: SignalRelay,
) -> tuple[Client, Lease]:
    """Connect and take NAME. A signal meanwhile exits 128+N with nothing left held."""
    relay.install()
    lease: Lease | None = None
    try:
        with errors_as_exit_codes():
            client = fencelock.connect(url)
            if terms.at_least and not leaves_names_taken(client.internals.backend, True):
                fail(
                    f"--at-least needs a lease that outlives its client, and on "
                    f"{client.url.split('://', 1)[0]}:// a lease ends with the client's "
                    "session or connection",
                    exitcodes.USAGE,
                )
            lock = client.lock(name, ttl=terms.ttl, max_hold=terms.max_hold)
            try:
                lease = lock.acquire(timeout)
            except LockTimeout:
                if not terms.once:
                    raise
                client.close()
                sys.exit(0)  # another node runs the job: skipping is success (cron stays quiet)
        relay.hold()
    except Interrupted as stop:
        if lease is not None:
            release_quietly(lease)
        fail(
            f"interrupted by {signal_name(stop.signum)} while waiting for lock {name!r}",
            exitcodes.SIGNALLED + stop.signum,
        )
    return client, lease


def _start(command: Sequence[str], lease: Lease, relay: SignalRelay) -> Popen[bytes]:
    """Start CMD, unless a signal came since the lock was taken."""
    if relay.pending:
        release_quietly(lease)
        signum = relay.pending[0]
        fail(
            f"interrupted by {signal_name(signum)} before the command started",
            exitcodes.SIGNALLED + signum,
        )
    env = dict(os.environ, FENCELOCK_TOKEN=str(lease.token), FENCELOCK_NAME=lease.name)
    try:
        return spawn(command, env)
    except OSError as exc:
        release_quietly(lease)
        fail(f"cannot run {command[0]!r}: {exc.strerror}", 127 if exc.errno == 2 else 126)


# CMD is SIGKILLed this long before its lease's safe time ends (at most a tenth of the
# TTL): the signal's delivery and the group's teardown happen inside the lease.
KILL_MARGIN = 0.2
GRACE_SHARE = 3  # the default grace: a third of the TTL


def kill_margin(ttl: float) -> float:
    return min(KILL_MARGIN, ttl / 10)


def grace_limit(ttl: float) -> float:
    """The longest grace that fits: stopping starts at most half the TTL before the safe
    time ends, and a renewal is due when two thirds are left (a sixth for it to land)."""
    return max(ttl / 2 - kill_margin(ttl), 0.0)


def default_grace(grace: float | None, ttl: float) -> float:
    """``--grace``, checked against ``--ttl``: CMD is stopped inside its lease, so the
    grace must fit in it with room for a renewal; a third of the TTL when not given."""
    if grace is None:
        return min(ttl / GRACE_SHARE, grace_limit(ttl))
    if grace > grace_limit(ttl):
        fail(
            f"--grace {grace:g} does not fit in --ttl {ttl:g}: the command is stopped inside "
            f"its lease, so the grace can be at most {grace_limit(ttl):g}s (half the TTL, "
            "less the time a SIGKILL takes); lower --grace or raise --ttl",
            exitcodes.USAGE,
        )
    return grace


class Stopped(NamedTuple):
    """How CMD ended: its return code, and why fencelock stopped it for the lease (None:
    it ended by itself, or by a signal sent to fencelock)."""

    returncode: int
    for_lease: str | None


def _nap(returncode: int | None, group: ProcessGroup, lease: Lease) -> float | None:
    """How long the main loop may sleep before it must look again."""
    naps = [group.until_kill()]
    if returncode is not None:
        naps.append(_GROUP_POLL)
    elif not lease.lost and not group.terminated:
        # Wake when the stop must begin, even if the renewer is stuck.
        naps.append(max(lease.remaining() - group.grace - kill_margin(lease.ttl), 0.0) + 0.001)
    return min((nap for nap in naps if nap is not None), default=None)


def _at_risk(lease: Lease) -> str:
    left = f"{lease.remaining():.2f}s of its safe time left"
    if lease.state is LeaseState.AT_RISK:
        return f"could not be renewed in time ({left})"
    if lease.max_hold is not None:
        return f"reaches its max_hold ({lease.max_hold:g}s) ({left})"
    return f"was not renewed in time ({left})"


def supervise(
    proc: Popen[bytes], group: ProcessGroup, lease: Lease, relay: SignalRelay, wakeup: Wakeup
) -> Stopped:
    """Run until CMD has exited and nothing of its group runs any more.

    Forwards signals. The group dies inside the lease: once the lease's safe time left
    is down to the grace (renewals failing, or ``max_hold`` near) it gets SIGTERM, and
    SIGKILL :func:`kill_margin` before the safe time ends; a lost lease (another holder
    may have it already) SIGKILLs it at once. What CMD left running after it exited
    gets SIGTERM, then SIGKILL after the grace.
    """
    why: str | None = None
    while True:
        relay.forward(group)
        returncode = proc.poll()
        if returncode is not None and group.settled():
            return Stopped(returncode, why)
        margin = kill_margin(lease.ttl)
        if lease.lost:
            why = why or f"lost while the command ran ({lease.lost_reason})"
            group.kill_by(clock.now())
        elif returncode is None and lease.remaining() <= group.grace + margin:
            why = why or _at_risk(lease)
            group.terminate()
            group.kill_by(lease.trusted_until - margin)
        elif returncode is not None:
            group.terminate()
        group.kill_if_due()
        wakeup.sleep(_nap(returncode, group, lease))


def run_supervised(
    lease: Lease, command: Sequence[str], grace: float, relay: SignalRelay
) -> Stopped:
    """Run CMD under ``lease`` until it has exited (stopped inside the lease if the lease
    cannot be kept); how it ended. The caller releases."""
    wakeup = Wakeup()
    lease.on_lost(lambda _lease: wakeup.wake())
    watchdog = Watchdog()
    group: ProcessGroup | None = None
    try:
        proc = _start(command, lease, relay)
        group = ProcessGroup(proc.pid, grace)
        try:
            watchdog.guard(proc.pid)
            return supervise(proc, group, lease, relay, wakeup)
        except BaseException:
            # Whatever ended the supervision (a bug, an error it did not expect), CMD's
            # whole group ends with it, while the lease still holds.
            group.kill_now(proc)
            raise
    finally:
        # Its goodbye only once nothing of the group runs; else it SIGKILLs the group.
        watchdog.dismiss(group is None or group.gone)


def run_locked(
    lease: Lease, command: Sequence[str], grace: float, relay: SignalRelay, at_least: float = 0.0
) -> int:
    """Run CMD under ``lease``; CMD's exit status, or LEASE_LOST if it was stopped for the
    lease. The name stays taken ``at_least`` seconds from the start (``--at-least``)."""
    started = clock.now()
    stopped = run_supervised(lease, command, grace, relay)
    if stopped.for_lease is not None:
        # Stopped ahead of the lease's end: let it end (moments away, unless a renewal
        # got through meanwhile), so that a release to a hung server is cut short.
        lease.wait_lost(lease.remaining() + 0.05)
        release_quietly(lease)
        fail(
            f"lease on {lease.name!r} (token {lease.token}) {stopped.for_lease}; "
            "the command was stopped",
            exitcodes.LEASE_LOST,
        )
    keep = OnceTerms(math.inf, at_least).keep_for(clock.now() - started)
    with errors_as_exit_codes():
        if keep is None:
            lease.release()
        else:
            lease.expire_in(keep)
    return exit_status(stopped.returncode)


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


grace_option = click.option(
    "--grace",
    type=Number(SECONDS),
    default=None,
    metavar="SECONDS",
    help="Seconds between SIGTERM and SIGKILL when CMD's process group is stopped "
    "(default: a third of the TTL; at most half of it: CMD is stopped inside its lease).",
)


@click.command(cls=RunCommand)
@url_option
@ttl_option(30.0, "Lease TTL in seconds; renewed at about a third of it while CMD runs.")
@click.option(
    "--wait",
    "wait",
    type=Number(SECONDS),
    default=None,
    metavar="SECONDS",
    help="Give up after waiting this long for the lock (default: wait forever).",
)
@click.option("--no-wait", is_flag=True, help="Try once; exit 75 at once if the lock is busy.")
@grace_option
@click.option(
    "--max-hold",
    type=Number(TTL),
    default=None,
    metavar="SECONDS",
    help="Stop renewing after this long: CMD is then stopped and fencelock exits 76.",
)
@click.option(
    "--once",
    is_flag=True,
    help="A job for one node: if the lock is busy, skip CMD and exit 0 at once, quietly.",
)
@click.option(
    "--at-least",
    type=Duration(SECONDS),
    default=0.0,
    metavar="DURATION",
    help="Keep the lock taken this long from the start (30s, 5m) even if CMD ends sooner.",
)
@click.argument("name")
@click.argument("command", nargs=-1, required=True)
def run(
    url: str | None,
    ttl: float,
    wait: float | None,
    no_wait: bool,
    grace: float | None,
    max_hold: float | None,
    once: bool,
    at_least: float,
    name: str,
    command: tuple[str, ...],
) -> None:
    """Hold lock NAME while COMMAND runs: fencelock run [OPTIONS] NAME -- COMMAND...

    COMMAND gets FENCELOCK_TOKEN and FENCELOCK_NAME in its environment. Exits
    with COMMAND's status; 75 if the lock was not acquired (0 with --once: skipped);
    76 if COMMAND was stopped for the lease: renewals failing (it is stopped inside
    the lease, SIGKILLed before the lease's safe time ends), the lease lost (SIGKILLed
    at once), or --max-hold reached.
    """
    if (no_wait or once) and wait is not None:
        fail("--wait excludes --no-wait and --once", exitcodes.USAGE)
    if no_wait and once:
        fail(
            "--once excludes --no-wait: --once already tries once, and exits 0 when busy "
            "(--no-wait exits 75)",
            exitcodes.USAGE,
        )
    stop_grace = default_grace(grace, ttl)
    holder.set_program(command)  # the lock store shows CMD's program, never its arguments
    relay = SignalRelay()
    wanted = LeaseWanted(ttl, max_hold, once, at_least)
    client, lease = _acquire(url, name, wanted, 0 if (no_wait or once) else wait, relay)
    code = run_locked(lease, command, stop_grace, relay, at_least)
    client.close()
    sys.exit(code)
