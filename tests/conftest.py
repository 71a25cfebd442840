"""Every test's failure report shows what its throwaway servers logged meanwhile."""

pytest_plugins = ["fencelock.testing.pytest_plugin"]
