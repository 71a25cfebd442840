"""``@fencelock.once(name, at_most=..., at_least=...)``: a job that runs on one node only.

The run takes ``name`` without waiting (a busy name means another node runs the job:
this call is skipped) as a lease of ``at_most`` seconds that is never renewed. When the
job ends, the name is released, or, if the job took less than ``at_least``, left on the
server to end ``at_least`` after the start (:meth:`Lease.expire_in`), with the server's
own clock where the backend has one.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Literal, TypeVar, cast

from fencelock import clock
from fencelock.backends.base import AsyncBackend, Backend, leaves_names_taken
from fencelock.client import AsyncClient, Client, aconnect, connect
from fencelock.engine.names import validate_name
from fencelock.engine.once import OnceTerms, once_terms
from fencelock.errors import ConfigError, LeaseLost, Skipped
from fencelock.lease import AsyncLease, Lease, LeaseBase
from fencelock.log import log

F = TypeVar("F", bound=Callable[..., Any])
OnSkip = Literal["return", "raise"]


class _Skip:
    """What a skipped call returns (``on_skip="return"``): falsy, and says what it is."""

    _instance: _Skip | None = None

    def __new__(cls) -> _Skip:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "fencelock.SKIPPED"

    def __bool__(self) -> bool:
        return False


SKIPPED: Any = _Skip()
"""What :func:`once` returns when another run holds the job's name (``on_skip="return"``):
falsy, one object, compare with ``is``."""


def _skipped(name: str, on_skip: OnSkip) -> Any:
    if on_skip == "raise":
        raise Skipped(f"run-once job {name!r} skipped: another run holds its name")
    return SKIPPED


def _overran(lease: LeaseBase, terms: OnceTerms, elapsed: float) -> None:
    log.warning(
        "fencelock: run-once job %r (token %d) ran %.3fs, longer than at_most=%gs: its "
        "lease had ended, and another node may have started it meanwhile",
        lease.name,
        lease.token,
        elapsed,
        terms.at_most,
    )


def _finish(lease: Lease, terms: OnceTerms, elapsed: float) -> None:
    keep = terms.keep_for(elapsed)
    try:
        if keep is None:
            lease.release()
        else:
            lease.expire_in(keep)
    except LeaseLost:
        _overran(lease, terms, elapsed)


async def _afinish(lease: AsyncLease, terms: OnceTerms, elapsed: float) -> None:
    keep = terms.keep_for(elapsed)
    try:
        if keep is None:
            await lease.release()
        else:
            await lease.expire_in(keep)
    except LeaseLost:
        _overran(lease, terms, elapsed)


def _refuse_at_least_where_names_end_with_the_client(
    can_keep: bool, terms: OnceTerms, url: str
) -> None:
    if terms.at_least > 0 and not can_keep:
        raise ConfigError(
            f"at_least needs a lease that outlives its client, and on "
            f"{url.split('://', 1)[0]}:// a lease ends with the client's session or "
            "connection (see docs/primitives.md); use at_least=0 there"
        )


# Where a lease ends with its client's session or connection, at_most is kept by a
# renewed lease of this TTL that stops being renewed at at_most (max_hold): a session
# as long as at_most (600 s, say) is more than ZooKeeper's servers grant.
SESSION_TTL = 10.0


def _at_most(backend: Backend | AsyncBackend, terms: OnceTerms) -> dict[str, Any]:
    """The lock's settings for ``at_most``: a lease of that TTL, not renewed; where a
    lease ends with its client, a renewed one held at most that long."""
    if backend.outlives_client(False) or terms.at_most <= SESSION_TTL:
        return {"ttl": terms.at_most, "renew": False}
    return {"ttl": SESSION_TTL, "renew": True, "max_hold": terms.at_most}


def run_once(client: Client, name: str, terms: OnceTerms, call: Callable[[], Any]) -> Any:
    """Run ``call`` if ``name`` is free; :data:`SKIPPED` (returned) if not."""
    _refuse_at_least_where_names_end_with_the_client(
        leaves_names_taken(client.internals.backend, False), terms, client.url
    )
    lease = client.lock(name, **_at_most(client.internals.backend, terms)).try_acquire()
    if lease is None:
        return SKIPPED
    started = clock.now()
    try:
        return call()
    finally:
        _finish(lease, terms, clock.now() - started)


async def arun_once(
    client: AsyncClient, name: str, terms: OnceTerms, call: Callable[[], Awaitable[Any]]
) -> Any:
    """Await ``call()`` if ``name`` is free; as :func:`run_once`."""
    _refuse_at_least_where_names_end_with_the_client(
        leaves_names_taken(client.internals.backend, False), terms, client.url
    )
    lease = await client.lock(name, **_at_most(client.internals.backend, terms)).try_acquire()
    if lease is None:
        return SKIPPED
    started = clock.now()
    try:
        return await call()
    finally:
        await _afinish(lease, terms, clock.now() - started)


@contextlib.contextmanager
def _sync_client(url: str | None, client: Client | None) -> Iterator[Client]:
    if client is not None:
        yield client
        return
    with connect(url) as made:
        yield made


@contextlib.asynccontextmanager
async def _async_client(url: str | None, client: AsyncClient | None) -> AsyncIterator[AsyncClient]:
    if client is not None:
        yield client
        return
    async with aconnect(url) as made:
        yield made


def once(
    name: str,
    *,
    at_most: float,
    at_least: float = 0.0,
    url: str | None = None,
    client: Client | AsyncClient | None = None,
    on_skip: OnSkip = "return",
) -> Callable[[F], F]:
    """Decorate a function or coroutine function so that each call runs on one node only.

    A call whose name is held by another run is skipped: it returns
    :data:`fencelock.SKIPPED` (falsy), or raises :class:`Skipped` with
    ``on_skip="raise"``. ``at_most``: the lease's TTL, not renewed (the net if a node
    dies); ``at_least``: the name stays taken this long from the start even when the job
    ends sooner. ``client``: a :class:`Client` (for functions) or :class:`AsyncClient`
    (coroutine functions) to use; else each call connects to ``url`` (default
    :func:`fencelock.default_url`) and closes after.
    """
    name = validate_name(name)
    terms = once_terms(at_most, at_least)
    if on_skip not in ("return", "raise"):
        raise ConfigError(f"on_skip must be 'return' or 'raise', not {on_skip!r}")

    def decorate(fn: F) -> F:
        if inspect.iscoroutinefunction(fn):
            if isinstance(client, Client):
                raise ConfigError(f"once({name!r}): a coroutine function needs an AsyncClient")
            aclient = client

            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                async with _async_client(url, aclient) as using:
                    result = await arun_once(using, name, terms, lambda: fn(*args, **kwargs))
                return _skipped(name, on_skip) if result is SKIPPED else result

            return cast(F, run_async)

        if isinstance(client, AsyncClient):
            raise ConfigError(f"once({name!r}): a plain function needs a Client")
        sclient = client

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            with _sync_client(url, sclient) as using:
                result = run_once(using, name, terms, lambda: fn(*args, **kwargs))
            return _skipped(name, on_skip) if result is SKIPPED else result

        return cast(F, run)

    return decorate
