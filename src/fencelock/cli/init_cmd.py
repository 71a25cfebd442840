"""``fencelock init``: create what a backend keeps on its server, or show it first."""

from __future__ import annotations

import click

import fencelock
from fencelock.backends import review_sql
from fencelock.cli import errors_as_exit_codes, url_option
from fencelock.errors import ConfigError


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
    if not url:
        raise ConfigError("--sql needs --url (or $FENCELOCK_URL): postgresql:// or mysql://")
    return review_sql(url)
