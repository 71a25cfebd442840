"""A ticket seller: the code that runs in each worker process.

Each sale takes the lock, reads the first unsold seat, works a little, checks
the lease, tells the parent which seat it is about to write with which token,
and waits for a go-ahead byte. The parent may freeze the process right there
(SIGSTOP, like a stop-the-world GC pause) for longer than the lease's TTL.
"""

from __future__ import annotations

import logging
import random
import signal
import sqlite3
import time
from multiprocessing.connection import Connection

import fencelock
from fencelock import clock
from fencelock.demo import shop
from fencelock.demo.model import (
    LOCK_NAME,
    Acquired,
    Done,
    Failed,
    Intent,
    Ready,
    Released,
    WorkerSpec,
    Wrote,
)
from fencelock.errors import FencelockError, LeaseLost

ACQUIRE_TIMEOUT = 20.0


def main(spec: WorkerSpec, conn: Connection) -> None:
    """Process entry point: sell seats until the show is sold out."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    # The parent tells the story; fencelock's own "lease lost" warnings would repeat it.
    logging.getLogger("fencelock").addHandler(logging.NullHandler())
    logging.getLogger("fencelock").propagate = False
    try:
        with fencelock.connect(spec.locks_url) as client:
            db = shop.connect(spec.shop_path)
            try:
                conn.send(Ready(spec.worker))
                conn.recv_bytes()  # the start signal: every worker begins together
                Seller(spec, client.lock(LOCK_NAME, ttl=spec.ttl, renew=True), db, conn).run()
            finally:
                db.close()
        conn.send(Done(spec.worker))
    except (FencelockError, sqlite3.Error, OSError, EOFError) as exc:
        conn.send(Failed(spec.worker, f"{type(exc).__name__}: {exc}"))


class Seller:
    """One worker's sales loop, reporting every step to the parent over ``conn``."""

    def __init__(
        self, spec: WorkerSpec, lock: fencelock.Lock, db: sqlite3.Connection, conn: Connection
    ) -> None:
        self.spec, self.lock, self.db, self.conn = spec, lock, db, conn
        self.rng = random.Random(spec.seed * 1009 + spec.worker)  # noqa: S311 (a seeded schedule, to replay)
        self.sales = 0

    def run(self) -> None:
        """Sell until a lease finds no unsold seat."""
        while self.sell_one():
            self.sales += 1

    def sell_one(self) -> bool:
        """One sale under one lease; False once there is nothing left to sell."""
        asked = clock.now()
        lease = self.lock.acquire(timeout=ACQUIRE_TIMEOUT)
        self.conn.send(Acquired(self.spec.worker, lease.token, asked, clock.now()))
        seat = shop.first_unsold(self.db)
        if seat is not None:
            time.sleep(self.spec.work * self.rng.uniform(0.5, 1.5))
            self._write(lease, seat)
        lost = _release(lease)
        self.conn.send(
            Released(self.spec.worker, lease.token, clock.now(), lost, lease.trusted_until)
        )
        return seat is not None

    def _write(self, lease: fencelock.Lease, seat: int) -> None:
        try:
            lease.check()  # the lease is fine *now*; the pause comes after the check
        except LeaseLost:
            return  # a careful seller gives up; the release reports the loss
        worker = self.spec.worker
        self.conn.send(Intent(worker, seat, lease.token, clock.now()))
        self.conn.recv_bytes()  # the go-ahead: the parent may SIGSTOP us before sending it
        buyer = f"customer-{worker}-{self.sales}"
        outcome = shop.sell(
            self.db, seat, buyer, lease.token, worker=worker, fenced=self.spec.fenced
        )
        self.conn.send(Wrote(worker, seat, lease.token, clock.now(), outcome))


def _release(lease: fencelock.Lease) -> bool:
    """Release; True if the worker noticed the lease had been lost."""
    lost = lease.lost
    try:
        lease.release()
    except LeaseLost:
        return True
    return lost
