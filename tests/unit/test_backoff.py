"""The one retry schedule (fencelock.engine.backoff), and that every retry loop uses it."""

from __future__ import annotations

import functools
import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fencelock.engine import acquire
from fencelock.engine.backoff import Backoff
from fencelock.errors import ConfigError
from fencelock.sql.backoff import RetryPolicy

seconds = st.floats(min_value=0.0, max_value=10.0, allow_nan=False)
spreads = st.floats(min_value=0.0, max_value=1.0)
draws = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)


@st.composite
def schedules(draw: st.DrawFn) -> Backoff:
    first = draw(seconds)
    return Backoff(first, first + draw(seconds), draw(spreads))


@given(schedules(), st.integers(min_value=0, max_value=200), draws)
def test_a_wait_lies_in_the_upper_spread_of_its_window(
    backoff: Backoff, retry: int, random: float
) -> None:
    window = backoff.window(retry)
    wait = backoff.delay(retry, lambda: random)
    assert window * (1 - backoff.spread) - 1e-12 <= wait <= window + 1e-12


@given(schedules())
def test_windows_double_from_first_up_to_the_cap(backoff: Backoff) -> None:
    windows = [backoff.window(n) for n in range(80)]
    assert windows[0] == backoff.first
    assert windows == sorted(windows)
    assert windows[-1] == backoff.cap
    for before, after in itertools.pairwise(windows):
        assert after == min(backoff.cap, before * 2) or after == backoff.cap


@given(schedules(), st.lists(draws, min_size=1, max_size=30))
def test_waits_are_the_delays_in_order(backoff: Backoff, randoms: list[float]) -> None:
    drawn = iter(randoms)
    waits = list(itertools.islice(backoff.waits(lambda: next(drawn)), len(randoms)))
    assert waits == [backoff.delay(n, functools.partial(float, r)) for n, r in enumerate(randoms)]


@pytest.mark.parametrize(
    ("first", "cap", "spread", "message"),
    [
        (-1.0, 1.0, 1.0, "first must be finite"),
        (1.0, 0.5, 1.0, "cap"),
        (0.1, 1.0, 1.5, "spread"),
        (float("inf"), float("inf"), 1.0, "finite"),
    ],
)
def test_a_bad_schedule_is_a_config_error(
    first: float, cap: float, spread: float, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        Backoff(first, cap, spread)


def test_the_acquire_flow_and_optimistic_updates_use_the_one_schedule() -> None:
    assert acquire.BUSY.spread == 0.5  # equal jitter, as the module says
    assert acquire.BUSY.delay(3, lambda: 0.0) == acquire.MIN_BACKOFF * 8 / 2
    policy = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.5)
    assert policy.delay(2, lambda: 0.5) == Backoff(0.01, 0.5, 1.0).delay(2, lambda: 0.5)


def test_no_module_writes_a_backoff_of_its_own() -> None:
    """A hand-written doubling (``min(pause * 2, cap)``) outside engine/backoff.py."""
    source = Path(__file__).parents[2] / "src" / "fencelock"
    doubling = [
        f"{path.relative_to(source)}:{number}"
        for path in source.rglob("*.py")
        if path.name != "backoff.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "* 2," in line and "min(" in line
    ]
    assert doubling == []
