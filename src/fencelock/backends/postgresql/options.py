"""What a ``postgresql://`` URL says: where the database is, the schema, timeouts."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from fencelock.engine.urls import ParsedURL, number_option, reject_unknown_options
from fencelock.errors import ConfigError

DEFAULT_PORT = 5432
DEFAULT_SCHEMA = "public"
OURS = {"schema", "connect_timeout", "timeout"}
# libpq's own connection options that are passed through as they are
LIBPQ = {
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "application_name",
    "target_session_attrs",
}
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")


@dataclass(frozen=True)
class PostgresOptions:
    hosts: tuple[tuple[str, int], ...]
    dbname: str | None
    user: str | None
    password: str | None = field(repr=False)
    schema: str
    connect_timeout: float
    timeout: float  # one statement, once connected
    libpq: dict[str, str]

    def connect_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for libpq's conninfo: every setting, ours included."""
        kwargs: dict[str, Any] = {
            "host": ",".join(host for host, _ in self.hosts),
            "port": ",".join(str(port) for _, port in self.hosts),
            "connect_timeout": max(1, round(self.connect_timeout)),
            "application_name": "fencelock",
            **self.libpq,
        }
        if self.dbname:
            kwargs["dbname"] = self.dbname
        if self.user:
            kwargs["user"] = self.user
        if self.password is not None:
            kwargs["password"] = self.password
        return kwargs


def postgres_options(parsed: ParsedURL) -> PostgresOptions:
    """Read and check the URL; raises :class:`ConfigError` naming what is wrong."""
    reject_unknown_options(parsed, OURS | LIBPQ)
    if not parsed.hosts:
        raise ConfigError(
            f"{parsed.redacted!r} names no server (postgresql://user:password@host:port/db)"
        )
    dbname = parsed.path.strip("/") or None
    if dbname is not None and "/" in dbname:
        raise ConfigError(f"{parsed.redacted!r}: the path is one database name, not {dbname!r}")
    schema = parsed.options.get("schema", DEFAULT_SCHEMA)
    if not _IDENTIFIER.fullmatch(schema):
        raise ConfigError(
            f"option schema={schema!r} in {parsed.redacted!r} must be a lower-case SQL "
            "identifier (letters, digits, _; at most 63)"
        )
    for key in ("sslrootcert", "sslcert", "sslkey"):
        path = parsed.options.get(key)
        if path is not None and path != "system" and not os.path.isfile(path):
            raise ConfigError(f"option {key}={path!r} in {parsed.redacted!r}: no such file")
    return PostgresOptions(
        hosts=tuple((host, port or DEFAULT_PORT) for host, port in parsed.hosts),
        dbname=dbname,
        user=parsed.username,
        password=parsed.password,
        schema=schema,
        connect_timeout=number_option(parsed, "connect_timeout", 5.0),
        timeout=number_option(parsed, "timeout", 10.0),
        libpq={key: value for key, value in parsed.options.items() if key in LIBPQ},
    )
