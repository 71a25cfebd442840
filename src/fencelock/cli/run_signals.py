"""Signals for ``fencelock run``: they abort the wait for the lock, then go to CMD's group."""

from __future__ import annotations

import contextlib
import os
import select
import signal
from types import FrameType

from fencelock import clock
from fencelock.cli.process_group import ProcessGroup

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_STOPPING = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """A signal arrived while waiting for the lock.

    A BaseException, like KeyboardInterrupt, so that no ``except Exception`` on the
    way swallows it.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class SignalRelay:
    """SIGINT, SIGTERM and SIGHUP: raise :class:`Interrupted` until the lock is held,
    then recorded for the main loop to forward to CMD's group.

    A second SIGINT or SIGTERM has the group SIGKILLed ``grace`` seconds after the first.
    """

    def __init__(self) -> None:
        self.pending: list[int] = []
        self._waiting = True
        self._first_stop: float | None = None

    def install(self) -> None:
        for signum in FORWARDED:
            signal.signal(signum, self._handle)

    def hold(self) -> None:
        """The lock is held: from now on signals are recorded, not raised."""
        self._waiting = False

    @property
    def stopping(self) -> bool:
        """Whether a SIGINT or SIGTERM came while the lock was held."""
        return self._first_stop is not None

    def wait_again(self) -> None:
        """Waiting for the lock once more (``fencelock elect`` campaigns again)."""
        self._waiting = True

    def forward(self, group: ProcessGroup) -> None:
        while self.pending:
            signum = self.pending.pop(0)
            group.signal(signum)
            if signum in _STOPPING:
                self._escalate(group)

    def _escalate(self, group: ProcessGroup) -> None:
        if self._first_stop is None:
            self._first_stop = clock.now()
        else:
            group.kill_by(self._first_stop + group.grace)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self._waiting:
            raise Interrupted(signum)
        self.pending.append(signum)


class Wakeup:
    """What the main loop sleeps on: any signal with a handler (CMD's SIGCHLD included)
    and :meth:`wake`, which any thread may call. Create it in the main thread."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        # SIGCHLD is ignored by default; a handler makes it reach the wakeup fd.
        signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)

    def wake(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.write(self._write, b"\0")

    def sleep(self, timeout: float | None) -> None:
        """Until a signal or :meth:`wake` (also one that came since the last sleep)."""
        select.select([self._read], [], [], timeout)
        with contextlib.suppress(BlockingIOError):
            os.read(self._read, 4096)
