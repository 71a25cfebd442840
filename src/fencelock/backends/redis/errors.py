"""The one place where a Redis failure becomes fencelock's error, naming the server.

Both the redis-py backends (from its exceptions) and the Redlock nodes (from error
replies and socket failures) word their errors here, so a URL fails the same way on both.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterator

from redis.exceptions import RedisError

from fencelock.aio import TIMEOUTS
from fencelock.backends.redis.options import RedisOptions
from fencelock.backends.redis.scripts import KEY_PREFIX
from fencelock.errors import BackendUnavailable

DRIVER_ERRORS = (RedisError, OSError)


class SlotMoved(BackendUnavailable):
    """A Redis Cluster node does not serve the lock's slot (``MOVED``): nothing was done,
    and ``address`` is the node that does."""

    def __init__(self, message: str, address: tuple[str, int]) -> None:
        super().__init__(message)
        self.address = address


def translate(exc: BaseException, where: str, tls: bool = False) -> BackendUnavailable:
    """redis-py's exception as fencelock's, naming the server (``tls``: spoken over TLS)."""
    import redis.exceptions as rex

    failed_tls = tls_failure(where, exc, tls)
    if failed_tls is not None:
        return failed_tls
    if isinstance(exc, rex.AuthenticationError):
        return refused_credentials(where, str(exc))
    if isinstance(exc, rex.MovedError):
        return SlotMoved(
            f"{where} is a Redis Cluster node that does not own this lock's slot (MOVED {exc}); "
            "use redis+cluster:// (or connect to the node that owns it)",
            (exc.host, int(exc.port)),
        )
    if isinstance(exc, rex.AskError | rex.TryAgainError):
        return BackendUnavailable(
            f"{where}: this lock's slot is moving to another Redis Cluster node ({exc}); "
            "try again once it has moved"
        )
    if isinstance(exc, rex.NoPermissionError):
        return BackendUnavailable(f"{where} denied the command to this user (ACL): {exc}")
    if isinstance(exc, rex.ResponseError):
        text = str(exc)
        if text.startswith(("WRONGPASS", "NOAUTH", "NOPERM")) or _no_password_given(text):
            return refused_credentials(where, text)
        return BackendUnavailable(f"{where} failed: {text}")
    if isinstance(exc, (rex.TimeoutError, *TIMEOUTS)):
        return BackendUnavailable(f"{where} did not answer in time: {exc}")
    if isinstance(exc, (rex.ConnectionError, OSError)):
        return BackendUnavailable(f"cannot reach {where}: {exc}")
    return BackendUnavailable(f"{where} failed: {exc}")


# What a server that requires a password says to a client that gave none: redis-py >= 6
# opens with HELLO, older versions with the first command, which a script call can be
# (too long for an unauthenticated client: "Protocol error: unauthenticated ...").
_NO_PASSWORD_GIVEN = (
    "NOAUTH",
    "Authentication required",
    "HELLO must be called with the client",
    "Protocol error: unauthenticated",
)


def _no_password_given(text: str) -> bool:
    return any(words in text for words in _NO_PASSWORD_GIVEN)


def refused_credentials(where: str, text: str) -> BackendUnavailable:
    """The error for a server's refusal ``text`` of a connection's credentials."""
    if _no_password_given(text):
        return BackendUnavailable(
            f"{where} requires authentication and the URL gives no password: "
            "redis://[user]:password@host:port/db (percent-encoded)"
        )
    return BackendUnavailable(f"{where} refused the credentials: {text}")


_PLAINTEXT_HINT = "is it a plaintext port? then leave TLS off: redis:// or redlock://"
_HOST_NAME_MISMATCH = (62, 64)  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH


def tls_failure(where: str, exc: BaseException, tls: bool) -> BackendUnavailable | None:
    """The error for a TLS connection that could not be set up, or None if ``exc`` is not one.

    Host name and certificate verification, a failed handshake, and a handshake that got
    no answer (what a plaintext server gives: it waits for a command that never ends).
    """
    for link in _causes(exc):
        if isinstance(link, ssl.SSLCertVerificationError):
            if link.verify_code in _HOST_NAME_MISMATCH:
                return BackendUnavailable(
                    f"cannot reach {where}: TLS host name verification failed: "
                    f"{link.verify_message}; connect by a name the certificate was issued for"
                )
            return BackendUnavailable(
                f"cannot reach {where}: TLS certificate verification failed: {link}"
            )
        if isinstance(link, ssl.SSLError):
            return BackendUnavailable(f"cannot reach {where}: TLS handshake failed: {link}")
        if isinstance(link, TimeoutError) and "handshake" in str(link):
            return BackendUnavailable(
                f"cannot reach {where}: TLS handshake failed: no TLS answer in time "
                f"({_PLAINTEXT_HINT})"
            )
    import redis.exceptions as rex

    if tls and isinstance(exc, (rex.TimeoutError, *TIMEOUTS)) and "connecting" in str(exc):
        return tls_not_connected(where, "in time")
    return None


def tls_not_connected(where: str, within: str) -> BackendUnavailable:
    """No TLS connection ``within`` a time: TCP connect and handshake, not told apart."""
    return BackendUnavailable(
        f"cannot reach {where}: TLS handshake failed or no connection {within} ({_PLAINTEXT_HINT})"
    )


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


def unanswered(error: BaseException) -> bool:
    """True if ``error`` is a request that timed out: the server may have run it anyway."""
    import redis.exceptions as rex

    cause = error.__cause__
    return isinstance(cause, (rex.TimeoutError, *TIMEOUTS))


@contextlib.contextmanager
def translated(where: str, tls: bool = False) -> Iterator[None]:
    """Turn redis-py's exceptions into fencelock's, naming the server."""
    try:
        yield
    except DRIVER_ERRORS as exc:
        raise translate(exc, where, tls) from exc


def not_replicated(options: RedisOptions, acked: int) -> BackendUnavailable:
    return BackendUnavailable(
        f"{options.where}: only {acked} of {options.wait_replicas} replicas acknowledged the "
        f"lock within {options.wait_timeout_ms} ms; not taking it (wait_replicas)"
    )


def subscription_refused(exc: BaseException, where: str) -> BackendUnavailable:
    """The error for a wake-up subscription the server refused, with the ACL fix."""
    error = translate(exc, where)
    if "ACL" in str(error):
        return BackendUnavailable(
            f"{error}; a waiter needs the channel permission &{KEY_PREFIX}wake:* "
            "(ACL SETUSER <user> &fencelock:wake:*)"
        )
    return error


@contextlib.contextmanager
def subscribing(where: str) -> Iterator[None]:
    """Like ``translated``, for the SUBSCRIBE call itself."""
    try:
        yield
    except DRIVER_ERRORS as exc:
        raise subscription_refused(exc, where) from exc


def refused(where: str, text: str) -> BackendUnavailable:
    """The error for an error reply ``text`` from the node at ``where``."""
    credentials = ("WRONGPASS", "NOAUTH", "invalid password", "ERR invalid password")
    if text.startswith(credentials) or "Protocol error: unauthenticated" in text:
        return refused_credentials(where, text)
    if text.startswith("NOPERM"):
        return BackendUnavailable(f"{where} denied the command to this user (ACL): {text}")
    return BackendUnavailable(f"{where} failed: {text}")


def unreachable(where: str, exc: BaseException) -> BackendUnavailable:
    """The error for a connection that could not be made (or set up) to ``where``."""
    error = tls_failure(where, exc, tls=False) or BackendUnavailable(f"cannot reach {where}: {exc}")
    error.__cause__ = exc  # as `raise ... from exc` would: the driver's error stays visible
    return error


def not_connected(where: str, seconds: float, tls: bool) -> BackendUnavailable:
    """The error for a connection (and TLS handshake) not made within ``seconds``."""
    if tls:
        return tls_not_connected(where, f"within {seconds:g}s")
    return BackendUnavailable(f"cannot reach {where}: no connection within {seconds:g}s")
