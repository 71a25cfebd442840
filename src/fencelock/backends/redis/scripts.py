"""The lock's keys, its Lua scripts, the commands that call them, and their replies."""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

from fencelock.backends.base import Acquired, AttemptResult, Busy, LockInfo
from fencelock.backends.redis.resp import Partial, RawReply, Script
from fencelock.engine import barging
from fencelock.errors import ConfigError

KEY_PREFIX = "fencelock:"


def lua(name: str) -> str:
    """The source of ``backends/redis/lua/<name>.lua``."""
    return resources.files("fencelock.backends.redis").joinpath(f"lua/{name}.lua").read_text()


# A held lease's token is its grant time (granted_at) only within these bounds.
COUNTER_IDLE_S = 7 * 24 * 3600  # acquire.lua's COUNTER_IDLE_MS
CLOCK_SLACK_S = 1.0

# Waiting follows engine/barging.py's rule and its numbers (read at each call): a free
# lease goes to whoever asks first, unless the oldest waiter has waited longer than
# STARVATION_BOUND (fair=True: always); a waiter asks again at least every
# WAITER_REFRESH, and one silent for WAITER_LIVENESS is dropped. A waiter whose process
# died is dropped at once by the next release (its wake-up reaches nobody); only a paused
# one (SIGSTOP, a hung event loop) can hold the others up, for at most WAITER_LIVENESS.

ACQUIRE = Script(lua("acquire"))
FREE = Script(lua("free"))
RENEW = Script(lua("renew"))
RENEW_MANY = Script(lua("renew_many"))
INSPECT = Script(lua("inspect"))
WAITERS = Script(lua("waiters"))
Command = tuple[Script | None, bytes]  # a script and its packed call, or a plain command


def acquire_command(keys: LockKeys, owner: str, ttl: float, channel: str, fair: bool) -> Command:
    """Take the lease (token included) or join the queue, woken on ``channel``."""
    starve_us = 0 if fair else int(barging.STARVATION_BOUND * 1e6)
    liveness = ms(barging.WAITER_LIVENESS)
    return ACQUIRE, _acquire_partial(keys, ms(ttl), channel, starve_us, liveness).complete(owner)


@functools.lru_cache(maxsize=1024)
def _acquire_partial(
    keys: LockKeys, ttl_ms: int, channel: str, starve_us: int, liveness_ms: int
) -> Partial:
    return ACQUIRE.partial(keys.queued, [ttl_ms, channel, starve_us, liveness_ms])


def release_command(keys: LockKeys, owner: str) -> Command:
    return FREE, _release_partial(keys).complete(owner)


@functools.lru_cache(maxsize=4096)
def _release_partial(keys: LockKeys) -> Partial:
    return FREE.partial(keys.waking, [b"release"])


def leave_command(keys: LockKeys, owner: str, channel: str) -> Command:
    return FREE, FREE.call(keys.waking, [b"leave", owner, channel])


def renew_command(keys: LockKeys, owner: str, ttl: float) -> Command:
    return RENEW, RENEW.call((keys.lock,), [owner, ms(ttl)])


def renew_many_command(
    renewals: Sequence[tuple[str, str, float]], style: KeyStyle | None = None
) -> Command:
    of = LockKeys.of if style is None else style.of
    keys = tuple(of(name).lock for name, _, _ in renewals)
    owners = [owner for _, owner, _ in renewals]
    return RENEW_MANY, RENEW_MANY.call(keys, [*owners, *(ms(ttl) for _, _, ttl in renewals)])


def inspect_command(keys: LockKeys) -> Command:
    return INSPECT, INSPECT.call((keys.lock, keys.token, keys.queue), [])


def waiters_command(keys: LockKeys) -> Command:
    return WAITERS, WAITERS.call((keys.queue, keys.alive), [])


def ms(seconds: float) -> int:
    """Seconds as whole milliseconds, at least 1 (Redis TTLs are in ms)."""
    return max(int(seconds * 1000), 1)


@dataclass(frozen=True, kw_only=True)
class LockKeys:
    """Keys of one lock, hash-tagged so they share a Redis Cluster slot."""

    lock: str
    token: str
    channel: str  # Redlock's release broadcast
    queue: str
    alive: str

    @classmethod
    def of(cls, name: str) -> LockKeys:
        return _keys_of(name)

    @property
    def queued(self) -> tuple[str, str, str, str]:
        """KEYS of acquire.lua: lock, token, queue, liveness."""
        return (self.lock, self.token, self.queue, self.alive)

    @property
    def waking(self) -> tuple[str, str, str]:
        """KEYS of free.lua: lock, queue, liveness."""
        return (self.lock, self.queue, self.alive)


@functools.lru_cache(maxsize=4096)
def _keys_of(name: str, bare: bool = False) -> LockKeys:
    tagged = f"{KEY_PREFIX}{{{name}}}"
    if bare and ("{" in name or "}" in name):
        raise ConfigError(
            f"lock name {name!r}: with keys=bare the lock's key is its name, and a name "
            "with braces would put it in another Redis Cluster slot than its other keys"
        )
    return LockKeys(
        lock=name if bare else tagged,
        token=tagged + ":token",
        channel=tagged + ":free",
        queue=tagged + ":queue",
        alive=tagged + ":alive",
    )


def name_of(key: str) -> str:
    return key[len(KEY_PREFIX) + 1 : -1]


def scan_pattern(prefix: str) -> str:
    return f"{KEY_PREFIX}{{{prefix}*}}"


@dataclass(frozen=True)
class KeyStyle:
    """Where a server's locks live. Under ``fencelock:{NAME}`` (the default), or
    ``bare``: the lock itself at the key NAME, as redis-py's ``Lock`` keeps it, so that
    a fencelock lock and a redis-py lock on one name exclude each other (a migration
    from one to the other, process by process); the lock's other keys stay
    ``fencelock:{NAME}:...``, in the same Redis Cluster slot."""

    bare: bool = False

    def of(self, name: str) -> LockKeys:
        return _keys_of(name, self.bare)

    def scan_pattern(self, prefix: str) -> str:
        """The keys to look for the held locks under ``prefix`` by: with bare keys, the
        token counters (every lock taken in the last week has one)."""
        return scan_pattern(prefix) + (":token" if self.bare else "")

    def name_of(self, key: str) -> str:
        return name_of(key.removesuffix(":token") if self.bare else key)


def attempt_result(reply: list[RawReply]) -> AttemptResult:
    """Parse acquire.lua's ``{1, token}`` or ``{0, pttl}`` (we are queued then).

    A queued waiter wakes when the holder's TTL runs out, when woken, or at the
    latest after ``barging.WAITER_REFRESH`` (to stay alive in the queue).
    """
    if reply[0] == 1:
        return Acquired(int(reply[1]))
    pttl = int(reply[1])
    refresh = barging.WAITER_REFRESH
    return Busy(refresh if pttl < 0 else min(pttl / 1000, refresh))


def lock_info(
    name: str, owner: str | None, pttl: int, token: str | None, waiters: int | None = None
) -> LockInfo | None:
    if owner is None and token is None:
        return None
    return LockInfo(
        name=name,
        owner=owner,
        token=int(token or 0),
        remaining=pttl / 1000 if owner is not None and pttl >= 0 else None,
        waiters=waiters,
        since=granted_at(int(token or 0)) if owner is not None else None,
    )


def granted_at(token: int, now: float | None = None) -> float | None:
    """When a Redis lease was granted, read from its token: acquire.lua issues the
    server's clock in microseconds (or one more than the last token, if greater). None
    where the token cannot be that time: ahead of our clock by more than the slack (the
    server's clock went back since an earlier grant, or runs ahead of ours), or older
    than the week a counter outlives its last grant."""
    at, now = token / 1e6, time.time() if now is None else now
    return at if now - COUNTER_IDLE_S <= at <= now + CLOCK_SLACK_S else None
