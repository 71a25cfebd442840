from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import fencelock
from fencelock.engine.names import MAX_NAME_LENGTH, validate_name
from fencelock.engine.timing import REQUEST_BOUND
from fencelock.engine.urls import parse_url
from fencelock.errors import ConfigError

part = st.from_regex(r"[A-Za-z0-9_:@=+-][A-Za-z0-9_.:@=+-]{0,10}", fullmatch=True)


@given(st.lists(part, min_size=1, max_size=5))
def test_valid_names_pass(parts: list[str]) -> None:
    name = "/".join(parts)
    if len(name) <= MAX_NAME_LENGTH:
        assert validate_name(name) == name


@given(st.text(min_size=1, max_size=20).filter(lambda s: any(c in s for c in " \n\t\0{}#%?*")))
def test_names_with_forbidden_characters_fail(name: str) -> None:
    with pytest.raises(ConfigError, match="lock name"):
        validate_name(name)


def test_non_str_name() -> None:
    with pytest.raises(ConfigError, match="must be a str"):
        validate_name(b"x")


def test_parse_multi_host_url_with_credentials() -> None:
    parsed = parse_url("redlock://u:p%40ss@h1:7001,h2:7002,[::1]:7003/0?timeout=0.05")
    assert parsed.scheme == "redlock"
    assert parsed.hosts == (("h1", 7001), ("h2", 7002), ("::1", 7003))
    assert parsed.username == "u"
    assert parsed.password == "p@ss"
    assert parsed.options == {"timeout": "0.05"}
    assert "p%40ss" not in parsed.redacted
    assert "***" in parsed.redacted


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("no-scheme", "expected scheme://"),
        ("redis://h:99999", "bad port"),
        ("redis://h:x", "bad port"),
        ("redis://h,,k", "empty host"),
        ("redis://h?a=1&a=2", "given twice"),
        (5, "must be a str"),
    ],
)
def test_bad_urls(url: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_url(url)


def test_connect_options_must_be_plain_values() -> None:
    import fencelock

    with pytest.raises(ConfigError, match="option 'timeout' must be a number, a string or a bool"):
        fencelock.connect("memory://", timeout=[1])


def test_the_request_bound_is_taken_out_of_the_options() -> None:
    parsed = parse_url("etcd://h:1?request_bound=2.5&timeout=4")
    assert parsed.request_bound == 2.5
    assert parsed.options == {"timeout": "4"}  # the family never sees it
    assert parse_url("etcd://h:1").request_bound == REQUEST_BOUND


@pytest.mark.parametrize("text", ["0", "-1", "soon", "nan", "inf", "-inf", "1e999"])
def test_a_bad_request_bound_is_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError, match=f"request_bound={text!r}"):
        parse_url(f"zookeeper://h:1?request_bound={text}")


@pytest.mark.parametrize("scheme", ["memory", "sqlite"])
def test_every_scheme_takes_a_request_bound(scheme: str, tmp_path: Path) -> None:
    url = "memory://x" if scheme == "memory" else f"sqlite:///{tmp_path / 'bound.db'}"
    with fencelock.connect(f"{url}?request_bound=7") as client:
        assert client.internals.backend.request_bound == 7.0


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("memory://app:secret@store", "takes no user or password"),
        ("memory://store:6379", "not a port"),
    ],
)
def test_a_memory_url_with_credentials_or_a_port_is_refused(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        fencelock.connect(url)
    assert "secret" not in str(refused.value)
