"""Lease timing: how long a lease may be trusted, and TTL checks."""

from __future__ import annotations

import math

from fencelock.errors import ConfigError

MIN_TTL = 0.01
MAX_TTL = 365 * 24 * 3600.0


def validate_ttl(ttl: object, what: str = "ttl") -> float:
    """Return ``ttl`` as float seconds, or raise ConfigError."""
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise ConfigError(f"{what} must be a number of seconds, not {type(ttl).__name__}")
    value = float(ttl)
    if math.isnan(value) or value <= 0:
        raise ConfigError(f"{what} must be > 0 seconds, got {ttl!r}")
    if value < MIN_TTL:
        raise ConfigError(f"{what} must be at least {MIN_TTL} seconds, got {ttl!r}")
    if value > MAX_TTL:
        raise ConfigError(f"{what} must be at most one year, got {ttl!r}")
    return value


def validate_timeout(timeout: object) -> float | None:
    """``None`` (wait forever) or a number of seconds >= 0."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise ConfigError(f"timeout must be None or seconds, not {type(timeout).__name__}")
    value = float(timeout)
    if math.isnan(value) or value < 0:
        raise ConfigError(f"timeout must be None or >= 0 seconds, got {timeout!r}")
    return value


def validate_interval(interval: object, what: str = "interval") -> float:
    """A polling interval: finite seconds > 0, or ConfigError naming ``what``."""
    if isinstance(interval, bool) or not isinstance(interval, (int, float)):
        raise ConfigError(f"{what} must be a number of seconds, not {type(interval).__name__}")
    value = float(interval)
    if not math.isfinite(value) or value <= 0 or value > MAX_TTL:
        raise ConfigError(f"{what} must be finite seconds > 0 and at most a year, got {interval!r}")
    return value


def clock_drift(ttl: float) -> float:
    """The Redlock allowance for clock drift between us and the server."""
    return ttl * 0.01 + 0.002


def trusted_until(request_started: float, ttl: float) -> float:
    """When a lease granted for ``ttl`` stops being safe to act on.

    Measured from before the request was sent, so time spent in flight (or in a
    pause) counts against the lease, never in its favour.
    """
    return request_started + ttl - clock_drift(ttl)


# A call with a timeout (an acquire, the release of a lease already lost) returns at
# most this long after it, however the server behaves: a hung server gets this long
# to answer the request in flight when the time is up (docs/guide.md).
REQUEST_BOUND = 1.0
