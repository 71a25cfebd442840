"""A shared session reports to every lease held in it at once; no I/O, no server."""

from __future__ import annotations

from fencelock import clock
from fencelock.engine.lease_state import LeaseEvent, LeaseState
from fencelock.engine.outcomes import RenewedAsOf
from fencelock.engine.session import SessionNews, SharedSession
from fencelock.engine.timing import trusted_until
from fencelock.lease import LeaseBase, LeaseTerms


def _state(lease: LeaseBase) -> LeaseState:
    return lease.state


def lease_in(session: SharedSession | None, name: str = "job", ttl: float = 30.0) -> LeaseBase:
    now = clock.now()
    terms = LeaseTerms(
        name=name,
        owner="owner",
        token=7,
        ttl=ttl,
        renew=True,
        trusted_until=trusted_until(now, ttl),
        session=session,
    )
    return LeaseBase(terms)


def test_the_end_of_a_session_loses_every_lease_in_it_at_once() -> None:
    session = SharedSession("etcd lease 1f")
    leases = [lease_in(session, f"job{i}") for i in range(1000)]
    lost: list[LeaseBase] = []
    for lease in leases:
        lease.on_lost(lost.append)
    session.end("lease 1f expired")
    assert len(lost) == 1000
    assert all(lease.lost for lease in leases)
    assert {lease.lost_reason for lease in leases} == {"lease 1f expired"}
    assert session.listeners == 0


def test_a_suspended_session_puts_its_leases_at_risk_and_a_renewal_recovers_them() -> None:
    session = SharedSession("zookeeper session 9")
    lease = lease_in(session)
    session.suspend("connection to the ensemble lost")
    assert lease.state is LeaseState.AT_RISK
    assert lease.remaining() > 0
    lease._settle(clock.now(), lease.ttl, True)
    assert _state(lease) is LeaseState.HELD  # read again: mypy keeps the narrowing above


def test_a_lease_released_or_lost_stops_listening() -> None:
    session = SharedSession("s")
    kept, released = lease_in(session), lease_in(session)
    released._apply(LeaseEvent.RELEASED)
    assert session.listeners == 1
    session.end("gone")
    assert kept.lost
    assert released.released
    assert not released.lost


def test_a_session_that_ended_already_reports_it_to_a_new_listener() -> None:
    session = SharedSession("s")
    session.end("revoked")
    heard: list[tuple[SessionNews, str]] = []
    session.listen(lambda news, why: heard.append((news, why)))
    assert heard == [(SessionNews.ENDED, "revoked")]


def test_a_renewal_as_of_an_earlier_keepalive_is_trusted_from_that_keepalive() -> None:
    lease = lease_in(None, ttl=30.0)
    asked = clock.now()
    keepalive = asked - 4.0
    lease._settle(asked, 30.0, RenewedAsOf(keepalive))
    assert lease.trusted_until == trusted_until(keepalive, 30.0)
    # never later than the request itself, whatever a backend answers
    lease._settle(asked, 30.0, RenewedAsOf(asked + 100))
    assert lease.trusted_until == trusted_until(asked, 30.0)


def test_a_lease_made_in_a_session_that_ended_already_is_lost_at_once() -> None:
    """Found by the simulator: a session that ended between the grant and the lease
    reported its end while the lease was being made, which raised AttributeError."""
    session = SharedSession("zookeeper session 4")
    session.end("expired")
    lease = lease_in(session)
    assert lease.lost
    assert lease.lost_reason == "expired"
    assert session.listeners == 0
