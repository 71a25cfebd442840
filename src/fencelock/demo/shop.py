"""The ticket shop: an SQLite database with one show's seats and a log of every sale.

``seats`` holds the current buyer of each seat; a late write overwrites it, so
every accepted sale is also appended to ``sales``: a seat with two rows there
was sold twice, even though ``seats`` only shows the last buyer.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from fencelock import clock
from fencelock.demo.model import LOCK_NAME, Outcome
from fencelock.errors import StaleToken
from fencelock.fencing import sqlite_fence
from fencelock.toolkit import resources

BUSY_MS = 10_000  # how long a sale waits for the database write lock

_SCHEMA = """
CREATE TABLE seats (seat INTEGER PRIMARY KEY, buyer TEXT, token INTEGER);
CREATE TABLE sales (
    id INTEGER PRIMARY KEY, seat INTEGER NOT NULL, buyer TEXT NOT NULL,
    token INTEGER NOT NULL, worker INTEGER NOT NULL, at REAL NOT NULL
);
"""


@dataclass(frozen=True)
class Tally:
    """What the shop's tables say after a round."""

    seats_sold: int
    sales: int
    sold_twice: int


def connect(path: Path | str) -> sqlite3.Connection:
    """An autocommit connection to the shop; transactions are explicit."""
    return resources.connect(path, BUSY_MS)


def create(path: Path, seats: int) -> None:
    """A fresh shop with ``seats`` unsold seats (any old file is replaced)."""
    with resources.fresh_database(path, connect, _SCHEMA) as conn:
        conn.executemany("INSERT INTO seats (seat) VALUES (?)", [(n,) for n in range(1, seats + 1)])


def first_unsold(conn: sqlite3.Connection) -> int | None:
    """The lowest seat number without a buyer, or None when the show is sold out."""
    row = conn.execute("SELECT min(seat) FROM seats WHERE buyer IS NULL").fetchone()
    return None if row[0] is None else int(row[0])


def sell(
    conn: sqlite3.Connection, seat: int, buyer: str, token: int, *, worker: int, fenced: bool
) -> Outcome:
    """Sell ``seat`` in one transaction; with ``fenced``, through the fencing check.

    Returns ``"double"`` when the seat already had a buyer (this write overwrote
    a sale), ``"rejected"`` when the fence refused a stale token (rolled back).
    """
    try:
        with resources.write_transaction(conn):
            if fenced:
                sqlite_fence(conn, LOCK_NAME, token)
            (previous,) = conn.execute("SELECT buyer FROM seats WHERE seat = ?", (seat,)).fetchone()
            conn.execute(
                "UPDATE seats SET buyer = ?, token = ? WHERE seat = ?", (buyer, token, seat)
            )
            conn.execute(
                "INSERT INTO sales (seat, buyer, token, worker, at) VALUES (?, ?, ?, ?, ?)",
                (seat, buyer, token, worker, clock.now()),
            )
    except StaleToken:
        return "rejected"
    return "sold" if previous is None else "double"


def tally(path: Path) -> Tally:
    """Seats with a buyer, accepted sales, and seats that more than one sale claimed."""
    conn = connect(path)
    try:
        (sold,) = conn.execute("SELECT count(*) FROM seats WHERE buyer IS NOT NULL").fetchone()
        (sales,) = conn.execute("SELECT count(*) FROM sales").fetchone()
        (twice,) = conn.execute(
            "SELECT count(*) FROM (SELECT seat FROM sales GROUP BY seat HAVING count(*) > 1)"
        ).fetchone()
    finally:
        conn.close()
    return Tally(int(sold), int(sales), int(twice))
