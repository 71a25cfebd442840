"""``fencelock top``: the live view, run in a real terminal (tmux), its screen read back
as it refreshes; and its pure part (held-for, rates) without I/O."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

import fencelock
from fencelock import metrics
from fencelock.backends.base import LockInfo
from fencelock.cli.top_view import TopState, under
from fencelock.metrics.registry import PrefixMetrics
from fencelock.primitives.lock import new_owner
from tests.cli.conftest import FENCELOCK, fencelock_cmd
from tests.polling import wait_until


def test_held_for_counts_from_the_first_refresh_that_saw_the_lease() -> None:
    state = TopState()
    held = LockInfo("a/1", "ab" * 20, 7, 10.0, 0)
    (first,) = state.rows([held], now=100.0, wall=5000.0)
    assert first.held_for == 0
    assert not first.since_start  # there before we looked
    (later,) = state.rows([held], now=103.0, wall=5003.0)
    assert later.held_for == 3.0
    assert not later.since_start
    taken_again = LockInfo("a/1", "cd" * 20, 8, 10.0, 1)
    (new,) = state.rows([taken_again], now=104.0, wall=5004.0)
    assert new.held_for == 0
    assert new.since_start
    assert new.holder == "cdcdcdcd"
    assert state.rows([LockInfo("a/1", None, 8, None, 0)], now=105.0, wall=5005.0) == []


def test_held_for_is_the_backends_own_record_when_it_keeps_one() -> None:
    state = TopState()
    owner = new_owner()
    held = LockInfo("a/1", owner, 7, 10.0, 0, since=4990.0)
    (row,) = state.rows([held], now=100.0, wall=5000.0)
    assert row.held_for == 10.0
    assert row.since_start
    assert row.holder == f"{socket.gethostname()}:{os.getpid()}"


def test_rates_are_taken_between_two_scrapes() -> None:
    state = TopState()
    one = PrefixMetrics("orders", acquisitions=10, contended=2)
    (first,) = state.rates({"orders": one}, now=0.0)
    assert first.acquisitions_per_s == 0
    assert first.contention is None
    two = PrefixMetrics("orders", acquisitions=30, contended=12, fencing_rejections=1)
    (second,) = state.rates({"orders": two}, now=2.0)
    assert second.acquisitions_per_s == 10.0
    assert second.contention == 0.5
    assert second.rejections == 1


TMUX = shutil.which("tmux")


def _screen(session: str) -> str:
    assert TMUX is not None
    done = subprocess.run(
        [TMUX, "capture-pane", "-p", "-t", session], capture_output=True, text=True, check=False
    )
    return done.stdout


def _wait_for(session: str, check: str | Callable[[str], bool]) -> str:
    """The screen once it shows ``check`` (a text, or a test of the whole screen)."""

    def showing() -> str:
        screen = _screen(session)
        return screen if (check(screen) if callable(check) else check in screen) else ""

    return wait_until(
        showing,
        what=lambda: f"{check!r} on the screen; it shows:\n{_screen(session)}",
        interval=0.2,
    )


@pytest.mark.skipif(TMUX is None, reason="tmux (make servers installs it)")
def test_top_shows_the_locks_live_in_a_terminal(tmp_path: Path) -> None:
    assert TMUX is not None
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    prefix = f"top{secrets.token_hex(3)}"
    server = metrics.serve(0)
    session = f"fencelock-top-{secrets.token_hex(3)}"
    command = (
        f"{FENCELOCK} top {prefix}/ --url {url} --interval 0.3 "
        f"--metrics http://127.0.0.1:{server.server_port}/metrics"
    )
    subprocess.run(
        [TMUX, "new-session", "-d", "-s", session, "-x", "150", "-y", "40", command], check=True
    )
    try:
        with fencelock.connect(url) as client:
            elsewhere = f"other{secrets.token_hex(3)}"
            client.lock(f"{elsewhere}/job", ttl=60).acquire().release()  # in the metrics too
            first = client.lock(f"{prefix}/orders/1", ttl=60).acquire()
            second = client.lock(f"{prefix}/orders/2", ttl=60).acquire()
            screen = _wait_for(session, f"{prefix}/orders/2")
            assert screen.count(f"{socket.gethostname()}:{os.getpid()}") == 2  # the holder
            assert f"2 held under '{prefix}/'" in screen
            # the metrics' rates table, scraped on its own and so perhaps a refresh behind
            rates = _wait_for(session, lambda shown: prefix in shown.split("by prefix")[-1])
            assert elsewhere not in rates  # top PREFIX/ rates only what is under it
            first.release()
            _wait_for(session, f"1 held under '{prefix}/'")
            assert f"{prefix}/orders/1 " not in _screen(session)
            second.release()
            _wait_for(session, f"0 held under '{prefix}/'")
    finally:
        subprocess.run([TMUX, "kill-session", "-t", session], check=False)
        server.shutdown()


def test_top_refuses_bad_settings_in_one_line(env: dict[str, str]) -> None:
    fast = fencelock_cmd(env, "top", "--interval", "0.01", "--once")
    assert fast.returncode == 64
    assert "--interval must be at least 0.2" in fast.stderr
    none = fencelock_cmd(env, "top", "--limit", "0", "--once")
    assert none.returncode == 64
    assert "--limit must be at least 1" in none.stderr
    shown = fencelock_cmd(env, "top", "--once")
    assert shown.returncode == 0
    assert "0 held under '(all)'" in shown.stdout


def test_top_rates_only_the_labels_under_its_prefix() -> None:
    found = {label: PrefixMetrics(label) for label in ("orders", "orders/eu", "jobs", "-")}
    assert set(under(found, "orders/")) == {"orders", "orders/eu"}
    assert set(under(found, "orders/eu/7")) == {"orders", "orders/eu"}
    assert set(under(found, "ord")) == set()  # whole parts, not characters
    assert set(under(found, "")) == set(found)
