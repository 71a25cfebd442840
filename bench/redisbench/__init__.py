"""The Redis benchmark, one module per scenario on bench/harness.py; run bench/redis_bench.py."""
