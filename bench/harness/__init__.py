"""What every benchmark shares, one job a module.

- :mod:`harness.cli`: the command-line options spelled the same way everywhere;
- :mod:`harness.servers`: the servers, started in a temporary directory and stopped;
- :mod:`harness.peers`: which peer libraries import here, and their versions;
- :mod:`harness.lockers`: fencelock's lock and a peer's, as cycles and contended lockers;
- :mod:`harness.rounds`: a cycle timed (wall and CPU), contenders in interleaved rounds;
- :mod:`harness.workers`: N spawned processes contending for one lock;
- :mod:`harness.sides`: one library's client in a worker (fencelock's, each backend's peers);
- :mod:`harness.fleet`: P client processes in interleaved rounds, the server's CPU a round;
- :mod:`harness.stats`: percentiles, fairness, ratios, a contended run's summary;
- :mod:`harness.tables`: number formats, tables from columns, targets;
- :mod:`harness.results`: the JSON and Markdown result files, noise warnings.
"""
