"""ShedLock's two durations, without I/O (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fencelock.engine.once import once_terms
from fencelock.engine.timing import MIN_TTL
from fencelock.errors import ConfigError

seconds = st.floats(0.01, 3600)


@given(seconds, st.floats(0, 1), st.floats(0, 7200))
def test_the_name_stays_taken_until_at_least_after_the_start(
    at_most: float, share: float, elapsed: float
) -> None:
    terms = once_terms(at_most, at_most * share)
    keep = terms.keep_for(elapsed)
    if elapsed >= terms.at_least:
        assert keep is None  # released at once
    else:
        assert keep is not None
        assert keep >= MIN_TTL
        assert elapsed + keep >= terms.at_least * (1 - 1e-12)  # never freed before at_least
        assert keep <= max(terms.at_least - elapsed, MIN_TTL)  # nor kept longer than needed


def test_no_at_least_means_release_at_once() -> None:
    assert once_terms(60).keep_for(0.0) is None


@pytest.mark.parametrize(
    ("at_most", "at_least", "message"),
    [
        (0, 0, "at_most must be > 0"),
        (10, -1, "at_least must be >= 0"),
        (10, "5", "at_least must be a number"),
        (10, 30, "longer than at_most"),
        (float("nan"), 0, "at_most must be > 0"),
    ],
)
def test_bad_durations_are_named(at_most: float, at_least: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        once_terms(at_most, at_least)
