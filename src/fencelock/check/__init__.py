"""The safety harness behind ``fencelock check``: history, workloads, nemeses, checker, report."""
