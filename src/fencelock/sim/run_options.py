"""The options both simulator commands take (``python -m fencelock.sim`` and
``python -m fencelock.sim.sqlite_host``): which runs, for how long, with what put back."""

from __future__ import annotations

import argparse

from fencelock.sim.bugs import KNOWN


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """``--seed``/``--first-seed``/``--cpu`` (one run, or a search), the runs' clients,
    duration and TTL, and ``--bug``."""
    parser.add_argument("--seed", type=int, help="replay this one run, trace included")
    parser.add_argument("--first-seed", type=int, default=0, help="where a search starts")
    parser.add_argument("--cpu", type=float, default=10.0, help="CPU seconds a search may use")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--duration", type=float, default=30.0, help="virtual seconds a run")
    parser.add_argument("--ttl", type=float, default=1.0)
    parser.add_argument(
        "--bug", action="append", default=[], choices=sorted(KNOWN), help="put a bug back"
    )
