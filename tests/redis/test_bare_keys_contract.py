"""``redis://…?keys=bare`` (a lock at its name, where redis-py keeps it) through the
contract suite's own tests: the core contract and fair locks, run here on a real
redis-server with bare keys (the whole suite runs on the default keys)."""

from __future__ import annotations

import pytest

import fencelock
from fencelock.testing import RedisServer
from tests.contract.conftest import (  # noqa: F401 - the contract's clients, on bare keys
    BackendCase,
    client,
    other,
    patient,
)
from tests.contract.test_contract import (  # noqa: F401 - collected here, on bare keys
    test_acquire_release_and_tokens_increase,
    test_extend_and_release_twice,
    test_failed_acquire_in_with_does_not_run_body,
    test_held_lock_excludes_others,
    test_inspect_and_list,
    test_inspect_and_list_say_who_holds_it_and_since_when,
    test_lease_expires_without_renewal,
    test_leaving_with_after_loss_raises,
    test_mutual_exclusion_across_workers,
    test_non_owner_cannot_release_or_renew,
    test_owners_are_unique_per_attempt,
    test_renewal_keeps_the_lease,
    test_since_is_when_a_waiter_was_granted_not_when_it_asked,
    test_taken_over_lease_is_lost_at_renewal,
    test_tokens_survive_restart,
    test_waiter_takes_an_expired_lease_promptly,
    test_waiter_wakes_promptly_on_release,
)
from tests.contract.test_fair import (  # noqa: F401
    fair_client,
    test_fair_lock_serves_waiters_in_arrival_order,
    test_fair_waiter_that_gives_up_leaves_the_line,
)


@pytest.fixture
def backend(plain_redis: RedisServer) -> BackendCase:
    return BackendCase(patient(plain_redis.url + "?keys=bare"), cross_process=True, persistent=True)


def test_the_lock_is_at_its_name(
    client: fencelock.Client,  # noqa: F811 - the imported fixture
    plain_redis: RedisServer,
    name: str,
) -> None:
    import redis

    with client.lock(name) as lease, redis.Redis.from_url(plain_redis.url) as raw:
        assert raw.get(name) == lease.owner.encode()
        assert raw.exists(f"fencelock:{{{name}}}") == 0


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis://127.0.0.1:1/0?keys=nope", "keys='nope' must be fencelock"),
        ("redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?keys=bare", "option keys= is for redis://"),
    ],
)
def test_a_wrong_keys_option_is_a_config_error(url: str, message: str) -> None:
    with pytest.raises(fencelock.ConfigError, match=message):
        fencelock.connect(url)
