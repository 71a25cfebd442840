"""Every backend under every nemesis: ``fencelock check``'s verdict and the longest time
two clients both believed they held the lock, as the Markdown table docs/safety.md shows.

    python bench/check_matrix.py [--backends sqlite,redis,...] [--nemeses pause,...] > matrix.md

One run per cell (10 s, TTL 1 s, ``--work 0.2``, seed 1, 8 clients, fenced; partition:
TTL 0.5 s, ``--work 0.4``, 4 clients). A refused cell shows why (exit 64).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.cli import add_backends, parser

BACKENDS = ("sqlite", "redis", "redlock", "etcd", "zookeeper", "postgresql", "advisory", "mysql")
NEMESES = ("pause", "kill", "server", "session", "restart", "clock", "partition")
FENCELOCK = str(Path(sys.executable).parent / "fencelock")


def arguments(backend: str, nemesis: str, tmp: Path) -> list[str]:
    sqlite = ["--url", f"sqlite:///{tmp / 'locks.db'}"]
    where = sqlite if backend == "sqlite" else ["--servers", backend]
    timing = ["--duration", "10", "--seed", "1"]
    if nemesis == "partition":
        timing += ["--ttl", "0.5", "--work", "0.4", "--clients", "4"]
    else:
        timing += ["--ttl", "1", "--work", "0.2"]
    return [*where, "--nemesis", nemesis, *timing]


def cell(backend: str, nemesis: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        args = arguments(backend, nemesis, Path(tmp))
        done = subprocess.run(  # noqa: S603 (an argument list built here, no shell)
            [FENCELOCK, "check", *args, "--json"],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    if done.returncode == 64:
        return "n/a"
    if not done.stdout.strip().startswith("{"):
        return f"exit {done.returncode}"
    doc = json.loads(done.stdout)
    result = doc["result"]
    verdict = "PASS" if doc["ok"] else "**FAIL**"
    longest = result["longest_overlap_seconds"]
    return f"{verdict}, {longest:.2f} s"


def main() -> None:
    made = parser(__doc__, "one backend (sqlite) under one nemesis (pause)")
    add_backends(made, BACKENDS)
    made.add_argument("--nemeses", default=",".join(NEMESES))
    args = made.parse_args()
    if args.quick:
        args.backends, args.nemeses = "sqlite", "pause"
    backends = args.backends.split(",")
    nemeses = args.nemeses.split(",")
    print("| nemesis | " + " | ".join(backends) + " |")
    print("|---" * (len(backends) + 1) + "|")
    for nemesis in nemeses:
        cells = [cell(backend, nemesis) for backend in backends]
        print(f"| {nemesis} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
