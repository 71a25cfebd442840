"""The library's historical bugs, put back by patching the code under test: each patch
swaps in the old behaviour of one small function or method, and is registered here for
``--bug NAME``. The library names none of them (tests/unit/test_no_bug_switches.py)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import sys
from collections.abc import Generator, Iterable, Iterator, Sequence
from typing import Any

from fencelock import clock
from fencelock.sim.put_back import patched, put_back_by


def _no_trust_at_send() -> contextlib.AbstractContextManager[None]:
    """A renew or extend request that lowered nothing as it went out: an extend to a
    shorter TTL was trusted as before until its answer came."""
    from fencelock.lease import LeaseBase

    def sending(self: LeaseBase, started: float, ttl: float) -> None:
        return None

    return patched(LeaseBase, "_sending", sending)


def _trust_from_reply() -> contextlib.AbstractContextManager[None]:
    """A renewal's trust counted from when its reply was read."""
    from fencelock import lease

    def since(started: float, renewed: object) -> float:
        return clock.now()

    return patched(lease, "renewed_since", since)


def _late_try_forgotten() -> contextlib.AbstractContextManager[None]:
    """A grant that forgot its acquisition's unanswered tries."""
    from fencelock.engine import acquire

    def floor(ttl: float, *, unanswered: bool) -> float:
        return math.inf

    return patched(acquire, "ttl_floor", floor)


def _extend_renewal_race() -> contextlib.AbstractContextManager[None]:
    """An asyncio lease's renew and extend requests sent without waiting for each other."""
    from fencelock.lease import AsyncLease

    def any_number(self: AsyncLease) -> contextlib.AbstractAsyncContextManager[object]:
        return contextlib.nullcontext()

    return patched(AsyncLease, "_one_at_a_time", any_number)


def _renewer_stale_round() -> contextlib.AbstractContextManager[None]:
    """The renewer renewing each lease of its round without looking again whether the
    renewals before it had taken it past its safe time: it died on such a lease."""
    from fencelock import renewer

    def always(one: object) -> bool:
        return True

    return patched(renewer, "still_to_renew", always)


def _redlock_guessed_holder() -> contextlib.AbstractContextManager[None]:
    """Redlock's inspect answering from the nodes that answered alone."""
    from fencelock.engine import redlock

    def never(agreeing: Iterable[Sequence[int]], silent: int, quorum: int) -> bool:
        return False

    return patched(redlock, "silent_could_make_a_holder", never)


def _latch_stale_count_list() -> contextlib.AbstractContextManager[None]:
    """A latch's repair deciding on the counts it had listed before it read ``closed``."""
    from fencelock.engine import latch

    def listed_before(names: object) -> Generator[Any, Any, tuple[str, ...]]:
        return ()
        yield  # a generator that asks for nothing

    return patched(latch, "counts_now", listed_before)


@contextlib.contextmanager
def _etcd_late_release() -> Iterator[None]:
    """An etcd release whose reply was lost freeing its key for the client's next
    contender at once, and a contender adopting a key an earlier lease had left: the
    resent delete, landing late, deleted the next holder's key."""
    from fencelock.backends.etcd.backend import AsyncEtcdBackend, EtcdAttempt

    resend: Any = AsyncEtcdBackend._delete_eventually

    async def resend_and_free(
        self: AsyncEtcdBackend, session: Any, delete: Any, key: bytes
    ) -> None:
        await resend(self, session, delete, key)
        self.unclaim(key)

    def never(self: EtcdAttempt, value: bytes) -> bool:
        return False

    with (
        patched(AsyncEtcdBackend, "_delete_eventually", resend_and_free),
        patched(EtcdAttempt, "_an_earlier_leases_key", never),
    ):
        yield


class _ReusedNumbers:
    """A task known by the lowest number no running task has, as
    ``threading.get_ident()`` once knew a thread (so a new one entered the re-entrant
    lease of one that had ended)."""

    def __init__(self) -> None:
        self._numbers: dict[asyncio.Task[object], int] = {}

    def __call__(self) -> object:
        task = asyncio.current_task()
        if task is None:
            return None
        number = self._numbers.get(task)
        if number is None:
            taken = set(self._numbers.values())
            number = next(n for n in range(len(taken) + 1) if n not in taken)
            self._numbers[task] = number
            task.add_done_callback(self._numbers.pop)
        return number


@contextlib.contextmanager
def _reused_holder_id() -> Iterator[None]:
    """Every module that names a task holder by ``this_task`` names it by number."""
    from fencelock import client_leases

    real, numbered = client_leases.this_task, _ReusedNumbers()
    modules = [m for m in list(sys.modules.values()) if getattr(m, "this_task", None) is real]
    with contextlib.ExitStack() as stack:
        for module in modules:
            stack.enter_context(patched(module, "this_task", numbered))
        yield


put_back_by(
    "trust-from-reply",
    "a renewal's trust counted from its reply, not from when it was sent",
    _trust_from_reply,
)
put_back_by(
    "no-trust-at-send",
    "an extend to a shorter TTL trusted as before until its answer came",
    _no_trust_at_send,
)
put_back_by(
    "late-try-forgotten",
    "an acquire's unanswered try, landing after an extend, not bounding it",
    _late_try_forgotten,
)
put_back_by(
    "extend-renewal-race",
    "an extend and a renewal of one lease in flight at once",
    _extend_renewal_race,
)
put_back_by(
    "reused-holder-id",
    "a holder known by a number the next one gets once it ends (a thread id)",
    _reused_holder_id,
)
put_back_by(
    "renewer-stale-round",
    "the renewer dying on a lease that passed its safe time mid-round",
    _renewer_stale_round,
)
put_back_by(
    "redlock-guessed-holder",
    "Redlock's inspect saying 'not held' when silent nodes could hold it",
    _redlock_guessed_holder,
)
put_back_by(
    "latch-stale-count-list",
    "a latch's repair taking counts listed before an arming for none",
    _latch_stale_count_list,
)
put_back_by(
    "etcd-late-release",
    "a resent etcd release landing late, deleting the same client's next key",
    _etcd_late_release,
)
