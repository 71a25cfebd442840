"""``redis+unix:///path?db=N`` (and redis-py's ``unix://``): bad URLs and a missing
socket are one clear line; the contract suite runs on a real socket (``redis-unix``)."""

from __future__ import annotations

from pathlib import Path

import pytest

import fencelock


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis+unix://host/redis.sock", "takes the socket's absolute path"),
        ("redis+unix:///run/redis.sock?db=one", "database must be a number, got 'one'"),
        ("unix:///run/redis.sock?colour=red", "colour"),
    ],
)
def test_bad_unix_urls_say_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(fencelock.ConfigError, match=message):
        fencelock.connect(url)


def test_a_missing_socket_is_unreachable_by_name(tmp_path: Path) -> None:
    socket = tmp_path / "nobody.sock"
    with pytest.raises(fencelock.BackendUnavailable, match=f"Redis at unix:{socket}"):
        fencelock.connect(f"redis+unix://{socket}")
