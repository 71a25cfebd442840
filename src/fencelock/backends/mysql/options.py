"""What a ``mysql://`` URL says: where the server is, the database, the lock-name prefix."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fencelock.engine.urls import ParsedURL, number_option, reject_unknown_options
from fencelock.errors import ConfigError

DEFAULT_PORT = 3306
DEFAULT_PREFIX = "fencelock:"
OURS = {"prefix", "connect_timeout", "timeout", "ssl_ca"}
_PREFIX = re.compile(r"[a-z0-9_.:/-]{0,24}")


@dataclass(frozen=True)
class MySQLOptions:
    host: str
    port: int
    database: str
    user: str | None
    password: str | None = field(repr=False)
    prefix: str  # put before every GET_LOCK name: the names are server-wide
    connect_timeout: float
    timeout: float  # one statement, once connected (a wait is bounded by its own timeout)
    ssl_ca: str | None


def mysql_options(parsed: ParsedURL) -> MySQLOptions:
    """Read and check the URL; raises :class:`ConfigError` naming what is wrong."""
    reject_unknown_options(parsed, OURS)
    if len(parsed.hosts) != 1:
        raise ConfigError(
            f"{parsed.redacted!r} must name one server (mysql://user:password@host:port/db)"
        )
    database = parsed.path.strip("/")
    if not database or "/" in database:
        raise ConfigError(
            f"{parsed.redacted!r} must name one database for fencelock's table "
            "(mysql://user:password@host:port/DATABASE)"
        )
    prefix = parsed.options.get("prefix", DEFAULT_PREFIX)
    if not _PREFIX.fullmatch(prefix):
        raise ConfigError(
            f"option prefix={prefix!r} in {parsed.redacted!r}: at most 24 of a-z 0-9 _ . : / -"
        )
    host, port = parsed.hosts[0]
    return MySQLOptions(
        host=host,
        port=port or DEFAULT_PORT,
        database=database,
        user=parsed.username,
        password=parsed.password,
        prefix=prefix,
        connect_timeout=number_option(parsed, "connect_timeout", 5.0),
        timeout=number_option(parsed, "timeout", 10.0),
        ssl_ca=parsed.options.get("ssl_ca"),
    )
