"""The fencelock exception tree.

Every error fencelock raises is one of these; driver exceptions are translated
at the backend boundary with the original chained as ``__cause__``::

    FencelockError
    ├── ConfigError          bad URL, option, TTL or lock name   (also a ValueError)
    ├── BackendUnavailable   cannot reach or authenticate; names the server
    ├── LockTimeout          gave up waiting for a lock          (also a TimeoutError)
    ├── LeaseLost            the lease expired or was taken; stop acting on it
    ├── NotHolder            release or extend of a lease this caller does not hold
    ├── AlreadyHeld          this thread or task asked again for a lock it holds
    ├── StaleToken           a fencing guard rejected a write from an older token
    ├── ConflictError        an optimistic update found the row changed on every attempt
    └── RowNotFound          the row to update is not there          (also a LookupError)
"""

from __future__ import annotations


class FencelockError(Exception):
    """Base class of every fencelock error."""


class ConfigError(FencelockError, ValueError):
    """A URL, option, TTL or lock name is not valid."""


class BackendUnavailable(FencelockError):
    """The lock server cannot be reached, or refused our credentials."""


class LockTimeout(FencelockError, TimeoutError):
    """The lock was not acquired before the timeout ran out."""


class AcquireCancelled(LockTimeout):
    """A pending acquire was cancelled (``lock.cancel()``) before it got the lock; a
    :class:`LockTimeout`, so code that handles giving up handles this too."""


class Skipped(LockTimeout):
    """A run-once job did not run: another run holds its name (``on_skip="raise"``)."""


class LeaseLost(FencelockError):
    """The lease is no longer safe to act on: it expired, or another owner took it."""


class NotHolder(FencelockError):
    """The caller does not hold this lease (it was released, expired or taken)."""


class AlreadyHeld(FencelockError):
    """The calling thread (or task) already holds this lock through this client."""


class StaleToken(FencelockError):
    """A fencing guard rejected a write whose token is not newer than the last accepted."""

    def __init__(self, key: str, token: int, last: int) -> None:
        super().__init__(
            f"stale fencing token {token} for {key!r}: "
            f"a write with token {last} was already accepted"
        )
        self.key = key
        self.token = token
        self.last = last


class ConflictError(FencelockError):
    """A conditional update gave up: another writer changed the row between its read
    and its write on every attempt."""

    def __init__(self, row: str, attempts: int) -> None:
        super().__init__(
            f"update of {row} gave up after {attempts} attempt(s) ({attempts - 1} retries):"
            " another writer changed the row between the read and the write every time"
        )
        self.row = row
        self.attempts = attempts
        self.retries = attempts - 1


class RowNotFound(FencelockError, LookupError):
    """The row an update was asked to change is not in the table."""

    def __init__(self, row: str) -> None:
        super().__init__(f"no row {row}")
        self.row = row
