"""What this process's locks did: the five operational metrics and their neighbours,
by lock-name prefix, in a registry with no dependency (:data:`REGISTRY`).

``fencelock.metrics.snapshot()`` copies them; ``configure(depth=, patterns=)`` says how
names become labels; :mod:`fencelock.metrics.exposition` writes them in Prometheus's
text format (``serve(port)`` answers scrapes), and the optional exporters hand them to
``prometheus_client`` (:mod:`.prometheus`) or the OpenTelemetry API (:mod:`.otel`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from fencelock import forking
from fencelock.metrics.registry import PrefixMetrics, Registry

if TYPE_CHECKING:
    from http.server import HTTPServer

REGISTRY = Registry()
forking.register(REGISTRY)

__all__ = ["REGISTRY", "PrefixMetrics", "configure", "reset", "serve", "snapshot"]


def snapshot() -> dict[str, PrefixMetrics]:
    """Every prefix's metrics now, by label (a copy)."""
    return REGISTRY.snapshot()


def configure(depth: int = 1, patterns: Iterable[str] = (), enabled: bool = True) -> None:
    """Label names by their first ``depth`` parts (or the longest of ``patterns`` they
    start with); ``enabled=False`` records nothing."""
    REGISTRY.configure(depth, patterns, enabled)


def reset() -> None:
    """Forget everything recorded so far."""
    REGISTRY.reset()


def serve(port: int = 0, host: str = "127.0.0.1") -> HTTPServer:
    """Answer Prometheus scrapes of this process's metrics at ``http://host:port/metrics``
    (``port=0``: a free one, in the returned server's ``server_port``)."""
    from fencelock.metrics import scrapes

    return scrapes.serve(REGISTRY, port, host)
