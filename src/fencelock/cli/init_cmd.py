"""``fencelock init``: create what a backend keeps on its server, or show it first."""

from __future__ import annotations

import click

import fencelock
from fencelock.cli import errors_as_exit_codes, url_option
from fencelock.engine.urls import parse_url
from fencelock.errors import ConfigError

SQL_SCHEMES = {
    "postgresql",
    "postgres",
    "postgresql+advisory",
    "postgres+advisory",
    "mysql",
    "mariadb",
}


@click.command()
@url_option
@click.option("--sql", "show_sql", is_flag=True, help="Print the SQL instead of running it.")
def init(url: str | None, show_sql: bool) -> None:
    """Create the backend's tables (PostgreSQL, MySQL), or check that the backend answers.

    With --sql, print every statement fencelock runs on the database, for review,
    and change nothing."""
    with errors_as_exit_codes():
        if show_sql:
            click.echo(_sql(url), nl=False)
            return
        with fencelock.connect(url) as client:
            client.list("")  # on PostgreSQL the first statement creates the schema objects
        click.echo(f"fencelock: {client.url} is ready")


def _sql(url: str | None) -> str:
    parsed = parse_url(url or "")
    if parsed.scheme not in SQL_SCHEMES:
        raise ConfigError(
            f"{parsed.redacted!r} keeps no SQL schema: --sql is for postgresql:// and mysql://"
        )
    if parsed.scheme in {"mysql", "mariadb"}:
        from fencelock.backends.mysql import sql as mysql_sql
        from fencelock.backends.mysql.options import mysql_options

        return mysql_sql.review(mysql_options(parsed).database)
    from fencelock.backends.postgresql import advisory_sql, sql
    from fencelock.backends.postgresql.options import postgres_options

    schema = postgres_options(parsed).schema
    if parsed.scheme.endswith("+advisory"):
        return advisory_sql.review(schema)
    return sql.review(schema)


def register(group: click.Group) -> None:
    group.add_command(init)
