"""What every benchmark shares, one job a module.

- :mod:`harness.cli`: the command-line options spelled the same way everywhere;
- :mod:`harness.servers`: the servers, started in a temporary directory and stopped;
- :mod:`harness.peers`: which peer libraries import here, and their versions;
- :mod:`harness.lockers`: fencelock's lock and a peer's, as cycles and contended lockers;
- :mod:`harness.rounds`: a cycle timed (wall and CPU), contenders in interleaved rounds;
- :mod:`harness.workers`: N spawned processes contending for one lock;
- :mod:`harness.stats`: percentiles, fairness, ratios, a contended run's summary;
- :mod:`harness.tables`: number formats, tables from columns, targets;
- :mod:`harness.results`: the JSON and Markdown result files, noise warnings.
"""

# the flat names the scripts not yet moved to the modules import (removed once none does)
from harness.results import RESULTS_DIR, clean_json  # noqa: F401
from harness.stats import Summary, jain, summarise, summary_ms  # noqa: F401
from harness.tables import fmt_ms, fmt_number, new_table, table_markdown  # noqa: F401
from harness.workers import (  # noqa: F401
    ACQUIRE_TIMEOUT,
    MAX_SECTIONS_PER_WORKER,
    MAX_WORKER_ERRORS,
    READY_TIMEOUT,
    Channels,
    Locker,
    WorkerReport,
    collect,
    one_section,
    run_contended,
    stop,
    wait_ready,
)


def run_for(cycle, seconds, batch, limit):  # type: ignore[no-untyped-def]
    from harness.rounds import timed

    sample = timed(cycle, seconds, batch, limit)
    return sample.cycles, sample.wall
