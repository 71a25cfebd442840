"""The one error of fencelock.sql's own beside those of :mod:`fencelock.errors`."""

from __future__ import annotations

from fencelock.errors import FencelockError


class TransactionLost(FencelockError):
    """The server rolled back the caller's whole transaction (InnoDB does, to break a
    deadlock) while a helper was working in a savepoint of it: everything the transaction
    had done is undone, so retry it from its start. The driver's error is the
    ``__cause__``."""
