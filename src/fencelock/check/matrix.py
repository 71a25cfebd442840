"""The safety matrix: every backend under every nemesis, fenced and not, over seeds.

``scripts/safety_matrix.py`` runs ``fencelock check`` for each cell and keeps one JSON
line per run; this module holds what needs no process: each nemesis's settings, the
command line of a run, a run's summary from ``--json``, how many seeds a cell still
needs (at least :data:`MIN_SEEDS`, and more until :data:`MIN_FAULTS` faults, up to
:data:`MAX_SEEDS`), and the Markdown that replaces the matrix section of
docs/safety.md between :data:`BEGIN` and :data:`END`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fencelock.check.nemesis import NEMESES

BACKENDS = ("sqlite", "redis", "redlock", "etcd", "zookeeper", "postgresql", "advisory", "mysql")
MIN_FAULTS = 5  # per column of a cell (fenced, unfenced), over its seeds
MIN_SEEDS = 2
MAX_SEEDS = 4
BEGIN = "<!-- safety-matrix:begin (written by scripts/safety_matrix.py: do not edit) -->"
END = "<!-- safety-matrix:end -->"
REFUSED = 64  # fencelock check's exit code for a run that cannot be made
DASH, TIMES = "\N{EN DASH}", "\N{MULTIPLICATION SIGN}"


@dataclass(frozen=True)
class Timing:
    """The settings of a nemesis's runs."""

    ttl: float = 1.0
    work: float = 0.2
    clients: int = 8
    duration: float = 10.0

    def args(self) -> list[str]:
        return [
            "--ttl", f"{self.ttl:g}", "--work", f"{self.work:g}",
            "--clients", str(self.clients), "--duration", f"{self.duration:g}",
        ]  # fmt: skip


DEFAULT_TIMING = Timing()
TIMINGS: dict[str, Timing] = {
    # a cut-off holder notices on its own clock within the TTL: short leases, long work
    "partition": Timing(ttl=0.5, work=0.4, clients=4),
    # the holder's critical section must outlast the server's restart and the next
    # grant for two to believe at once: leases and work of seconds, a longer run
    "partition-restart": Timing(ttl=2.0, work=1.5, clients=4, duration=20.0),
}


def timing(nemesis: str) -> Timing:
    return TIMINGS.get(nemesis, DEFAULT_TIMING)


def arguments(backend: str, nemesis: str, seed: int, fenced: bool, directory: Path) -> list[str]:
    """``fencelock check``'s arguments for one run (``--json`` and ``--report`` included)."""
    where = (
        ["--url", f"sqlite:///{directory / 'locks.db'}"]
        if backend == "sqlite"
        else ["--servers", backend]
    )
    fencing = [] if fenced else ["--no-fencing"]
    return [
        *where, "--nemesis", nemesis, "--seed", str(seed), *timing(nemesis).args(), *fencing,
        "--json", "--report", str(directory / "report"),
    ]  # fmt: skip


def command(backend: str, nemesis: str, seed: int = 1) -> str:
    """The command a reader types to repeat a fenced run of the cell (add --no-fencing)."""
    where = "" if backend == "sqlite" else f" --servers {backend}"
    settings = " ".join(timing(nemesis).args())
    return f"fencelock check{where} --nemesis {nemesis} --seed {seed} {settings}"


@dataclass(frozen=True, kw_only=True)
class Run:
    """One ``fencelock check`` run of a cell, summed up."""

    backend: str
    nemesis: str
    seed: int
    fenced: bool
    code: int  # the exit code; -1: it did not finish in time
    verdict: str = ""  # PASS or FAIL: the checker's; "" when it gave none
    faults: int = 0
    overlaps: int = 0
    longest: float = 0.0  # seconds: the longest time two clients both believed
    lost: int = 0  # lost updates (the register's invariant)
    token_violations: int = 0
    rejected: int = 0  # stale writes the fence refused
    leases_lost: int = 0
    accepted: int = 0
    errors: int = 0
    why: str = ""  # a refused or broken run: its last line of stderr
    when: str = ""

    @property
    def checked(self) -> bool:
        """Whether the checker gave a verdict (not a crash that also exits 1)."""
        return self.verdict in ("PASS", "FAIL")

    @property
    def refused(self) -> bool:
        return self.code == REFUSED

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> Run:
        return cls(**json.loads(line))


def summarize(
    backend: str, nemesis: str, seed: int, fenced: bool, code: int, stdout: str, stderr: str,
    when: str = "",
) -> Run:  # fmt: skip
    """A run's summary from its exit code and ``--json`` output."""
    base = Run(backend=backend, nemesis=nemesis, seed=seed, fenced=fenced, code=code, when=when)
    doc: dict[str, Any] = {}
    if stdout.strip().startswith("{"):
        doc = json.loads(stdout)
    if code not in (0, 1) or not doc:
        lines = [line.strip() for line in stderr.splitlines() if line.strip()]
        return _replace(base, why=lines[-1][:300] if lines else f"exit {code}")
    result, counts = doc["result"], doc["counts"]
    return _replace(
        base,
        verdict="PASS" if doc["ok"] else "FAIL",
        faults=int(counts["faults"]),
        overlaps=int(result["overlap_count"]),
        longest=float(result["longest_overlap_seconds"]),
        lost=int(result["invariant"].get("lost_updates", 0)),
        token_violations=len(result["token_violations"]),
        rejected=int(counts["stale_writes"]),
        leases_lost=int(counts["leases_lost"]),
        accepted=int(counts["accepted_writes"]),
        errors=int(counts["errors"]),
    )


def _replace(run: Run, **changes: Any) -> Run:
    return Run(**{**asdict(run), **changes})


def read_runs(path: Path) -> list[Run]:
    """Every run in a results file (one JSON line each); none if it does not exist."""
    if not path.exists():
        return []
    return [Run.from_json(line) for line in path.read_text().splitlines() if line.strip()]


@dataclass
class Column:
    """One column of a cell (fenced, or not) over its seeds."""

    runs: list[Run] = field(default_factory=list)

    @property
    def checked(self) -> list[Run]:
        return [r for r in self.runs if r.checked]

    @property
    def seeds(self) -> list[int]:
        return sorted(r.seed for r in self.checked)

    @property
    def faults(self) -> int:
        return sum(r.faults for r in self.checked)

    @property
    def longest(self) -> float:
        return max((r.longest for r in self.checked), default=0.0)

    @property
    def lost(self) -> int:
        return sum(r.lost for r in self.checked)

    @property
    def token_violations(self) -> int:
        return sum(r.token_violations for r in self.checked)

    @property
    def rejected(self) -> int:
        return sum(r.rejected for r in self.checked)

    @property
    def failed(self) -> int:
        """Runs whose verdict was FAIL."""
        return sum(1 for r in self.checked if r.verdict == "FAIL")

    @property
    def refused(self) -> str:
        """Why the runs were refused ("" if they were not)."""
        return next((r.why for r in self.runs if r.refused), "")

    @property
    def broken(self) -> list[Run]:
        """Runs that gave no verdict and were not refused (the harness failed, a timeout)."""
        return [r for r in self.runs if not r.checked and not r.refused]

    def next_seed(self) -> int | None:
        """The seed to run next, or None when the column has enough (or was refused)."""
        if self.refused:
            return None
        tried = sorted(r.seed for r in self.runs)
        if len(tried) >= MAX_SEEDS:
            return None
        if len(self.checked) >= MIN_SEEDS and self.faults >= MIN_FAULTS:
            return None
        return max(tried, default=0) + 1


@dataclass
class Cell:
    backend: str
    nemesis: str
    fenced: Column = field(default_factory=Column)
    unfenced: Column = field(default_factory=Column)

    def column(self, fenced: bool) -> Column:
        return self.fenced if fenced else self.unfenced

    @property
    def refused(self) -> str:
        return self.fenced.refused or self.unfenced.refused

    @property
    def run(self) -> bool:
        """Whether both columns have a verdict."""
        return bool(self.fenced.checked and self.unfenced.checked)


def cells(runs: Iterable[Run]) -> dict[tuple[str, str], Cell]:
    """The runs by cell (backend, nemesis); the latest run of a seed counts."""
    latest: dict[tuple[str, str, int, bool], Run] = {}
    for run in runs:
        latest[(run.backend, run.nemesis, run.seed, run.fenced)] = run
    out: dict[tuple[str, str], Cell] = {}
    for run in latest.values():
        cell = out.setdefault((run.backend, run.nemesis), Cell(run.backend, run.nemesis))
        cell.column(run.fenced).runs.append(run)
    return out


def _seeds(numbers: Sequence[int]) -> str:
    if not numbers:
        return DASH
    if list(numbers) == list(range(numbers[0], numbers[-1] + 1)) and len(numbers) > 1:
        return f"{numbers[0]}{DASH}{numbers[-1]}"
    return ", ".join(map(str, numbers))


def _verdict(column: Column) -> str:
    runs = len(column.checked)
    if not runs:
        return "not run"
    if not column.failed:
        return f"PASS {TIMES}{runs}"
    extra = f", {column.token_violations} token-order" if column.token_violations else ""
    return f"**FAIL** {column.failed}/{runs}{extra}"


def _grid_cell(cell: Cell | None, pending: str | None) -> str:
    if pending is not None:
        return "pending"
    if cell is None:
        return "not run"
    if cell.refused:
        return "n/a"
    if not cell.run:
        return "not run"
    f, u = cell.fenced, cell.unfenced
    fenced = f"**{f.lost}**" if f.lost or f.token_violations else "0"
    faults = min(f.faults, u.faults)
    few = f" (only {faults} faults)" if faults < MIN_FAULTS else ""
    return f"{max(f.longest, u.longest):.2f} s; lost {fenced}/{u.lost}{few}"


def _detail_row(cell: Cell) -> str:
    f, u = cell.fenced, cell.unfenced
    seeds = f.seeds if f.seeds == u.seeds else sorted(set(f.seeds) | set(u.seeds))
    broken = len(f.broken) + len(u.broken)
    note = f" ({broken} run{'s' if broken != 1 else ''} gave no verdict)" if broken else ""
    return (
        f"| {cell.backend} | {cell.nemesis} | {_seeds(seeds)}{note} | {f.faults} / {u.faults} "
        f"| {f.longest:.2f} / {u.longest:.2f} s | {f.lost} / {u.lost} | {f.rejected} "
        f"| {_verdict(f)} / {_verdict(u)} |"
    )


def render(
    runs: Sequence[Run],
    backends: Sequence[str] = BACKENDS,
    nemeses: Sequence[str] = NEMESES,
    pending: Mapping[tuple[str, str], str] | None = None,
) -> str:
    """The matrix section's Markdown: the grid, the settings, one row per cell."""
    pending = pending or {}
    by_cell = cells(runs)
    when = sorted(r.when for r in runs if r.when)
    first, last = (when[0][:10], when[-1][:10]) if when else ("", "")
    dates = "no runs yet" if not when else first if first == last else f"{first} to {last}"
    out = [
        f"*Generated by `scripts/safety_matrix.py` from {len(runs)} runs ({dates}). "
        "Each cell: the longest time two clients both believed they held the lock, over "
        "every run of the cell, fenced or not; then lost updates with fencing / without. "
        f"Every cell ran at least {MIN_SEEDS} seeds, fenced and unfenced, and more (up to "
        f"{MAX_SEEDS}) until each column had {MIN_FAULTS} faults (a cell says so where one "
        "had fewer). n/a: `fencelock check` refuses the pair (the reasons are below the "
        "table). not run: no verdict yet.*",
        "",
        "| nemesis | " + " | ".join(backends) + " |",
        "|---" * (len(backends) + 1) + "|",
    ]
    for nemesis in nemeses:
        row = [_grid_cell(by_cell.get((b, nemesis)), pending.get((b, nemesis))) for b in backends]
        out.append(f"| {nemesis} | " + " | ".join(row) + " |")
    out += ["", "Settings (8 clients, 10 s, TTL 1 s, `--work 0.2` unless listed):", ""]
    out += [
        f"* `{name}`: TTL {t.ttl:g} s, `--work {t.work:g}`, {t.clients} clients, "
        f"{t.duration:g} s per run"
        for name, t in TIMINGS.items()
        if name in nemeses
    ]
    out += [
        "",
        "| backend | nemesis | seeds | faults (fenced / unfenced) | longest overlap "
        "(fenced / unfenced) | lost updates (fenced / unfenced) | stale writes rejected "
        "(fenced) | verdicts (fenced / unfenced) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    refused: dict[str, list[str]] = {}
    for backend in backends:
        for nemesis in nemeses:
            cell = by_cell.get((backend, nemesis))
            if (backend, nemesis) in pending:
                why = pending[backend, nemesis]
                out.append(f"| {backend} | {nemesis} | pending: {why} |" + " |" * 5)
            elif cell is not None and cell.refused:
                refused.setdefault(cell.refused, []).append(f"{backend} {TIMES} {nemesis}")
            elif cell is not None and (cell.fenced.runs or cell.unfenced.runs):
                out.append(_detail_row(cell))
    if refused:
        out += ["", "Refused by `fencelock check` (exit 64):", ""]
        out += [
            f"* {', '.join(pairs)}: {why.removeprefix('fencelock: ')}"
            for why, pairs in refused.items()
        ]
    if pending:
        out += ["", "pending: " + "; ".join(sorted(set(pending.values())))]
    return "\n".join(out)


def splice(doc: str, section: str) -> str:
    """``doc`` with what lies between :data:`BEGIN` and :data:`END` replaced by ``section``."""
    head, begin, rest = doc.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"the document has no {BEGIN!r} ... {END!r} markers")
    return f"{head}{BEGIN}\n{section}\n{END}{tail}"
