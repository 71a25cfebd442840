"""Exit codes of the ``fencelock`` command (documented in docs/cli.md)."""

from __future__ import annotations

OK = 0
DECLINED = 1  # you answered no at `release --force`'s question
USAGE = 64  # bad URL, option or lock name (EX_USAGE)
UNAVAILABLE = 69  # backend unreachable or refused us (EX_UNAVAILABLE)
INTERNAL = 70  # a bug in fencelock (EX_SOFTWARE)
NOT_ACQUIRED = 75  # lock busy with --no-wait, or --wait ran out (EX_TEMPFAIL)
LEASE_LOST = 76  # the lease was lost while CMD ran; CMD was stopped
SIGNALLED = 128  # + N: signal N ended `run`'s wait for the lock, or killed CMD
