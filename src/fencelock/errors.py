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
    └── StaleToken           a fencing guard rejected a write from an older token
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
