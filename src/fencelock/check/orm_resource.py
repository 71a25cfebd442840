"""The check resource's fenced transactions through SQLAlchemy (``--fence-with
sqlalchemy``): the same reads and writes as the guard's, with the fence checked by
:func:`fencelock.integrations.sqlalchemy.fence` in a SQLAlchemy transaction. So a check
run shows the ORM integration refusing every stale write under the nemeses.

SQLAlchemy is imported on first use: a check without this option never needs it.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from fencelock import clock

if TYPE_CHECKING:
    import sqlalchemy

COMMIT = "INSERT INTO commits (client, token, key, value, at) VALUES (?, ?, ?, ?, ?)"
BUSY_TIMEOUT_S = 30.0  # as the guard's connection (workloads.BUSY_TIMEOUT_MS)


@functools.cache
def engine(path: str) -> sqlalchemy.Engine:
    """This process's engine on the resource: each transaction ``BEGIN IMMEDIATE`` (as the
    guard's), so two writers queue for the database instead of failing at the upgrade."""
    import sqlalchemy

    made = sqlalchemy.create_engine(
        f"sqlite:///{path}", connect_args={"timeout": BUSY_TIMEOUT_S}, poolclass=sqlalchemy.NullPool
    )

    @sqlalchemy.event.listens_for(made, "connect")
    def _no_implicit_begin(dbapi_connection: Any, _record: object) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN itself, below

    @sqlalchemy.event.listens_for(made, "begin")
    def _begin_immediate(connection: sqlalchemy.Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return made


def fenced_read(path: str, key: str, token: int, query: str) -> int:
    """``query`` (one integer) in a transaction whose first statement is the fence."""
    from fencelock.integrations.sqlalchemy import fence

    with engine(path).begin() as connection:
        fence(connection, key, token, allow_equal=True)
        row = connection.exec_driver_sql(query).one()
    return int(row[0])


def commit(
    path: str,
    key: str,
    token: int,
    update: tuple[str, tuple[object, ...]],
    logged: tuple[object, ...],
) -> int:
    """The fence, ``update`` and the commit's log row (``logged`` and the time), in one
    transaction; the commit's sequence number."""
    from fencelock.integrations.sqlalchemy import fence

    with engine(path).begin() as connection:
        fence(connection, key, token, allow_equal=True)
        connection.exec_driver_sql(*update)
        seq = connection.exec_driver_sql(COMMIT, (*logged, clock.now())).lastrowid
    return int(seq)
