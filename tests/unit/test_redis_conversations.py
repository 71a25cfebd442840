"""The Redis backends' pure parts: conversations, leftovers of an attempt, subscription state."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.exceptions import NoScriptError, ResponseError

from fencelock.backends.base import Acquired, Busy
from fencelock.backends.redis import conversations
from fencelock.backends.redis.attempt import Undo, UndoTracker, undoing
from fencelock.backends.redis.options import redis_options
from fencelock.backends.redis.scripts import ACQUIRE, KeyStyle, LockKeys, acquire_command
from fencelock.backends.redis.wakeups import Subscription, Wakeups
from fencelock.engine.urls import parse_url
from fencelock.errors import BackendUnavailable, ConfigError

KEYS = LockKeys.of("job")


def run(
    talk: conversations.Conversation[Any], answer: Callable[[bytes], Any]
) -> tuple[Any, list[bytes]]:
    """Run a conversation against ``answer`` (a reply, or a ResponseError to throw)."""
    said: list[bytes] = []
    talking = conversations.ConversationState(talk)
    while talking.command is not None:
        said.append(talking.command)
        talking.answer(answer(talking.command))
    return talking.result, said


def test_a_script_the_server_does_not_know_is_loaded_then_called_again() -> None:
    known: set[str] = set()
    command = acquire_command(KEYS, "me", 1.0, "chan", False)
    options = redis_options(parse_url("redis://h/0"))

    def answer(sent: bytes) -> Any:
        if sent == ACQUIRE.load_command:
            known.add(ACQUIRE.sha)
            return ACQUIRE.sha
        if ACQUIRE.sha not in known:
            return NoScriptError("NOSCRIPT No matching script")
        return [1, 7]

    result, said = run(conversations.acquire(command, KEYS, "me", options), answer)
    assert result == Acquired(7)
    assert said == [command[1], ACQUIRE.load_command, command[1]]
    result, said = run(conversations.acquire(command, KEYS, "me", options), answer)
    assert said == [command[1]]  # known now: called at once


def test_a_script_still_unknown_after_loading_it_fails_instead_of_looping() -> None:
    command = acquire_command(KEYS, "me", 1.0, "chan", False)
    options = redis_options(parse_url("redis://h/0"))

    def answer(sent: bytes) -> Any:
        return "sha" if sent == ACQUIRE.load_command else NoScriptError("NOSCRIPT")

    with pytest.raises(NoScriptError):
        run(conversations.acquire(command, KEYS, "me", options), answer)


def test_another_error_reply_ends_the_conversation() -> None:
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        run(conversations.release(KEYS, "me"), lambda _sent: ResponseError("WRONGTYPE"))


@given(st.integers(min_value=0, max_value=3), st.integers(min_value=0, max_value=3))
def test_acquire_waits_for_replicas_and_gives_back_a_lease_too_few_have(
    wanted: int, acked: int
) -> None:
    options = redis_options(parse_url(f"redis://h/0?wait_replicas={wanted}"))
    command = acquire_command(KEYS, "me", 1.0, "chan", False)
    replies = iter([[1, 5], acked, 1])
    if wanted and acked < wanted:
        with pytest.raises(BackendUnavailable, match="replicas acknowledged"):
            run(conversations.acquire(command, KEYS, "me", options), lambda _s: next(replies))
        return
    result, said = run(
        conversations.acquire(command, KEYS, "me", options), lambda _s: next(replies)
    )
    assert result == Acquired(5)
    assert len(said) == (2 if wanted else 1)


def test_a_busy_acquire_sends_no_wait() -> None:
    options = redis_options(parse_url("redis://h/0?wait_replicas=2"))
    command = acquire_command(KEYS, "me", 1.0, "chan", False)
    result, said = run(conversations.acquire(command, KEYS, "me", options), lambda _s: [0, 300])
    assert isinstance(result, Busy)
    assert said == [command[1]]


def test_held_pages_through_scan_and_keeps_only_held_locks() -> None:
    pages = {"0": ["7", ["fencelock:{a}", "fencelock:{b}"]], "7": ["0", ["fencelock:{a}"]]}

    def answer(sent: bytes) -> Any:
        if sent.split(b"\r\n")[2] == b"SCAN":
            cursor = sent.split(b"\r\n")[4].decode()
            return pages[cursor]
        return ["x", 900, "3", 0] if b"{a}" in sent else [None, -2, "4", 0]

    infos, said = run(conversations.held("", KeyStyle()), answer)
    assert [(i.name, i.owner, i.token) for i in infos] == [("a", "x", 3)]
    assert b"fencelock:{*}" in said[0]


def test_bare_keys_put_the_lock_at_its_name_and_find_it_by_its_token_counter() -> None:
    bare = KeyStyle(bare=True)
    keys = bare.of("jobs/nightly")
    assert keys.lock == "jobs/nightly"
    assert keys.token == "fencelock:{jobs/nightly}:token"  # the same cluster slot
    assert bare.scan_pattern("jobs/") == "fencelock:{jobs/*}:token"
    assert bare.name_of("fencelock:{jobs/nightly}:token") == "jobs/nightly"
    assert KeyStyle().of("jobs/nightly").lock == "fencelock:{jobs/nightly}"
    with pytest.raises(ConfigError, match="braces"):
        bare.of("a{b}")

    pages = {"0": ["0", ["fencelock:{a}:token", "fencelock:{b}:token"]]}

    def answer(sent: bytes) -> Any:
        parts = sent.split(b"\r\n")
        if parts[2] == b"SCAN":
            return pages[parts[4].decode()]
        assert parts[8] in (b"a", b"b"), parts  # the inspect script reads the bare key
        return ["x", 900, "3", 0] if parts[8] == b"a" else [None, -2, "4", 0]

    infos, _said = run(conversations.held("", bare), answer)
    assert [(i.name, i.owner, i.token) for i in infos] == [("a", "x", 3)]


class Cancelled(BaseException):
    """Stands for CancelledError or KeyboardInterrupt: the caller stopped waiting."""


def _attempt_ends(events: list[str]) -> list[str]:
    """An attempt ends at its grant or at its cancellation: nothing is tried after."""
    for i, event in enumerate(events):
        if event in ("acquired", "cancelled"):
            return events[: i + 1]
    return events


@given(st.lists(st.sampled_from(["busy", "acquired", "timeout", "refused", "cancelled"])))
def test_closing_undoes_the_worst_thing_a_request_may_have_left(events: list[str]) -> None:
    events = _attempt_ends(events)
    left = UndoTracker("first.x")
    for event in events:
        left.before_try()
        try:
            with left.sending():
                if event == "busy":
                    left.answered(Busy(1.0))
                elif event == "acquired":
                    left.answered(Acquired(1))
                elif event == "timeout":
                    raise BackendUnavailable("no answer") from TimeoutError("timed out")
                elif event == "refused":
                    raise BackendUnavailable("refused") from ConnectionRefusedError()
                else:
                    raise Cancelled()
        except (BackendUnavailable, Cancelled):
            pass
    # What the final owner's tries left: those after the last unanswered one (whose
    # owner went to its undo as the next try began).
    final = events[_last_timeout(events) + 1 :] if "timeout" in events else events
    expected = (
        Undo.NOW
        if "cancelled" in events
        else Undo.LATER
        if events[-1:] == ["timeout"]
        else Undo.LEAVE_QUEUE
        if _last_answer(final) == "busy"
        else Undo.NOTHING
    )
    assert left.undo() is expected
    assert left.undo() is Undo.NOTHING


@given(st.lists(st.sampled_from(["busy", "acquired", "timeout", "refused"])))
def test_an_undo_never_names_the_owner_of_a_grant(events: list[str]) -> None:
    """Every try after an unanswered one stores a fresh owner; the unanswered try's
    owner is handed back for its undo, and a grant's owner is never undone (the bug:
    a late undo of a reused owner deleted the retry's fresh grant)."""
    events = _attempt_ends(events)
    left = UndoTracker("first.x")
    undone: list[str] = []
    unanswered: list[str] = []
    granted: list[str] = []
    for event in events:
        stale = left.before_try()
        if stale is not None:
            undone.append(stale)
        with contextlib.suppress(BackendUnavailable), left.sending():
            if event == "timeout":
                unanswered.append(left.owner)
                raise BackendUnavailable("no answer") from TimeoutError("timed out")
            if event == "refused":
                raise BackendUnavailable("refused") from ConnectionRefusedError()
            result = left.answered(Acquired(1) if event == "acquired" else Busy(1.0))
            if isinstance(result, Acquired):
                granted.append(result.owner or "first.x")
    if left.undo() is not Undo.NOTHING:
        undone.append(left.owner)
    assert not set(granted) & set(undone)
    assert set(unanswered) <= set(undone)  # what may still land is given back
    assert all(owner.endswith(".x") for owner in undone + granted)  # who we are stays


def _last_timeout(events: list[str]) -> int:
    return len(events) - 1 - events[::-1].index("timeout")


def _last_answer(events: list[str]) -> str | None:
    answers = [e for e in events if e in ("busy", "acquired")]
    return answers[-1] if answers else None


def test_only_an_undo_now_or_a_queue_place_is_said_at_once() -> None:
    assert undoing(Undo.NOTHING, KEYS, "me", "c") is None
    assert undoing(Undo.LATER, KEYS, "me", "c") is None
    assert undoing(Undo.LEAVE_QUEUE, KEYS, "me", "c") is not None
    assert undoing(Undo.NOW, KEYS, "me", "c") is not None


def test_a_subscription_is_confirmed_refused_or_late() -> None:
    wakeups: Wakeups[asyncio.Event] = Wakeups(asyncio.Event, _NoGuard())
    state = Subscription("Redis at h:1", timeout=2.0)
    assert state.time_left(deadline=10.0, now=9.5) == 0.5
    with pytest.raises(BackendUnavailable, match="did not confirm"):
        state.time_left(deadline=10.0, now=10.0)
    assert state.on_message({"type": "subscribe", "data": 1}, wakeups)
    assert state.time_left(deadline=10.0, now=11.0) is None
    waiter = wakeups.expect("w1")
    assert not state.on_message({"type": "message", "data": "w1"}, wakeups)
    assert waiter.is_set()
    assert state.on_error(ResponseError("NOPERM no channel"), wakeups)
    with pytest.raises(BackendUnavailable, match="NOPERM"):
        state.time_left(deadline=10.0, now=9.0)
    state.restart()
    assert not state.on_error(ConnectionError("reset"), wakeups)


class _NoGuard:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
