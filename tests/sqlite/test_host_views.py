"""Two views of a host sharing one ``sqlite:///`` file, simulated: who may take a lease.

Each backend reads the host through a :class:`View` (liveness's ``Host`` seam): its boot
id, PID and time namespaces, whether its /proc is its PID namespace's, the processes
that /proc shows, and its ``CLOCK_BOOTTIME`` (the world's time plus an offset). A live
holder in one view keeps its lease against a waiter in any other view (issue 34's four
cases); a dead one's lease goes at once where its death is proven, else after its TTL:
on the shared clock, or seen unchanged that long where the waiter cannot read it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fencelock import holder
from fencelock.backends.base import Acquired, Busy
from fencelock.backends.sqlite import SQLiteBackend, liveness
from fencelock.engine.urls import parse_url
from fencelock.primitives.lock import new_owner

TTL = 10.0
NAME = "jobs/nightly"


@dataclass
class World:
    """The true time, in seconds since the first boot's start."""

    t: float = 1000.0


@dataclass
class View:
    """One process's view of its host (a ``liveness.Host``)."""

    world: World
    procs: dict[int, int]  # what this view's /proc shows: PID -> start ticks (absent: none)
    me: int
    boot: str | None = "boot-a"
    pidns: str | None = "pid:[4026531836]"
    timens: str | None = "time:[4026531834]"
    proc_ok: bool = True
    offset: float = 0.0  # this view's CLOCK_BOOTTIME minus the world's time
    zombies: set[int] = field(default_factory=set)

    def boot_id(self) -> str | None:
        return self.boot

    def pid_namespace(self) -> str | None:
        return self.pidns

    def time_namespace(self) -> str | None:
        return self.timens

    def proc_matches(self) -> bool:
        return self.proc_ok

    def pid(self) -> int:
        return self.me

    def process(self, pid: int) -> liveness.Process:
        if pid in self.zombies or pid not in self.procs:
            return liveness.GONE
        return self.procs[pid]

    def now(self) -> float:
        return self.world.t + self.offset

    def exit_notice(self, pid: int, start_ticks: int) -> int | None:
        return None


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'locks.db'}"


@pytest.fixture
def backends() -> Iterator[list[SQLiteBackend]]:
    made: list[SQLiteBackend] = []
    yield made
    for backend in made:
        backend.close()


def open_view(url: str, view: View, made: list[SQLiteBackend]) -> SQLiteBackend:
    backend = SQLiteBackend(parse_url(url), host=view)
    made.append(backend)
    return backend


def take(backend: SQLiteBackend, owner: str, *, ttl: float = TTL, fair: bool = False) -> int | None:
    """One try: the token if it took ``NAME``, None if busy."""
    attempt = backend.attempt(NAME, owner, ttl, fair=fair)
    try:
        result = attempt.try_acquire()
    finally:
        attempt.close()
    assert isinstance(result, Acquired | Busy)
    return result.token if isinstance(result, Acquired) else None


@dataclass
class Scene:
    """A holder that took ``NAME`` in its view, and a waiter in another."""

    world: World
    holder_view: View
    holder: SQLiteBackend
    owner: str
    waiter_view: View
    waiter: SQLiteBackend
    written: float  # the world's time of the holder's last take or renewal

    def renew(self) -> None:
        assert self.holder.renew(NAME, self.owner, TTL)
        self.written = self.world.t

    def since_written(self) -> float:
        return self.world.t - self.written

    def waiter_takes(self) -> int | None:
        return take(self.waiter, new_owner())

    def holder_lives_through(self, seconds: float) -> None:
        """The holder renews every TTL/3 while the waiter tries every second."""
        end = self.world.t + seconds
        since_renewal = 0.0
        while self.world.t < end:
            assert self.waiter_takes() is None, f"taken from a live holder at {self.world.t}"
            self.world.t += 1.0
            since_renewal += 1.0
            if since_renewal >= TTL / 3:
                self.renew()
                since_renewal = 0.0

    def seconds_until_taken(self, step: float = 0.5, limit: float = 4 * TTL) -> float:
        """The holder is gone: tries every ``step`` until the waiter has the lease."""
        started = self.world.t
        while (token := self.waiter_takes()) is None:
            self.world.t += step
            assert self.world.t - started <= limit, "never taken"
        assert token == 2
        return self.world.t - started

    def holder_dies(self) -> None:
        del self.holder_view.procs[self.holder_view.me]


def scene(
    url: str, world: World, made: list[SQLiteBackend], holder_view: View, waiter_view: View
) -> Scene:
    holding = open_view(url, holder_view, made)
    owner = new_owner()
    assert take(holding, owner) == 1
    waiting = open_view(url, waiter_view, made)
    return Scene(world, holder_view, holding, owner, waiter_view, waiting, world.t)


def same_host(world: World) -> tuple[View, View]:
    """A holder (PID 100) and a waiter (PID 200) in one boot and namespaces, one /proc."""
    procs = {1: 1, 100: 5000, 200: 6000}
    return View(world, procs, me=100), View(world, procs, me=200)


# -- issue 34's four cases: a live holder keeps its lease ---------------------------------


def test_a_waiter_on_another_boot_waits_for_a_ttl_it_has_observed(
    url: str, world: World, backends: list[SQLiteBackend]
) -> None:
    """(a) A second host or VM sharing the file: its boot id and its clock are its own
    (here it booted an hour later: its clock reads 3600 s less)."""
    holding = View(world, {100: 5000}, me=100)
    waiting = View(world, {100: 9, 200: 6000}, me=200, boot="boot-b", offset=-3600.0)
    s = scene(url, world, backends, holding, waiting)
    s.holder_lives_through(3 * TTL)
    s.holder_dies()
    s.seconds_until_taken()
    assert TTL <= s.since_written() <= TTL + 1.0  # seen unchanged for its TTL, and no more


def test_a_moved_btime_proves_nothing_and_a_crash_is_still_seen_at_once(
    url: str, world: World, backends: list[SQLiteBackend], monkeypatch: pytest.MonkeyPatch
) -> None:
    """(b) btime is the wall clock minus the uptime: a step moves every process's
    btime-derived start (the one the owner value shows) by a second, never its ticks."""
    s = scene(url, world, backends, *same_host(world))
    started = holder.process_start
    monkeypatch.setattr(holder, "process_start", lambda pid: (started(pid) or 0.0) + 1.0)
    s.holder_lives_through(3 * TTL)
    s.holder_dies()
    assert s.seconds_until_taken() == 0.0


def test_a_waiter_in_another_time_namespace_waits_for_a_ttl_it_has_observed(
    url: str, world: World, backends: list[SQLiteBackend]
) -> None:
    """(c) ``unshare --time --boottime 1000``: the waiter's clock reads 1000 s more, and
    its /proc shows every start 1000 s (100000 ticks) later."""
    procs = {100: 5000, 200: 6000}
    holding = View(world, procs, me=100)
    shifted = {pid: ticks + 100_000 for pid, ticks in procs.items()}
    waiting = View(world, shifted, me=200, timens="time:[4026532177]", offset=1000.0)
    s = scene(url, world, backends, holding, waiting)
    s.holder_lives_through(3 * TTL)
    s.holder_dies()
    del shifted[100]
    s.seconds_until_taken()
    assert TTL <= s.since_written() <= TTL + 1.0  # seen unchanged for its TTL, and no more


def test_a_holder_in_a_time_namespace_is_not_waited_for_by_its_clocks_offset(
    url: str, world: World, backends: list[SQLiteBackend]
) -> None:
    """(c) reversed: the holder's expiry reads 1000 s ahead of the waiter's clock; once it
    is gone its lease goes after its TTL observed, not after 1000 s."""
    procs = {100: 5000, 200: 6000}
    holding = View(world, procs, me=100, timens="time:[4026532177]", offset=1000.0)
    s = scene(url, world, backends, holding, View(world, procs, me=200))
    s.holder_lives_through(3 * TTL)
    s.holder_dies()
    s.seconds_until_taken()
    assert TTL <= s.since_written() <= TTL + 1.0  # seen unchanged for its TTL, and no more


def test_a_waiter_whose_proc_is_another_pid_namespaces_proves_nothing(
    url: str, world: World, backends: list[SQLiteBackend]
) -> None:
    """(d) In the holder's PID namespace but reading the host's /proc: PID 100 there is
    another process (and PID 101 none), so neither a start nor an absence proves a death."""
    holding = View(world, {1: 1, 100: 5000}, me=100)
    waiting = View(world, {1: 1, 100: 7, 200: 6000}, me=200, proc_ok=False)
    s = scene(url, world, backends, holding, waiting)
    s.holder_lives_through(3 * TTL)
    waiting.procs.pop(100)
    s.holder_lives_through(TTL)
    s.holder_dies()
    assert 0.0 < s.seconds_until_taken() <= TTL  # the rest of its TTL, on the shared clock


def test_a_holder_whose_proc_is_another_pid_namespaces_records_no_start(
    url: str, world: World, backends: list[SQLiteBackend]
) -> None:
    """The holder read its start from the wrong /proc: nobody can judge it by its PID."""
    procs = {1: 1, 100: 5000, 200: 6000}
    s = scene(
        url, world, backends, View(world, procs, me=100, proc_ok=False), View(world, procs, me=200)
    )
    s.holder_dies()
    assert s.waiter_takes() is None
    assert 0.0 < s.seconds_until_taken() <= TTL


# -- positive proof: the lease goes at once ---------------------------------------------


@pytest.mark.parametrize("how", ["exited", "zombie", "pid reused"])
def test_a_holder_proven_gone_loses_its_lease_at_once(
    url: str, world: World, backends: list[SQLiteBackend], how: str
) -> None:
    holding, waiting = same_host(world)
    s = scene(url, world, backends, holding, waiting)
    assert s.waiter_takes() is None
    if how == "exited":
        s.holder_dies()
    elif how == "zombie":
        waiting.zombies.add(100)  # what the waiter's /proc shows
    else:
        holding.procs[100] = 5001
    assert s.seconds_until_taken() == 0.0


def test_a_holder_in_another_pid_namespace_is_never_judged_by_its_pid(
    url: str, world: World, backends: list[SQLiteBackend]
) -> None:
    """A container sharing the file: same boot and clock, its PID names nothing here."""
    holding = View(world, {100: 5000}, me=100, pidns="pid:[4026532999]")
    s = scene(url, world, backends, holding, View(world, {200: 6000}, me=200))
    s.holder_dies()
    assert 0.0 < s.seconds_until_taken() <= TTL


def test_a_lease_not_renewed_outlives_its_process(
    url: str, world: World, backends: list[SQLiteBackend]
) -> None:
    holding, waiting = same_host(world)
    first = open_view(url, holding, backends)
    attempt = first.attempt(NAME, new_owner(), TTL, renewed=False)
    assert isinstance(attempt.try_acquire(), Acquired)
    attempt.close()
    second = open_view(url, waiting, backends)
    del holding.procs[100]
    assert take(second, new_owner()) is None
    world.t += TTL
    assert take(second, new_owner()) == 2


# -- the observed expiry ---------------------------------------------------------------


def test_each_renewal_restarts_the_observation(
    url: str, world: World, backends: list[SQLiteBackend]
) -> None:
    """The waiter's clock runs 10 % fast: it counts the TTL from its own sightings."""
    holding = View(world, {100: 5000}, me=100)
    waiting = View(world, {200: 6000}, me=200, boot="boot-b")
    s = scene(url, world, backends, holding, waiting)
    for _ in range(10):
        assert s.waiter_takes() is None
        world.t += TTL * 0.9
        s.renew()
    assert s.waiter_takes() is None


def test_observers_on_one_clock_share_their_sightings(
    url: str, world: World, backends: list[SQLiteBackend]
) -> None:
    """A process started after the holder died (``fencelock run --no-wait`` from cron)
    counts from the first sighting of any process on its clock."""
    holding = View(world, {100: 5000}, me=100)
    s = scene(url, world, backends, holding, View(world, {200: 6000}, me=200, boot="boot-b"))
    s.holder_dies()
    assert s.waiter_takes() is None
    world.t += TTL
    later = open_view(url, View(world, {300: 7000}, me=300, boot="boot-b"), backends)
    assert take(later, new_owner()) == 2


def test_a_sighting_on_another_clock_counts_for_nothing(
    url: str, world: World, backends: list[SQLiteBackend]
) -> None:
    holding = View(world, {100: 5000}, me=100)
    s = scene(url, world, backends, holding, View(world, {200: 6000}, me=200, boot="boot-b"))
    s.holder_dies()
    assert s.waiter_takes() is None
    world.t += TTL
    elsewhere = View(world, {300: 7000}, me=300, boot="boot-c", offset=-5000.0)
    assert take(open_view(url, elsewhere, backends), new_owner()) is None


def test_inspect_and_list_show_a_foreign_lease_held_until_observed_expired(
    url: str, world: World, backends: list[SQLiteBackend]
) -> None:
    """From a clock 1000 s ahead the holder's expiry has long passed: still held."""
    holding = View(world, {100: 5000}, me=100)
    waiting = View(world, {200: 6000}, me=200, timens="time:[4026532177]", offset=1000.0)
    s = scene(url, world, backends, holding, waiting)
    info = s.waiter.inspect(NAME)
    assert info is not None
    assert info.owner == s.owner
    assert info.remaining == TTL
    assert [i.name for i in s.waiter.list("jobs/")] == [NAME]
    s.holder_dies()
    assert s.waiter_takes() is None  # the first sighting
    world.t += TTL / 2
    info = s.waiter.inspect(NAME)
    assert info is not None
    assert info.held
    assert info.remaining == pytest.approx(TTL / 2)
    world.t += TTL / 2
    info = s.waiter.inspect(NAME)
    assert info is not None
    assert not info.held
    assert info.remaining is None
    assert s.waiter.list("jobs/") == []


def test_a_foreign_waiter_that_stopped_asking_holds_no_free_lease_back(
    url: str, world: World, backends: list[SQLiteBackend]
) -> None:
    """A paused waiter in a time namespace 1000 s ahead: its liveness deadline, on its
    clock, would keep a fair lease for it for 1000 s."""
    ahead = View(world, {300: 7000}, me=300, timens="time:[4026532177]", offset=1000.0)
    holding, waiting = same_host(world)
    s = scene(url, world, backends, holding, waiting)
    paused = open_view(url, ahead, backends).attempt(NAME, new_owner(), TTL, fair=True)
    assert isinstance(paused.try_acquire(), Busy)  # queued, then silent
    assert s.holder.release(NAME, s.owner)
    world.t += 5.0
    assert take(s.waiter, new_owner(), fair=True) == 2
    paused.close()


# -- rows an older fencelock wrote -----------------------------------------------------

OLD_SCHEMA = """
CREATE TABLE fencelock_leases (
    name TEXT PRIMARY KEY, owner TEXT, token INTEGER NOT NULL,
    expires_at REAL NOT NULL, boot TEXT NOT NULL, since REAL, pidns TEXT) WITHOUT ROWID;
CREATE TABLE fencelock_queue (
    seq INTEGER PRIMARY KEY, name TEXT NOT NULL, address BLOB NOT NULL UNIQUE,
    arrived REAL NOT NULL DEFAULT 0, alive_until REAL NOT NULL DEFAULT 0, owner TEXT);
"""


def old_file(tmp_path: Path, boot: str, expires_at: float) -> str:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_SCHEMA)
        conn.execute(
            "INSERT INTO fencelock_leases VALUES (?, ?, 7, ?, ?, 0, 'pid:[4026531836]')",
            (NAME, new_owner(), expires_at, boot),
        )
    return f"sqlite:///{path}"


def test_an_older_fencelocks_lease_from_this_boot_lasts_until_its_expiry(
    tmp_path: Path, world: World, backends: list[SQLiteBackend]
) -> None:
    url = old_file(tmp_path, "boot-a", world.t + TTL)
    waiter = open_view(url, View(world, {200: 6000}, me=200), backends)
    assert take(waiter, new_owner()) is None
    world.t += TTL
    assert take(waiter, new_owner()) == 8


def test_an_older_fencelocks_lease_from_another_boot_lasts_a_default_ttl_observed(
    tmp_path: Path, world: World, backends: list[SQLiteBackend]
) -> None:
    url = old_file(tmp_path, "boot-old", 0.0)
    waiter = open_view(url, View(world, {200: 6000}, me=200), backends)
    assert take(waiter, new_owner()) is None
    world.t += liveness.LEGACY_TTL - 0.5
    assert take(waiter, new_owner()) is None
    world.t += 0.5
    assert take(waiter, new_owner()) == 8


def test_a_lease_an_older_fencelock_took_over_is_not_judged_by_the_holder_before_it(
    url: str, world: World, backends: list[SQLiteBackend]
) -> None:
    """An older fencelock takes the lease as it always did, leaving the new columns as
    the holder before it wrote them: that holder's death says nothing of the new one."""
    holding, waiting = same_host(world)
    s = scene(url, world, backends, holding, waiting)
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        conn.execute(
            "UPDATE fencelock_leases SET owner = ?, token = token + 1, expires_at = ?",
            (new_owner(), world.t + TTL),
        )
    s.holder_dies()
    assert s.waiter_takes() is None
    world.t += TTL
    assert take(s.waiter, new_owner()) == 3


# -- the fast path ---------------------------------------------------------------------


@dataclass
class CountingView(View):
    """A view that counts every read but the clock's."""

    reads: list[str] = field(default_factory=list)

    def boot_id(self) -> str | None:
        self.reads.append("boot_id")
        return super().boot_id()

    def pid_namespace(self) -> str | None:
        self.reads.append("pid_namespace")
        return super().pid_namespace()

    def time_namespace(self) -> str | None:
        self.reads.append("time_namespace")
        return super().time_namespace()

    def proc_matches(self) -> bool:
        self.reads.append("proc_matches")
        return super().proc_matches()

    def process(self, pid: int) -> liveness.Process:
        self.reads.append(f"process {pid}")
        return super().process(pid)


def test_an_uncontended_cycle_reads_nothing_from_the_host_but_its_clock(
    url: str, world: World, backends: list[SQLiteBackend]
) -> None:
    view = CountingView(world, {100: 5000}, me=100)
    backend = open_view(url, view, backends)
    owner = new_owner()
    assert take(backend, owner) == 1
    assert backend.release(NAME, owner)
    view.reads.clear()  # this process's facts are read once
    for token in range(2, 12):
        owner = new_owner()
        assert take(backend, owner) == token
        assert backend.renew(NAME, owner, TTL)
        assert backend.release(NAME, owner)
    assert view.reads == []
