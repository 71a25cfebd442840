"""fencelock.sql names the connection it cannot use, and the ones it can."""

from __future__ import annotations

import sqlite3

import pytest

from fencelock.errors import ConfigError
from fencelock.sql.connections import abind, bind


def test_a_blocking_connection_of_another_driver_is_named() -> None:
    conn = sqlite3.connect(":memory:")
    try:
        with pytest.raises(
            ConfigError, match=r"psycopg\.Connection or a pymysql.*sqlite3\.Connection"
        ):
            bind(conn)
    finally:
        conn.close()


def test_an_asyncio_connection_is_not_taken_for_a_blocking_one() -> None:
    with pytest.raises(
        ConfigError, match=r"psycopg\.AsyncConnection or an aiomysql.*builtins\.str"
    ):
        abind("postgresql://localhost/db")


def test_a_pymysql_connection_class_that_is_not_a_connection_is_refused() -> None:
    import pymysql

    cursor = pymysql.cursors.Cursor.__new__(
        pymysql.cursors.Cursor
    )  # the driver's module, not its class
    with pytest.raises(ConfigError, match=r"pymysql\.cursors\.Cursor"):
        bind(cursor)
