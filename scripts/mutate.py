"""Mutation testing of the safety code: how many mutants the tests and the simulator kill.

    python scripts/mutate.py [--files "engine/trust.py lease.py"] [--budget MINUTES]
                             [--sample N] [--seed S] [--rev HEAD|worktree] [--jobs 2]
                             [--sim-seeds 2] [--redis] [--workdir tmp/mutate]
    python scripts/mutate.py --report-only | --resume [--budget M] | --recheck

``make mutate`` runs it (``FILES=``, ``BUDGET=``, ``SAMPLE=``, ``REV=`` pass through);
it is not part of ``make test``. The tool is mutmut 3 (the ``mutate`` extra), driven
here so that the project's working tree is never touched:

1. a snapshot of ``--rev`` (a commit, by default HEAD; ``worktree`` for uncommitted
   changes) is exported into ``--workdir`` (``tmp/mutate/``, ignored by git), with a
   ``[tool.mutmut]`` section added to its copy of pyproject.toml and one more test file,
   ``tests/mutate_sim/test_sim_sweep.py``: the simulator, every family and workload,
   seeds ``0..--sim-seeds-1`` each (fixed seeds, not a CPU budget, so a mutant's
   verdict does not depend on how loaded the machine is);
2. mutmut copies that snapshot into ``mutants/`` with every mutant of the safety files
   (below, or ``--files``) behind a trampoline, runs the killer once to learn which
   tests reach which function, then runs each mutant against only those tests, ``-x``:
   ``tests/unit``, ``tests/contract`` on memory:// and sqlite:/// (``-m "not slow"``)
   and the simulator sweep (``--redis`` adds redis:// to the contract and
   ``tests/redis``; the server must be installed, ``make servers``);
3. with ``--sample N`` only N mutants, drawn at random from each file in proportion,
   are run; with ``--budget`` the run is stopped when the minutes are spent (what was
   not reached counts as not run, never as survived);
4. the report: per file, mutants, killed, timed out, survived, not covered by any test
   of the killer ("no tests": survivors too), not run, and the kill rate, which is
   (killed + timed out) / (killed + timed out + survived + no tests); then every
   survivor as file:line, its mutant's name and the change. A mutant that only edits
   a string literal (an error message, mostly) is marked ``[string]``.

A function that runs only in a forked child is invisible to mutmut's test map, and the
batched renewal's tests are marked slow: their mutants left alive are run afterwards
against those tests (``RECHECK``; ``--recheck`` does it alone).
``--resume`` runs what a budget left unjudged, on the same snapshot, without a second
instrumented run. ``--jobs`` (4) mutants run at once: the killer's tests mostly wait.

``mutmut show NAME`` (run in ``--workdir``) prints one mutant's diff; ``mutmut apply``
is never needed. Results stay in ``--workdir``: ``report.txt`` and ``report.json``.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import fnmatch
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "src/fencelock"

# The safety code: what decides who holds, for how long it is trusted, what is undone.
SAFETY_FILES = [
    "engine/*.py",
    "lease.py",
    "renewer.py",
    "client_leases.py",
    "fencing.py",
    "primitives/*.py",
    "backends/threaded.py",
    "backends/bounds.py",
    "backends/redis/attempt.py",
    "backends/sqlite/liveness.py",
    "backends/redlock/round.py",
]
SKIP_FILES = {"__init__.py"}  # package markers: nothing to mutate

# Tests that read the source text (layers, the one clock, the client's internals, the docs' paths):
# the mutated copy's text carries every mutant at once and mutmut's imports, so these
# fail on the copy whatever the mutant (mutmut then refuses to start), and can kill
# none of them.
DESELECT = [
    "tests/unit/test_layers.py",
    "tests/unit/test_one_clock.py",
    "tests/unit/test_client_internals.py",
    "tests/unit/test_doc_paths.py",
    "tests/unit/test_backoff.py::test_no_module_writes_a_backoff_of_its_own",
    # and those that list a class's members: mutmut's copies of each method are members
    "tests/unit/test_public_api.py::test_every_public_member_has_a_docstring",
    "tests/unit/test_public_api.py::test_every_class_users_are_handed_documents_itself",
    "tests/contract/test_contract_async.py::test_sync_and_async_signatures_match",
    # a pytester run inside the copy: mutmut's trampolines look for its configuration there
    "tests/redis/test_throwaway_servers.py::test_a_failing_test_shows_its_servers_log",
]

# Mutants that the killer cannot judge, run afterwards against the tests that can (a
# recheck): a function that runs only in a forked child (mutmut maps the tests that reach
# a function in the test's own process only, so its mutants read "no tests"), and the
# batched renewal, whose tests are marked slow (their mutants read "survived").
RECHECK = {
    "_reset_after_fork": ["tests/contract/test_fork.py"],
    "renew_together": ["tests/contract/test_batched_renewal.py"],
    "arenew_together": ["tests/contract/test_batched_renewal.py"],
    "_service": ["tests/contract/test_batched_renewal.py"],  # the renewer's round
}

SIM_SWEEP = '''"""Written by scripts/mutate.py: the simulator as a killer, on fixed seeds."""

import pytest

from fencelock.sim import Plan, run
from fencelock.sim.workloads import WORKLOADS
from fencelock.sim.world import FAMILIES, OUTLIVING

SEEDS = range({seeds})
PAIRS = [
    (family, workload)
    for family in FAMILIES
    for workload in sorted(WORKLOADS)
    if not (workload in OUTLIVING and family == "session")
]


@pytest.mark.parametrize(("family", "workload"), PAIRS)
@pytest.mark.parametrize("seed", SEEDS)
def test_sim(family: str, workload: str, seed: int) -> None:
    outcome = run(Plan(seed=seed, family=family, workload=workload))
    assert outcome.ok, f"seed {{seed}}: {{outcome.violation}}"
    # a mutant that never grants breaks no invariant: it must not pass for that
    assert outcome.grants > 0 or workload in OUTLIVING, "no lease was ever granted"
'''

# mutmut's exit codes, as its own table reads them (mutmut.stats.status_by_exit_code)
STATUS = {
    1: "killed",
    3: "killed",
    0: "survived",
    5: "no tests",
    33: "no tests",
    2: "interrupted",
    None: "not run",
    34: "skipped",
    35: "suspicious",
    36: "timeout",
    37: "killed",  # by the type checker (not configured here)
    -24: "timeout",
    24: "timeout",
    152: "timeout",
    255: "timeout",
    -11: "crashed",
    -9: "timeout",  # SIGKILL: mutmut ends a worker so that goes past its time limit
}
COLUMNS = ["killed", "timeout", "survived", "no tests", "not run", "other"]


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(prog="scripts/mutate.py", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--files",
        default=env("MUTATE_FILES", ""),
        help="globs under src/fencelock/ (spaces or commas): only these files",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=float(env("MUTATE_BUDGET") or 0),
        help="stop after this many minutes of wall time (0: no limit)",
    )
    parser.add_argument(
        "--sample",
        type=int,
        default=int(env("MUTATE_SAMPLE") or 0),
        help="run only this many mutants, drawn at random per file (0: all)",
    )
    parser.add_argument(
        "--all-of",
        default=env("MUTATE_ALL_OF", ""),
        help="globs of files whose every mutant runs, whatever --sample says",
    )
    parser.add_argument("--seed", type=int, default=int(env("MUTATE_SEED") or 0))
    parser.add_argument(
        "--rev", default=env("MUTATE_REV") or "HEAD", help="a commit, or 'worktree'"
    )
    # the killer's tests mostly wait (leases, renewals): more workers than cores pay
    parser.add_argument("--jobs", type=int, default=int(env("MUTATE_JOBS") or 4))
    parser.add_argument("--sim-seeds", type=int, default=2, help="simulator seeds per pair")
    parser.add_argument(
        "--redis", action="store_true", help="add redis:// and tests/redis to the killer"
    )
    parser.add_argument("--workdir", type=Path, default=ROOT / "tmp" / "mutate")
    parser.add_argument(
        "--report-only", action="store_true", help="print the report of the last run"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="run the last run's mutants not judged yet (mutmut keeps its test map)",
    )
    parser.add_argument(
        "--recheck",
        action="store_true",
        help="run the last run's RECHECK mutants left alive, then report",
    )
    return parser.parse_args(argv)


# ---------------------------------------------------------------- which files


def _all_sources() -> list[str]:
    base = ROOT / PACKAGE
    return sorted(str(p.relative_to(base)) for p in base.rglob("*.py"))


def chosen_files(spec: str) -> list[str]:
    """The files to mutate, relative to src/fencelock/: the safety files, or those
    ``spec`` names (a glob, a path, or a path's tail such as ``trust.py``)."""
    sources = _all_sources()
    tokens = [t for t in spec.replace(",", " ").split() if t]
    if not tokens:
        picked = {s for s in sources for g in SAFETY_FILES if fnmatch.fnmatch(s, g)}
    else:
        picked = set()
        for given in tokens:
            token = given.removeprefix("src/").removeprefix("fencelock/")
            found = {
                s
                for s in sources
                if fnmatch.fnmatch(s, token) or s == token or s.endswith("/" + token)
            }
            if not found:
                raise SystemExit(f"mutate: no file under {PACKAGE}/ matches {token!r}")
            picked |= found
    return sorted(p for p in picked if Path(p).name not in SKIP_FILES)


# ---------------------------------------------------------------- the work directory


def export_snapshot(rev: str, into: Path) -> None:
    """The project at ``rev`` (or the working tree) into ``into``; the tree itself is
    only read (``git archive`` does not touch the index)."""
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    if rev == "worktree":
        ignore = shutil.ignore_patterns(
            ".git", ".venv", "tmp", "__pycache__", "*.egg-info", ".*_cache", ".hypothesis"
        )
        for entry in ROOT.iterdir():
            if entry.name in {".git", ".venv", "tmp", "site", "build", "dist"}:
                continue
            if entry.is_dir():
                shutil.copytree(entry, into / entry.name, ignore=ignore)
            else:
                shutil.copy2(entry, into / entry.name)
        return
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")


def configure(work: Path, files: list[str], args: argparse.Namespace) -> None:
    """mutmut's settings in the snapshot's pyproject.toml, and the simulator sweep."""
    selection = ["tests/unit", "tests/contract", "tests/mutate_sim"]
    if args.redis:
        selection.append("tests/redis")
    cli = ["-p", "no:cacheprovider", "-m", "not slow", "--timeout=60", "-p", "no:xdist"]
    for test in DESELECT:
        cli += ["--deselect", test]
    also = sorted(
        p.name
        for p in work.iterdir()
        if p.name not in {"src", "tests", "pyproject.toml", "mutants"}
    )
    lines = [
        "",
        "[tool.mutmut]  # written by scripts/mutate.py",
        f"source_paths = {json.dumps(['src'])}",
        f"only_mutate = {json.dumps([f'{PACKAGE}/{f}' for f in files])}",
        f"also_copy = {json.dumps(also)}",
        f"pytest_add_cli_args = {json.dumps(cli)}",
        f"pytest_add_cli_args_test_selection = {json.dumps(selection)}",
        'process_isolation = "forkserver"',
        "use_git_change_detection = false",
        "use_setproctitle = false",
        "",
    ]
    with (work / "pyproject.toml").open("a", encoding="utf-8") as out:
        out.write("\n".join(lines))
    sweep = work / "tests" / "mutate_sim"
    sweep.mkdir(parents=True, exist_ok=True)
    (sweep / "__init__.py").write_text("")
    (sweep / "test_sim_sweep.py").write_text(SIM_SWEEP.format(seeds=args.sim_seeds))
    # The mutants' directory exists before Python starts: a PYTHONPATH entry that did
    # not exist at start-up is cached as missing and never searched again, and the
    # tests would quietly import the unmutated package through the editable install.
    (work / "mutants" / "src").mkdir(parents=True, exist_ok=True)


def environment(work: Path, args: argparse.Namespace) -> dict[str, str]:
    env = dict(os.environ)
    # the tests' own subprocesses (workers, forks) import the mutated copy too; mutmut
    # passes the mutant's name down in MUTANT_UNDER_TEST
    env["PYTHONPATH"] = str(work / "mutants" / "src")
    env["FENCELOCK_TEST_BACKENDS"] = "memory,sqlite,redis" if args.redis else "memory,sqlite"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("FENCELOCK_URL", None)
    return env


GENERATE = """
import sys
from mutmut.__main__ import create_mutants
from mutmut.mutation.trampoline import set_mutant_under_test
from mutmut.utils.file_utils import copy_also_copy_files, copy_src_dir
set_mutant_under_test("mutant_generation")
copy_src_dir()
copy_also_copy_files()
create_mutants(int(sys.argv[1]))
"""


def generate(work: Path, env: dict[str, str], jobs: int) -> None:
    """Every mutant, before any test runs (so that a sample can be drawn)."""
    done = subprocess.run(
        [sys.executable, "-c", GENERATE, str(jobs)],
        check=False,
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit("mutate: mutmut could not generate the mutants")


# ---------------------------------------------------------------- mutants and results


@dataclass
class Mutant:
    name: str  # mutmut's: fencelock.engine.trust.x_granted__mutmut_14
    file: str  # relative to src/fencelock/
    code: int | None = None
    line: int = 0
    change: str = ""
    string_only: bool = False

    @property
    def status(self) -> str:
        return STATUS.get(self.code, "other")


def _module_file(module: str, files: list[str]) -> str | None:
    for f in files:
        dotted = "fencelock." + f.removesuffix(".py").replace("/", ".")
        if dotted == module or dotted.removesuffix(".__init__") == module:
            return f
    return None


def load_mutants(work: Path, files: list[str]) -> list[Mutant]:
    rechecked = work / "rechecked.json"
    overrides = json.loads(rechecked.read_text()) if rechecked.exists() else {}
    mutants = []
    for f in files:
        meta = work / "mutants" / PACKAGE / (f + ".meta")
        if not meta.exists():
            continue
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        mutants += [Mutant(name, f, overrides.get(name, code)) for name, code in codes.items()]
    return mutants


def _function(name: str) -> str:
    return name.rpartition(".")[2].partition("__mutmut_")[0].rpartition("ǁ")[2].removeprefix("x_")


def recheck(
    work: Path, env: dict[str, str], names: set[str] | None, deadline: float | None
) -> None:
    """Run each mutant of a RECHECK function left alive against that function's tests."""
    files = json.loads((work / "files.json").read_text())
    path = work / "rechecked.json"
    done: dict[str, int] = json.loads(path.read_text()) if path.exists() else {}
    todo = [
        m
        for m in load_mutants(work, files)
        if m.status in {"no tests", "survived"}
        and _function(m.name) in RECHECK
        and m.name not in done
        if names is None or m.name in names
    ]
    cli = ["-x", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    for m in todo:
        if deadline is not None and time.monotonic() > deadline:
            break
        tests = RECHECK[_function(m.name)]
        try:
            code = subprocess.run(
                ["nice", "-n", "10", sys.executable, "-m", "pytest", *cli, *tests],
                cwd=work / "mutants",
                env={**env, "MUTANT_UNDER_TEST": m.name},
                capture_output=True,
                timeout=300,
                check=False,
            ).returncode
        except subprocess.TimeoutExpired:
            code = 36
        done[m.name] = code
        path.write_text(json.dumps(done, indent=1))
        print(f"mutate: recheck {m.name}: {STATUS.get(code, 'other')}", flush=True)


def sample(mutants: list[Mutant], count: int, seed: int, whole: list[str]) -> list[Mutant]:
    """``count`` mutants, each file's share in proportion to its mutants (at least 1),
    plus every mutant of the files ``whole`` names."""
    if count <= 0:
        return mutants
    rng = random.Random(seed)
    by_file: dict[str, list[Mutant]] = {}
    for m in mutants:
        by_file.setdefault(m.file, []).append(m)
    drawn = [m for m in mutants if m.file not in whole]
    picked = []
    for f, group in by_file.items():
        if f in whole:
            picked += group
            continue
        share = max(1, round(count * len(group) / max(1, len(drawn))))
        picked += rng.sample(group, min(share, len(group)))
    return sorted(picked, key=lambda m: m.name)


def _functions(tree: ast.Module) -> dict[tuple[str | None, str], ast.AST]:
    found: dict[tuple[str | None, str], ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found[(None, node.name)] = node
        elif isinstance(node, ast.ClassDef):
            for inner in node.body:
                if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                    found[(node.name, inner.name)] = inner
    return found


def _segment(lines: list[str], node: ast.AST) -> list[str]:
    return lines[node.lineno - 1 : node.end_lineno]  # type: ignore[attr-defined]


def _tokens(code: list[str]) -> list[tuple[int, str]]:
    text = "\n".join(line.strip() for line in code) + "\n"
    try:
        return [
            (t.type, t.string)
            for t in tokenize.generate_tokens(io.StringIO(text).readline)
            if t.type not in {tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT}
        ]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []


def describe(work: Path, mutants: list[Mutant]) -> None:
    """file:line and the change of each mutant, from the mutated copy's functions."""
    Functions = dict[tuple[str | None, str], ast.AST]
    parsed: dict[str, tuple[Functions, list[str], Functions, list[str]]] = {}
    for m in mutants:
        if m.file not in parsed:
            original = (work / PACKAGE / m.file).read_text().splitlines()
            mutated = (work / "mutants" / PACKAGE / m.file).read_text().splitlines()
            parsed[m.file] = (
                _functions(ast.parse("\n".join(original))),
                original,
                _functions(ast.parse("\n".join(mutated))),
                mutated,
            )
        funcs, original, mfuncs, mutated = parsed[m.file]
        mangled = m.name.rpartition(".")[2]  # x_name__mutmut_3 or xǁClassǁname__mutmut_3
        stem = mangled.partition("__mutmut_")[0]
        if "ǁ" in stem:
            _, cls, fn = stem.split("ǁ")
            key: tuple[str | None, str] = (cls, fn)
        else:
            key = (None, stem.removeprefix("x_"))
        orig_copy = mfuncs.get((key[0], stem + "__mutmut_orig"))
        mutant = mfuncs.get((key[0], mangled))
        source = funcs.get(key)
        if orig_copy is None or mutant is None or source is None:
            m.change = "(could not locate the function)"
            continue
        before, after = _segment(mutated, orig_copy)[1:], _segment(mutated, mutant)[1:]
        removed, added, first = [], [], None
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=before, b=after).get_opcodes():
            if tag == "equal":
                continue
            first = i1 if first is None else first
            removed += [s.strip() for s in before[i1:i2]]
            added += [s.strip() for s in after[j1:j2]]
        offset = 1 + (first or 0)
        m.line = source.lineno + offset  # type: ignore[attr-defined,unused-ignore]
        m.change = f"{' '.join(removed)}  ->  {' '.join(added)}"
        old, new = _tokens(removed), _tokens(added)
        m.string_only = (
            bool(old)
            and len(old) == len(new)
            and all(
                a == b or (a[0] == b[0] == tokenize.STRING) for a, b in zip(old, new, strict=True)
            )
        )


@dataclass
class Tally:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COLUMNS, 0))

    def add(self, status: str) -> None:
        column = status if status in self.counts else "other"
        if status == "interrupted":
            column = "not run"
        self.counts[column] += 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def rate(self) -> float | None:
        c = self.counts
        caught = c["killed"] + c["timeout"]
        judged = caught + c["survived"] + c["no tests"]
        return caught / judged if judged else None


def report(work: Path, files: list[str], names: set[str] | None, header: str) -> str:
    mutants = [m for m in load_mutants(work, files) if names is None or m.name in names]
    for m in mutants:
        if m.status == "interrupted":
            m.code = None
    describe(work, [m for m in mutants if m.status in {"survived", "no tests"}])
    per_file: dict[str, Tally] = {f: Tally() for f in sorted({m.file for m in mutants})}
    total = Tally()
    for m in mutants:
        per_file[m.file].add(m.status)
        total.add(m.status)
    width = max([len(f) for f in per_file] + [10])
    out = [header, ""]
    out.append(
        f"{'file':<{width}} {'mutants':>7} "
        + " ".join(f"{c:>8}" for c in COLUMNS)
        + f" {'kill rate':>9}"
    )

    def row(label: str, t: Tally) -> str:
        rate = "-" if t.rate is None else f"{100 * t.rate:.1f}%"
        return (
            f"{label:<{width}} {t.total:>7} "
            + " ".join(f"{t.counts[c]:>8}" for c in COLUMNS)
            + f" {rate:>9}"
        )

    out += [row(f, t) for f, t in per_file.items()]
    out.append(row("total", total))
    strings = sum(1 for m in mutants if m.status in {"survived", "no tests"} and m.string_only)
    out.append("")
    out.append(
        "kill rate = (killed + timeout) / (killed + timeout + survived + no tests); "
        "'no tests': no test of the killer reaches the function; 'not run': left by "
        "the budget or the sample"
    )
    for status in ("survived", "no tests"):
        listed = sorted((m for m in mutants if m.status == status), key=lambda m: (m.file, m.line))
        if not listed:
            continue
        out += ["", f"{status} ({len(listed)}; [string]: only a string literal changed):"]
        for m in listed:
            tag = " [string]" if m.string_only else ""
            short = m.name.rpartition(".")[2]
            out.append(f"  {m.file}:{m.line}{tag}  {short}  {m.change}")
    if strings:
        out.append(f"\n{strings} of the mutants left alive change only a string literal")
    text = "\n".join(out) + "\n"
    (work / "report.txt").write_text(text)
    (work / "report.json").write_text(
        json.dumps(
            {
                "header": header,
                "files": {f: {**t.counts, "rate": t.rate} for f, t in per_file.items()},
                "total": {**total.counts, "rate": total.rate},
                "mutants": [
                    {
                        "name": m.name,
                        "file": m.file,
                        "status": m.status,
                        "line": m.line,
                        "change": m.change,
                        "string_only": m.string_only,
                    }
                    for m in mutants
                ],
            },
            indent=1,
        )
    )
    return text


# ---------------------------------------------------------------- the run


def run_mutmut(
    work: Path, env: dict[str, str], names: list[str], jobs: int, deadline: float | None
) -> int:
    """``mutmut run`` on ``names`` (all when empty); at the deadline it is interrupted as
    with Ctrl-C (mutmut keeps what it has judged), then ended."""
    log = (work / "mutmut.log").open("a")
    command = ["nice", "-n", "10", sys.executable, "-m", "mutmut", "run", "--max-children"]
    process = subprocess.Popen(
        [*command, str(jobs), *names],
        cwd=work,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    files = json.loads((work / "files.json").read_text())
    wanted = set(names) if names else None
    began = time.monotonic()
    while True:
        try:
            return process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        done = [
            m
            for m in load_mutants(work, files)
            if (wanted is None or m.name in wanted) and m.code is not None
        ]
        print(
            f"mutate: {time.monotonic() - began:.0f} s, {len(done)} of "
            f"{len(wanted) if wanted else '?'} mutants judged",
            flush=True,
        )
        if deadline is not None and time.monotonic() > deadline:
            print("mutate: the budget is spent; stopping mutmut", flush=True)
            os.kill(process.pid, signal.SIGINT)
            try:
                return process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                return process.wait()


def resume(work: Path, args: argparse.Namespace, deadline: float | None) -> int:
    """The last run's chosen mutants that were not judged (stopped by the budget),
    with the same snapshot and the test map mutmut saved (no second stats run)."""
    files = json.loads((work / "files.json").read_text())
    chosen = set(json.loads((work / "names.json").read_text()))
    todo = sorted(
        m.name for m in load_mutants(work, files) if m.name in chosen and m.code in (None, 2)
    )
    print(f"mutate: resuming {len(todo)} mutants in {work}", flush=True)
    env = environment(work, args)
    if todo:
        run_mutmut(work, env, todo, args.jobs, deadline)
    recheck(work, env, chosen, deadline)
    print(report(work, files, chosen, (work / "header.txt").read_text().strip()))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    work: Path = args.workdir.resolve()
    if args.recheck:
        chosen_names = work / "names.json"
        last = set(json.loads(chosen_names.read_text())) if chosen_names.exists() else None
        recheck(work, environment(work, args), last, None)
    if args.report_only or args.recheck:
        files = json.loads((work / "files.json").read_text())
        names_file = work / "names.json"
        last = set(json.loads(names_file.read_text())) if names_file.exists() else None
        print(report(work, files, last, (work / "header.txt").read_text().strip()))
        return 0
    began = time.monotonic()
    deadline = began + 60 * args.budget if args.budget > 0 else None
    if args.resume:
        return resume(work, args, deadline)
    files = chosen_files(args.files)
    print(f"mutate: {len(files)} files, snapshot of {args.rev} in {work}", flush=True)
    export_snapshot(args.rev, work)
    configure(work, files, args)
    (work / "files.json").write_text(json.dumps(files))
    env = environment(work, args)
    generate(work, env, args.jobs)
    everything = load_mutants(work, files)
    whole = chosen_files(args.all_of) if args.all_of.strip() else []
    chosen = sample(everything, args.sample, args.seed, whole)
    names = [m.name for m in chosen] if len(chosen) < len(everything) else []
    (work / "names.json").write_text(json.dumps([m.name for m in chosen]))
    killer = "tests/unit + tests/contract (memory, sqlite" + (", redis" if args.redis else "")
    killer += ") -m 'not slow' + tests/redis" if args.redis else ") -m 'not slow'"
    header = (
        f"mutation testing (mutmut) of {len(files)} files at {args.rev}: "
        f"{len(everything)} mutants generated, {len(chosen)} chosen"
        + (f" (a sample, seed {args.seed})" if names else "")
        + (f"; every mutant of {', '.join(whole)}" if names and whole else "")
        + (f", budget {args.budget:g} min" if deadline else "")
        + f"\nkiller: {killer} + the simulator, every family x workload, "
        f"seeds 0-{args.sim_seeds - 1}"
    )
    (work / "header.txt").write_text(header)
    print(header, flush=True)
    print(f"mutate: mutmut's log: {work / 'mutmut.log'}", flush=True)
    code = run_mutmut(work, env, names, args.jobs, deadline)
    judged = [m for m in load_mutants(work, files) if m.code is not None]
    if not judged:
        tail = (work / "mutmut.log").read_text(errors="replace").replace("\r", "\n")
        print(f"mutate: mutmut exited {code}, judging nothing:", file=sys.stderr)
        print(tail[-3000:], file=sys.stderr)
        print(
            "mutate: 'failed to collect stats' means a test failed on the mutated copy "
            "before any mutant ran: run it there (cd mutants; MUTANT_UNDER_TEST=stats "
            "PYTHONPATH=$PWD/src pytest ...) and, if it reads the source or lists a "
            "class's members, add it to DESELECT in scripts/mutate.py",
            file=sys.stderr,
        )
        return 1
    recheck(work, env, {m.name for m in chosen}, deadline)
    print(report(work, files, {m.name for m in chosen}, header))
    print(f"({time.monotonic() - began:.0f} s; report in {work / 'report.txt'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
