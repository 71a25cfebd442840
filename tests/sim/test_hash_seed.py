"""A run's trace is decided by its seed alone: not by ``PYTHONHASHSEED`` (a set's order,
or its repr in the trace, follows it), so the same seed in two processes with different
hash seeds gives the same trace digest, for every family and workload."""

from __future__ import annotations

import json
import os
import subprocess
import sys

DIGESTS = """
import json
from fencelock.sim.workloads import WORKLOADS
from fencelock.sim.world import FAMILIES, ON_REDIS, OUTLIVING, Plan, missing_for_redis, run

lacking = missing_for_redis() is not None
digests = {}
for family in FAMILIES:
    if lacking and family in ON_REDIS:
        continue
    for workload in sorted(WORKLOADS):
        if workload in OUTLIVING and family == "session":
            continue
        # the real Redlock backend (five nodes of Redis, in RESP) costs the most: shorter
        seconds = 0.5 if family == "redlock" else 1.0
        plan = Plan(seed=0, duration=seconds, family=family, workload=workload)
        digests[f"{family}/{workload}"] = run(plan).digest
    calm = Plan(seed=0, duration=1.0, family=family, workload="lock", cancels=False)
    digests[f"{family}/lock/no-cancels"] = run(calm).digest
print(json.dumps(digests))
"""


def _digests(started: subprocess.Popen[str]) -> dict[str, str]:
    out, err = started.communicate(timeout=300)
    assert started.returncode == 0, err
    digests: dict[str, str] = json.loads(out.strip().splitlines()[-1])
    return digests


def test_the_hash_seed_changes_no_trace() -> None:
    started = [
        subprocess.Popen(
            [sys.executable, "-c", DIGESTS],
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for hash_seed in ("0", "12345")
    ]
    one, other = (_digests(each) for each in started)
    assert len(one) >= 30  # every family and workload a run pairs (less the Redis two)
    differ = sorted(pair for pair in one if one[pair] != other.get(pair))
    assert not differ, f"traces that follow PYTHONHASHSEED: {differ}"
