"""OpenTelemetry spans for lock waits (``pip install 'fencelock[otel]'``: the API only).

After :func:`instrument`, every acquire is a ``fencelock.acquire`` span in the caller's
trace (a child of whatever span is current): the lock's name, its timeout, how it ended
(``granted``, ``timed_out`` or ``error``), how many tries it took and, once granted, the
lease's fencing token and TTL. A lease lost later is a ``fencelock.lease.lost`` span,
linked to its acquire's span, with the reason. So a slow request shows the lock wait in
the application's own traces. Until :func:`instrument` is called nothing here touches
OpenTelemetry: the acquire path pays one check of a module variable.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from fencelock.errors import ConfigError, LockTimeout

if TYPE_CHECKING:
    from fencelock.lease import LeaseBase


class _Instrumented:
    tracer: Any = None  # an OpenTelemetry Tracer once instrument() is called


_INSTRUMENTED = _Instrumented()


def instrument(tracer_provider: Any = None) -> None:
    """Record a span for every acquire from now on, through ``tracer_provider`` (default:
    OpenTelemetry's global one, as the application's SDK set it up)."""
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise ConfigError(
            "fencelock.tracing needs the OpenTelemetry API: pip install 'fencelock[otel]'"
        ) from exc
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours: str | None = version("fencelock")
    except PackageNotFoundError:  # run from a source tree
        ours = None
    _INSTRUMENTED.tracer = trace.get_tracer("fencelock", ours, tracer_provider=tracer_provider)


def uninstrument() -> None:
    """Stop recording spans."""
    _INSTRUMENTED.tracer = None


class _Acquiring:
    """The span of one acquire, told how it ended."""

    def __init__(self, span: Any) -> None:
        self._span = span

    def granted(self, lease: LeaseBase) -> None:
        self._span.set_attribute("fencelock.outcome", "granted")
        self._span.set_attribute("fencelock.lease.token", lease.token)
        self._span.set_attribute("fencelock.lease.ttl", lease.ttl)
        self._span.set_attribute("fencelock.acquire.attempts", lease.attempts)
        context = self._span.get_span_context()
        lease.on_lost(lambda lost: _record_loss(lost, context))


class _NotTraced:
    """The acquire's context when nothing is traced: enters and leaves at no cost."""

    def __enter__(self) -> _NotTraced:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def granted(self, lease: LeaseBase) -> None:
        return None


_NOT_TRACED = _NotTraced()

Traced = _Acquiring | _NotTraced
"""What :func:`acquiring` gives the acquire it is around."""


def acquiring(name: str, timeout: float | None, backend: str) -> AbstractContextManager[Traced]:
    """Around one acquire: its span (if :func:`instrument` was called), current while
    it runs; ended with the outcome, or with the error that ended the acquire."""
    tracer = _INSTRUMENTED.tracer
    if tracer is None:
        return _NOT_TRACED
    return _traced(tracer, name, timeout, backend)


@contextmanager
def _traced(tracer: Any, name: str, timeout: float | None, backend: str) -> Iterator[_Acquiring]:
    from opentelemetry.trace import Status, StatusCode

    attributes: dict[str, Any] = {"fencelock.lock.name": name, "fencelock.backend": backend}
    if timeout is not None:
        attributes["fencelock.acquire.timeout"] = timeout
    with tracer.start_as_current_span(
        "fencelock.acquire", attributes=attributes, record_exception=False
    ) as span:
        try:
            yield _Acquiring(span)
        except LockTimeout as exc:
            span.set_attribute("fencelock.outcome", "timed_out")
            span.set_status(Status(StatusCode.ERROR, str(exc)))
            raise
        except BaseException as exc:
            span.set_attribute("fencelock.outcome", "error")
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            raise


def _record_loss(lease: LeaseBase, acquired: Any) -> None:
    tracer = _INSTRUMENTED.tracer
    if tracer is None:
        return
    from opentelemetry.trace import Link

    attributes = {
        "fencelock.lock.name": lease.name,
        "fencelock.lease.token": lease.token,
        "fencelock.lease.lost_reason": lease.lost_reason or "",
    }
    span = tracer.start_span("fencelock.lease.lost", links=[Link(acquired)], attributes=attributes)
    span.end()
