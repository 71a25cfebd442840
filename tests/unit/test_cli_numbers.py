"""The one check of the numbers given on the command line (fencelock.cli.numbers)."""

from __future__ import annotations

import math

import pytest

from fencelock.cli.numbers import COUNT, INTERVAL, SECONDS, TTL, Bounds, checked
from fencelock.errors import ConfigError


@pytest.mark.parametrize(
    ("value", "bounds", "expected"),
    [
        ("0", SECONDS, 0.0),
        (" 2.5 ", SECONDS, 2.5),
        (30.0, TTL, 30.0),
        ("0.5", INTERVAL, 0.5),
        ("-7", COUNT, -7),
        ("3", Bounds(least=1, most=5, whole=True, unit=""), 3),
        ("0.2", Bounds(least=0.2), 0.2),
    ],
)
def test_a_good_number_comes_back_as_a_number(
    value: object, bounds: Bounds, expected: float
) -> None:
    got = checked(value, "--x", bounds)
    assert got == expected
    assert type(got) is type(expected)


@pytest.mark.parametrize(
    ("value", "bounds", "words"),
    [
        ("nan", SECONDS, "--x must be a finite number, not nan"),
        (math.nan, SECONDS, "--x must be a finite number, not nan"),
        ("inf", SECONDS, "--x must be a finite number, not inf"),
        ("-inf", Bounds(least=None, most=None), "--x must be a finite number, not -inf"),
        ("1e999", SECONDS, "--x must be a finite number, not 1e999"),
        ("nan", TTL, "--x must be a finite number"),
        ("inf", TTL, "--x must be a finite number"),
        ("-1", TTL, "--x must be > 0 seconds"),
        ("1e9", TTL, "--x must be at most one year"),
        ("-1", SECONDS, "--x must be at least 0 seconds, got -1"),
        ("1e300", SECONDS, "--x must be at most one year"),
        ("0", INTERVAL, "--x must be more than 0 seconds, got 0"),
        ("abc", SECONDS, "--x takes a number of seconds, not 'abc'"),
        ("", SECONDS, "--x takes a number of seconds, not ''"),
        ("nan", COUNT, "--x takes a whole number, not 'nan'"),
        ("1.5", COUNT, "--x takes a whole number, not '1.5'"),
        ("0", Bounds(least=1, whole=True, unit=""), "--x must be at least 1, got 0"),
        (True, SECONDS, "--x takes a number of seconds"),
        (None, SECONDS, "--x takes a number of seconds"),
    ],
)
def test_a_bad_number_is_a_config_error_naming_the_option(
    value: object, bounds: Bounds, words: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        checked(value, "--x", bounds)
    assert words in str(raised.value)
    assert "\n" not in str(raised.value)
