"""Chaos tests: fault injection against real servers and processes, and the report they produce."""
