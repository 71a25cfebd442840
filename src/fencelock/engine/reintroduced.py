"""Historical bugs, put back on purpose: a switch per bug, off unless the simulator
(:mod:`fencelock.sim`) turns one on to show that it finds it. Nothing else sets them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from fencelock.errors import ConfigError

# Each switch, and the bug it puts back.
KNOWN = {
    "trust-from-reply": "a renewal's trust counted from its reply, not from when it was sent",
    "no-trust-at-send": "an extend to a shorter TTL trusted as before until its answer came",
    "late-try-forgotten": "an acquire's unanswered try, landing after an extend, not bounding it",
    "extend-renewal-race": "an extend and a renewal of one lease in flight at once",
    "reused-holder-id": "a holder known by a number the next one gets once it ends (a thread id)",
    "renewer-stale-round": "the renewer dying on a lease that passed its safe time mid-round",
    "redlock-guessed-holder": "Redlock's inspect saying 'not held' when silent nodes could hold it",
    "latch-stale-count-list": "a latch's repair taking counts listed before an arming for none",
    "etcd-late-release": "a resent etcd release landing late, deleting the same client's next key",
}

_on: set[str] = set()


def on(bug: str) -> bool:
    """Whether ``bug`` is put back now."""
    return bug in _on


# How a bug is put back where a flag read in place would cost every call: a context
# that swaps the old code in, registered by the module the bug lived in.
_putting_back: dict[str, Callable[[], contextlib.AbstractContextManager[None]]] = {}


def put_back_by(bug: str, context: Callable[[], contextlib.AbstractContextManager[None]]) -> None:
    """``context()`` puts ``bug`` back while it is entered."""
    _putting_back[bug] = context


@contextlib.contextmanager
def reintroduced(*bugs: str) -> Iterator[None]:
    """Within: ``bugs`` are back."""
    unknown = set(bugs) - set(KNOWN)
    if unknown:
        raise ConfigError(f"no such historical bug: {', '.join(sorted(unknown))}")
    before = set(_on)
    _on.clear()
    _on.update(bugs)
    try:
        with contextlib.ExitStack() as stack:
            for bug in bugs:
                if bug in _putting_back:
                    stack.enter_context(_putting_back[bug]())
            yield
    finally:
        _on.clear()
        _on.update(before)
