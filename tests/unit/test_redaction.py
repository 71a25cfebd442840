"""Passwords in backend URLs never reach an error message; reserved characters in them
either parse (percent-encoded) or are refused with the fix in the message."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fencelock
from fencelock.engine.urls import parse_url, redact

SECRET = "s3cretPW"


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        (f"redis://app:{SECRET}@127.0.0.1:99999/0", "bad port '99999'"),
        (f"redis://app:{SECRET}@127.0.0.1:1/0?timeout=1&timeout=2", "given twice"),
        (f"redis://app:{SECRET}@[::1/0", "malformed backend URL"),
        (f"redis://app:{SECRET}@127.0.0.1:1/0?timeout=1&&", "malformed query"),
        (f"sqlite://app:{SECRET}@host/x.db", "has a host"),
        (f"memory://app:{SECRET}@a,b", "one store name"),
        (f"nosuch://app:{SECRET}@host/0", "unknown scheme"),
        (f"redis://app:{SECRET}@h1:1,h2:2/0", "exactly one host"),
        (f"redis://app:{SECRET}@127.0.0.1:1/x", "database must be a number"),
        (f"redlock://app:{SECRET}@h1:1,h1:1,h2:2", "listed twice"),
        (f"redis:/app:{SECRET}@127.0.0.1:1/0", "expected scheme://"),
    ],
)
def test_config_errors_hide_the_password(url: str, fragment: str) -> None:
    for open_client in (fencelock.connect, fencelock.aconnect):
        with pytest.raises(fencelock.ConfigError) as caught:
            open_client(url)
        message = str(caught.value)
        assert fragment in message, message
        assert SECRET not in message, message
        assert SECRET not in repr(caught.value.args), message


def test_redact_keeps_everything_but_the_password() -> None:
    assert redact("redis://app:pw@host:6379/0?timeout=1") == "redis://app:***@host:6379/0?timeout=1"
    assert redact("redis://:pw@host/0") == "redis://:***@host/0"
    assert redact("redis://app@host/0") == "redis://app@host/0"  # a user name is no secret
    assert (
        redact("redis://host:1/0?ssl_ca_certs=/c@d.pem") == "redis://host:1/0?ssl_ca_certs=/c@d.pem"
    )
    assert redact("sqlite:////var/lib/a@b.db") == "sqlite:////var/lib/a@b.db"
    assert redact("redlock://u:p%40ss@h1:1,h2:2,h3:3") == "redlock://u:***@h1:1,h2:2,h3:3"


def test_parsed_url_and_its_repr_hide_the_password() -> None:
    from fencelock.backends.redis.options import redis_options

    parsed = parse_url(f"redis://app:{SECRET}@host/0")
    assert parsed.password == SECRET
    assert parsed.redacted == "redis://app:***@host/0"
    assert SECRET not in repr(parsed)
    options = redis_options(parsed)
    assert options.password == SECRET
    assert SECRET not in repr(options)


@pytest.mark.parametrize("char", ["#", "/", "?"])
def test_a_percent_encoded_reserved_character_in_a_password_parses(char: str) -> None:
    password = f"pa{char}ss"
    parsed = parse_url(f"redis://app:{quote(password, safe='')}@127.0.0.1:6379/0")
    assert parsed.password == password
    assert parsed.hosts == (("127.0.0.1", 6379),)
    assert parsed.redacted == "redis://app:***@127.0.0.1:6379/0"


@pytest.mark.parametrize(
    "password", ["pa#ss", "12#34", "pa/ss", "12/34", "pa?ss", "12?34", "p?a=b#c"]
)
def test_a_raw_reserved_character_in_a_password_says_to_percent_encode_it(password: str) -> None:
    url = f"redis://app:{password}@127.0.0.1:6379/0?timeout=1"
    with pytest.raises(fencelock.ConfigError) as caught:
        parse_url(url)
    message = str(caught.value)
    assert "percent-encode" in message, message
    assert "%23" in message, message
    assert password not in message, message
    assert "redis://app:***@127.0.0.1:6379/0" in message, message


def test_a_raw_hash_anywhere_is_refused() -> None:
    with pytest.raises(fencelock.ConfigError, match="percent-encode it as %23"):
        parse_url("sqlite:///tmp/a#b.db")


@pytest.mark.parametrize(
    ("hosts", "expected"),
    [
        ("127.0.0.1:6379", (("127.0.0.1", 6379),)),
        ("[::1]", (("::1", None),)),
        ("[::1]:7000", (("::1", 7000),)),
        ("h1:1,h2:2,h3", (("h1", 1), ("h2", 2), ("h3", None))),
    ],
)
def test_an_at_sign_in_a_query_value_is_not_a_password(
    hosts: str, expected: tuple[tuple[str, int | None], ...]
) -> None:
    url = f"redlock://{hosts}/0?ssl_ca_certs=/certs/ca@home.pem"
    parsed = parse_url(url)
    assert parsed.password is None
    assert parsed.hosts == expected
    assert parsed.options == {"ssl_ca_certs": "/certs/ca@home.pem"}
    assert redact(url) == url


# -- property: no message built from a URL with a password contains it ----------------

# One character no fencelock message has, so a password is never part of a message's fixed
# text by chance (hypothesis tries the library's own string constants, such as option names).
passwords = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), min_size=8, max_size=24
).filter(lambda p: any(c in "!$^~|" or ord(c) > 127 for c in p))
hosts = st.sampled_from(
    [
        "127.0.0.1:1",
        "127.0.0.1:99999",
        "[::1:1",
        "127.0.0.1:1,127.0.0.1:2",
        "127.0.0.1:1,127.0.0.1:1,127.0.0.1:3",
        "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3",
        "h:x",
    ]
)
tails = st.sampled_from(
    [
        "/0?connect_timeout=0.05&timeout=0.05",
        "/0?timeout=1&timeout=2",
        "/zero?connect_timeout=0.05",
        "/0?colour=blue",
        "/0?timeout=abc",
        "/0?ssl_cert_reqs=sometimes",
        "/0?ssl_check_hostname=maybe",
        "?timeout=0.05&connect_timeout=0.05",
        "/x.db",
        "",
    ]
)
schemes = st.sampled_from(["redis", "rediss", "redlock", "redlocks", "sqlite", "memory", "nope"])


def _messages(url: str) -> list[str]:
    """Every error message that opening ``url`` (sync, then asyncio) produced.

    Every URL here has a host, so none opens an SQLite file; servers are on closed ports.
    """
    messages = []
    try:
        with fencelock.connect(url) as client:
            client.inspect("x")  # a first use: Redlock's blocking client connects here
    except fencelock.FencelockError as exc:
        messages.append(f"{exc} {exc.args!r}")

    async def first_use() -> None:
        async with fencelock.aconnect(url) as client:
            await client.inspect("x")

    try:
        asyncio.run(first_use())
    except fencelock.FencelockError as exc:
        messages.append(f"{exc} {exc.args!r}")
    return messages


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scheme=schemes,
    user=st.sampled_from(["", "app"]),
    password=passwords,
    encoded=st.booleans(),
    host=hosts,
    tail=tails,
)
def test_no_error_message_contains_the_password(
    scheme: str, user: str, password: str, encoded: bool, host: str, tail: str
) -> None:
    written = quote(password, safe="") if encoded else password
    url = f"{scheme}://{user}:{written}@{host}{tail}"
    messages = _messages(url)
    assert len(messages) == 2, (url, messages)  # neither variant opens it: both say why
    for message in messages:
        assert password not in message, (url, message)
        assert written not in message, (url, message)


def test_the_cli_reports_a_bad_url_without_its_password() -> None:
    fencelock_cli = str(Path(sys.executable).parent / "fencelock")
    done = subprocess.run(
        [fencelock_cli, "status", "--url", f"redis://app:{SECRET}@127.0.0.1:99999/0", "x"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 64, done
    assert "bad port '99999'" in done.stderr, done.stderr
    assert "redis://app:***@" in done.stderr, done.stderr
    assert SECRET not in done.stderr + done.stdout
