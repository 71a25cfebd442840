"""The safety matrix's pure part: run arguments, summaries, seeds still needed, Markdown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fencelock.check.matrix import (
    BEGIN,
    DASH,
    END,
    MAX_SEEDS,
    TIMES,
    Column,
    Run,
    arguments,
    cells,
    command,
    render,
    splice,
    summarize,
)


def _doc(*, ok: bool, faults: int, lost: int = 0, longest: float = 0.0) -> str:
    return json.dumps(
        {
            "ok": ok,
            "result": {
                "overlap_count": 2 if longest else 0,
                "longest_overlap_seconds": longest,
                "token_violations": [] if ok else [{}],
                "invariant": {"lost_updates": lost},
            },
            "counts": {
                "faults": faults,
                "stale_writes": 3,
                "leases_lost": 1,
                "accepted_writes": 40,
                "errors": 0,
            },
        }
    )


def _run(seed: int, fenced: bool, faults: int, **more: object) -> Run:
    values: dict[str, object] = {"code": 0, "verdict": "PASS", "faults": faults, **more}
    return Run(backend="mysql", nemesis="partition-restart", seed=seed, fenced=fenced, **values)  # type: ignore[arg-type]


def test_arguments_name_the_backend_the_nemesis_its_settings_and_the_fencing(
    tmp_path: Path,
) -> None:
    args = arguments("mysql", "partition-restart", 3, False, tmp_path)
    assert args[:6] == ["--servers", "mysql", "--nemesis", "partition-restart", "--seed", "3"]
    assert args[args.index("--ttl") + 1] == "2"
    assert "--no-fencing" in args
    assert "--json" in args
    sqlite = arguments("sqlite", "pause", 1, True, tmp_path)
    assert sqlite[:2] == ["--url", f"sqlite:///{tmp_path / 'locks.db'}"]
    assert "--no-fencing" not in sqlite
    assert command("redis", "partition").startswith("fencelock check --servers redis --nemesis")


def test_a_summary_reads_the_verdict_and_counts_and_a_crash_gives_none() -> None:
    run = summarize(
        "redis", "pause", 1, False, 1, _doc(ok=False, faults=4, lost=3, longest=0.5), ""
    )
    assert (run.verdict, run.faults, run.lost, run.longest, run.token_violations) == (
        "FAIL", 4, 3, 0.5, 1,
    )  # fmt: skip
    assert run.checked
    crash = summarize("redis", "pause", 1, True, 1, "", "Traceback ...\nNameError: x\n")
    assert not crash.checked
    assert crash.why == "NameError: x"
    refused = summarize("sqlite", "server", 1, True, 64, "", "fencelock: needs servers\n")
    assert refused.refused
    assert not refused.checked
    assert Run.from_json(run.to_json()) == run


def test_a_column_runs_two_seeds_then_more_until_five_faults_at_most_four() -> None:
    column = Column()
    assert column.next_seed() == 1
    column.runs.append(_run(1, True, 9))
    assert column.next_seed() == 2, "one seed is never enough"
    column.runs.append(_run(2, True, 1))
    assert column.next_seed() is None
    few = Column([_run(1, True, 1), _run(2, True, 1)])
    assert few.next_seed() == 3
    few.runs += [_run(3, True, 1), _run(4, True, 1)]
    assert len(few.runs) == MAX_SEEDS
    assert few.next_seed() is None
    broken = Column(
        [Run(backend="mysql", nemesis="kill", seed=1, fenced=True, code=-1, why="timeout")]
    )
    assert broken.next_seed() == 2, "a run without a verdict is a seed tried"
    refused = Column(
        [Run(backend="sqlite", nemesis="server", seed=1, fenced=True, code=64, why="needs servers")]
    )
    assert refused.next_seed() is None


def test_the_matrix_shows_overlap_and_lost_updates_and_says_what_was_not_run() -> None:
    runs = [
        _run(1, True, 3, longest=0.8, rejected=2),
        _run(2, True, 3, longest=1.2),
        _run(1, False, 3, verdict="FAIL", code=1, lost=2, longest=1.1),
        _run(2, False, 2, verdict="FAIL", code=1, lost=1, longest=0.9),
        Run(
            backend="sqlite",
            nemesis="partition-restart",
            seed=1,
            fenced=True,
            code=64,
            why="needs servers",
        ),
        Run(
            backend="sqlite",
            nemesis="partition-restart",
            seed=1,
            fenced=False,
            code=64,
            why="needs servers",
        ),
    ]
    text = render(
        runs,
        backends=["sqlite", "redis", "mysql", "advisory"],
        nemeses=["partition-restart"],
        pending={("advisory", "partition-restart"): "a fix in progress"},
    )
    grid = next(line for line in text.splitlines() if line.startswith("| partition-restart"))
    assert grid.split(" | ")[1:] == ["n/a", "not run", "1.20 s; lost 0/3", "pending |"]
    detail = next(line for line in text.splitlines() if line.startswith("| mysql |"))
    row = f"| 1{DASH}2 | 6 / 5 | 1.20 / 1.10 s | 0 / 3 | 2 | PASS {TIMES}2 / **FAIL** 2/2 |"
    assert row in detail
    assert f"sqlite {TIMES} partition-restart: needs servers" in text
    assert "pending: a fix in progress" in text
    assert cells(runs)[("mysql", "partition-restart")].run


def test_a_fenced_loss_is_bold_and_a_column_short_of_faults_says_so() -> None:
    runs = [
        _run(1, True, 3, verdict="FAIL", code=1, lost=1),
        _run(2, True, 3),
        _run(1, False, 1),
        _run(2, False, 1),
    ]
    text = render(runs, backends=["mysql"], nemeses=["partition-restart"])
    assert "| partition-restart | 0.00 s; lost **1**/0 (only 2 faults) |" in text


def test_splice_replaces_only_what_lies_between_the_markers() -> None:
    doc = f"intro\n{BEGIN}\nold table\n{END}\noutro\n"
    assert splice(doc, "new table") == f"intro\n{BEGIN}\nnew table\n{END}\noutro\n"
    with pytest.raises(ValueError, match="markers"):
        splice("no markers here", "new table")
