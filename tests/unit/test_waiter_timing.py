"""fencelock.testing.waiter_timing: the one door tests set waiter timing through."""

from __future__ import annotations

import pytest

from fencelock.backends.redis import scripts
from fencelock.backends.redis.scripts import LockKeys
from fencelock.engine import barging
from fencelock.errors import ConfigError
from fencelock.testing import waiter_timing


def test_it_sets_the_rule_and_the_redis_scripts_arguments_then_puts_them_back() -> None:
    before = (barging.WAITER_REFRESH, barging.WAITER_LIVENESS)
    keys = LockKeys.of("timing/x")
    with waiter_timing(refresh=10.0, liveness=30.0):
        assert (barging.WAITER_REFRESH, barging.WAITER_LIVENESS) == (10.0, 30.0)
        _, packed = scripts.acquire_command(keys, "me", 5.0, "ch", fair=False)
        assert b"30000" in packed  # the liveness the script is given, in ms
    assert before == (barging.WAITER_REFRESH, barging.WAITER_LIVENESS)
    _, packed = scripts.acquire_command(keys, "me", 5.0, "ch", fair=False)
    assert b"30000" not in packed


@pytest.mark.parametrize(("refresh", "liveness"), [(0, 3), (-1, 3), (3, 3), (5, 3)])
def test_timing_a_waiter_could_not_keep_is_refused(refresh: float, liveness: float) -> None:
    with (
        pytest.raises(ConfigError, match="0 < refresh < liveness"),
        waiter_timing(refresh, liveness),
    ):
        pass
