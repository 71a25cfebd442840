"""Run ``fencelock check`` for every backend under every nemesis, and write the matrix
section of docs/safety.md from the runs.

    python scripts/safety_matrix.py run [--backends redis,mysql] [--nemeses pause,kill]
                                        [--results FILE] [--budget MINUTES] [--again]
    python scripts/safety_matrix.py render [--results FILE] [--doc docs/safety.md]
                                           [--pending BACKEND:NEMESIS=REASON ...]

``run`` appends one JSON line per run to the results file and skips what it already
holds, so it can be stopped and started again (``--again`` forgets the runs of the cells
named first, to run them anew after a fix); each cell runs fenced and unfenced,
seeds 1, 2, ... until it has at least 2 seeds and 5 faults per column (at most 4
seeds). Settings per nemesis: :mod:`fencelock.check.matrix`. ``render`` replaces what
lies between the markers in the document; a cell with no verdict reads "not run".
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fencelock.check.matrix import (
    BACKENDS,
    REFUSED,
    Run,
    arguments,
    cells,
    read_runs,
    render,
    splice,
    summarize,
    timing,
)
from fencelock.check.nemesis import NEMESES

FENCELOCK = str(Path(sys.executable).parent / "fencelock")
RESULTS = Path(tempfile.gettempdir()) / "safety-matrix" / "results.jsonl"
DOC = Path(__file__).resolve().parent.parent / "docs" / "safety.md"


def run_one(backend: str, nemesis: str, seed: int, fenced: bool, workdir: Path) -> Run:
    """One ``fencelock check`` run; its report kept only if a fenced run failed or broke."""
    directory = workdir / f"{backend}-{nemesis}-{seed}-{'fenced' if fenced else 'unfenced'}"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    args = arguments(backend, nemesis, seed, fenced, directory)
    when = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    try:
        done = subprocess.run(
            [FENCELOCK, "check", *args],
            capture_output=True,
            text=True,
            timeout=timing(nemesis).duration + 300,
            check=False,
        )
        code, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        code, out, err = -1, "", f"did not finish within {exc.timeout:.0f}s"
    run = summarize(backend, nemesis, seed, fenced, code, out, err, when=when)
    if run.verdict == "PASS" or run.refused or (run.verdict == "FAIL" and not fenced):
        shutil.rmtree(directory, ignore_errors=True)
    return run


def _line(run: Run, took: float) -> str:
    column = "fenced" if run.fenced else "unfenced"
    head = f"{run.backend} x {run.nemesis} seed {run.seed} {column}: exit {run.code}"
    if not run.checked:
        return f"{head} ({run.why}) [{took:.0f}s]"
    return (
        f"{head}, {run.faults} faults, {run.overlaps} overlaps (longest {run.longest:.2f}s), "
        f"{run.lost} lost, {run.rejected} rejected [{took:.0f}s]"
    )


def run_all(
    backends: list[str], nemeses: list[str], results: Path, workdir: Path, budget: float
) -> None:
    """Run every cell's missing seeds (nemesis by nemesis) until done or out of budget."""
    results.parent.mkdir(parents=True, exist_ok=True)
    stop_at = time.monotonic() + budget
    for nemesis in nemeses:
        for backend in backends:
            for fenced in (True, False):
                while time.monotonic() < stop_at:
                    cell = cells(read_runs(results)).get((backend, nemesis))
                    seed = 1 if cell is None else cell.column(fenced).next_seed()
                    if seed is None:
                        break
                    began = time.monotonic()
                    run = run_one(backend, nemesis, seed, fenced, workdir)
                    with results.open("a") as out:
                        out.write(run.to_json() + "\n")
                    print(_line(run, time.monotonic() - began), file=sys.stderr, flush=True)
                    if run.code == REFUSED:
                        break
    if time.monotonic() >= stop_at:
        print("out of budget: the cells left read 'not run'", file=sys.stderr)


def forget(results: Path, backends: list[str], nemeses: list[str]) -> int:
    """Drop the runs of the cells named from the results file; how many were dropped."""
    runs = read_runs(results)
    kept = [r for r in runs if r.backend not in backends or r.nemesis not in nemeses]
    results.write_text("".join(r.to_json() + "\n" for r in kept))
    return len(runs) - len(kept)


def _pending(items: list[str]) -> dict[tuple[str, str], str]:
    out = {}
    for item in items:
        pair, _, why = item.partition("=")
        backend, _, nemesis = pair.partition(":")
        out[(backend, nemesis)] = why or "to be run again"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    run = sub.add_parser("run", help="run the missing cells")
    run.add_argument("--backends", default=",".join(BACKENDS))
    run.add_argument("--nemeses", default=",".join(NEMESES))
    run.add_argument("--results", type=Path, default=RESULTS)
    run.add_argument("--workdir", type=Path, default=RESULTS.parent / "runs")
    run.add_argument("--budget", type=float, default=24 * 60.0, help="minutes")
    run.add_argument("--again", action="store_true", help="forget these cells' runs first")
    show = sub.add_parser("render", help="write the matrix section of the document")
    show.add_argument("--results", type=Path, default=RESULTS)
    show.add_argument("--doc", type=Path, default=DOC)
    show.add_argument("--backends", default=",".join(BACKENDS))
    show.add_argument("--nemeses", default=",".join(NEMESES))
    show.add_argument(
        "--pending",
        action="append",
        default=[],
        metavar="BACKEND:NEMESIS=REASON",
        help="a cell left out of the document for now, and why",
    )
    args = parser.parse_args()
    backends, nemeses = args.backends.split(","), args.nemeses.split(",")
    if args.action == "run":
        if args.again and args.results.exists():
            dropped = forget(args.results, backends, nemeses)
            print(f"forgot {dropped} runs", file=sys.stderr)
        run_all(backends, nemeses, args.results, args.workdir, args.budget * 60)
        return
    section = render(read_runs(args.results), backends, nemeses, _pending(args.pending))
    args.doc.write_text(splice(args.doc.read_text(), section))


if __name__ == "__main__":
    main()
