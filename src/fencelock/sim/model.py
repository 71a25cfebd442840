"""Model servers, one per family of backend semantics (not per product).

:class:`LeaseStore` is the TTL-lease family (Redis, the SQL lease table, etcd's
leases): a lease is a record ``(owner, expiry, token)`` that ends by the server's own
clock, taken by compare-and-set, released by compare-and-delete, renewed by
compare-and-extend, its token from a per-name counter issued in the same step. The
server's clock may run at a rate other than the clients' (drift) and the server may
restart, keeping its data or not (then counters start again from the server's clock,
as the design says a backend without a durable counter must).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Record:
    owner: str
    expires: float  # the server's clock
    token: int


@dataclass
class Granted:
    token: int


@dataclass
class Taken:
    remaining: float  # the holder's, by the server's clock


@dataclass
class LeaseStore:
    """One server of the TTL-lease family; ``rate``: its clock's speed against true time."""

    rate: float = 1.0
    started: float = 0.0  # true time its clock counts from
    records: dict[str, Record] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    grants: list[tuple[str, str, int]] = field(default_factory=list)  # (name, owner, token)

    def clock(self, true_now: float) -> float:
        return (true_now - self.started) * self.rate

    def true_time(self, server_time: float) -> float:
        """When, in true time, the server's clock reads ``server_time``."""
        return self.started + server_time / self.rate

    def holder(self, name: str, true_now: float) -> Record | None:
        record = self.records.get(name)
        if record is None or record.expires <= self.clock(true_now):
            return None
        return record

    def acquire(self, name: str, owner: str, ttl: float, true_now: float) -> Granted | Taken:
        now = self.clock(true_now)
        held = self.holder(name, true_now)
        if held is not None:
            return Taken(held.expires - now)
        token = max(self.counters.get(name, 0) + 1, int(now * 1_000_000))
        self.counters[name] = token
        self.records[name] = Record(owner, now + ttl, token)
        self.grants.append((name, owner, token))
        return Granted(token)

    def release(self, name: str, owner: str, true_now: float) -> bool:
        held = self.holder(name, true_now)
        if held is None or held.owner != owner:
            return False
        del self.records[name]
        return True

    def renew(self, name: str, owner: str, ttl: float, true_now: float) -> bool:
        held = self.holder(name, true_now)
        if held is None or held.owner != owner:
            return False
        held.expires = self.clock(true_now) + ttl
        return True

    def evict(self, name: str) -> None:
        """An operator's forced release."""
        self.records.pop(name, None)

    def restart(self, keep_data: bool, true_now: float) -> None:
        """A restart: with its data (an AOF, a database), or empty."""
        if not keep_data:
            self.records.clear()
            self.counters.clear()
