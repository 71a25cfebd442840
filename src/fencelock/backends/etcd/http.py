"""ConversationState to etcd's JSON gateway: endpoints in turn, credentials, errors.

The one place where a connection or etcd failure becomes a fencelock error. A request
moves on to the next endpoint when it was never sent (the connection failed) or the
member said it has no leader; a request whose answer was lost is not sent again here
(its outcome is unknown: the caller decides), unless the caller says it may be: a
``patient`` call (a keepalive, a read) that a member leaves unanswered that long is
sent to the next member at once, so a paused or partitioned member in use does not
hold a lease's renewal past its safe time.

Until an endpoint has answered once, a request waits for its answer no longer than
the URL's connect timeout (``aconnect()``'s :meth:`Gateway.check_version`, or a blocking
client's first call): a server that takes the connection and never answers is
unreachable then, not one request timeout later.
"""

from __future__ import annotations

import asyncio
import json
import random
import ssl
from collections.abc import AsyncIterator
from typing import Any

from fencelock import blocking_call, clock
from fencelock.aio import TIMEOUTS
from fencelock.backends.etcd.gateway import Body, Reply
from fencelock.backends.etcd.options import EtcdOptions
from fencelock.backends.etcd.wire import NotSent, Unanswered, Wire
from fencelock.engine.backoff import Backoff
from fencelock.errors import BackendUnavailable, ConfigError, FencelockError

# gRPC status codes etcd puts in its error replies
UNAVAILABLE, UNAUTHENTICATED, INVALID_ARGUMENT, FAILED_PRECONDITION = 14, 16, 3, 9
_TRANSIENT = ("no leader", "leader changed", "timed out", "too many requests")
MIN_VERSION = (3, 4)
# A request etcd refused for a passing reason (no leader yet) is sent again after these.
TRANSIENT_RETRY = Backoff(0.05, 0.5, spread=0.5)


class EtcdRefused(FencelockError):
    """etcd answered the request with an error (``code``, ``message``)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class LeaseNotFound(EtcdRefused):
    """The etcd lease named in the request expired or was revoked."""


class Gateway:
    """One wire over all of a URL's endpoints; the current one is used first."""

    def __init__(self, options: EtcdOptions, shown_url: str) -> None:
        self.options, self._shown = options, shown_url
        self._current = 0
        self._token: str | None = None
        self._connections: Wire | None = None
        self._answered = False  # some endpoint has answered a request

    def _wire(self) -> Wire:
        if self._connections is None:
            self._connections = Wire(
                self.options.endpoints, self.options.ssl_context(), self.options.connect_timeout
            )
        return self._connections

    async def close(self) -> None:
        if self._connections is not None:
            self._connections.close()

    def forget(self) -> None:
        """In a forked child: the parent's connections are not ours to use or close."""
        if self._connections is not None:
            self._connections.forget()
        self._token = None

    async def check_version(self) -> None:
        """Raise unless some endpoint answers within the connect timeout and serves the
        v3 API (etcd 3.4 or later); an endpoint silent that long is given up for the next."""
        reply = await self._send("GET", "/version", None, patience=self.options.connect_timeout)
        text = str(reply.get("etcdserver", ""))
        try:
            version = tuple(int(part) for part in text.split(".")[:2])
        except ValueError:
            version = ()
        if version < MIN_VERSION:
            raise ConfigError(
                f"{self._shown}: etcd {text or '(unknown version)'} does not serve the v3 JSON "
                f"API fencelock uses; it needs etcd {'.'.join(map(str, MIN_VERSION))} or later"
            )

    async def call(self, path: str, body: Body, patience: float | None = None) -> Reply:
        """POST ``body`` to ``/v3/<path>``; the reply, or a fencelock error. With
        ``patience`` (seconds; only for a request that may be sent twice), a member that
        has not answered in that long is given up for the next one."""
        deadline = clock.now() + self.options.timeout
        pauses = TRANSIENT_RETRY.waits(random.random)
        while True:
            try:
                return await self._authorized("POST", f"/v3/{path}", body, patience)
            except LeaseNotFound:
                raise
            except EtcdRefused as refused:
                transient = refused.code == UNAVAILABLE or any(
                    word in refused.message for word in _TRANSIENT
                )
                pause = next(pauses)
                if not transient or clock.now() + pause > deadline:
                    raise self._translated(refused) from refused
            await blocking_call.onto_the_loop()
            await asyncio.sleep(pause)
            self._current = (self._current + 1) % len(self.options.endpoints)

    async def stream(self, path: str, body: Body) -> AsyncIterator[Reply]:
        """The messages of a streaming call (a watch), one JSON object per line."""
        endpoint = self.options.endpoints[self._current]
        encoded = json.dumps(body, separators=(",", ":")).encode()
        replies = self._wire().stream(endpoint, f"/v3/{path}", encoded, await self._headers())
        try:
            async for status, line in replies:
                if status != 200:
                    raise self._translated(_refusal(status, line))
                if line:
                    yield json.loads(line)
        except (NotSent, Unanswered, ValueError) as exc:
            raise self._unavailable(endpoint, exc) from exc
        finally:
            await replies.aclose()

    async def _authorized(
        self, method: str, path: str, body: Body | None, patience: float | None
    ) -> Reply:
        try:
            return await self._send(method, path, body, await self._headers(), patience)
        except EtcdRefused as refused:
            if self.options.username is None or "token" not in refused.message:
                raise
            self._token = None  # expired token: sign in again, once
            return await self._send(method, path, body, await self._headers(), patience)

    async def _headers(self) -> dict[str, str]:
        if self.options.username is None:
            return {}
        if self._token is None:
            credentials = {"name": self.options.username, "password": self.options.password}
            try:
                reply = await self._send("POST", "/v3/auth/authenticate", credentials)
            except EtcdRefused as refused:
                raise self._translated(refused) from refused
            self._token = str(reply.get("token", ""))
        return {"Authorization": self._token}

    async def _send(
        self,
        method: str,
        path: str,
        body: Body | None,
        headers: dict[str, str] | None = None,
        patience: float | None = None,
    ) -> Reply:
        """Send to the current endpoint, moving on while connections fail (and, with
        ``patience``, while members leave it unanswered that long)."""
        endpoints = self.options.endpoints
        failure: BaseException | None = None
        timeout = self.options.timeout if patience is None else patience
        if not self._answered:  # connecting: the first answer is the connection's
            timeout = min(timeout, self.options.connect_timeout)
        for step in range(len(endpoints)):
            index = (self._current + step) % len(endpoints)
            try:
                status, content = await self._exchange(
                    method, endpoints[index], path, body, headers or {}, timeout
                )
            except NotSent as exc:
                failure = exc
                continue
            except Unanswered as exc:
                if isinstance(exc.__cause__, TIMEOUTS):  # a stalled member: the next
                    self._current = (index + 1) % len(endpoints)  # request goes elsewhere
                    if patience is not None:
                        failure = exc
                        continue
                raise self._unavailable(endpoints[index], exc, timeout) from exc
            self._current, self._answered = index, True
            if status != 200:
                raise _refusal(status, content)
            try:
                reply: Reply = json.loads(content)
            except ValueError as exc:
                raise self._unavailable(endpoints[index], exc) from exc
            return reply.get("result", reply) if path.endswith("keepalive") else reply
        assert failure is not None
        raise self._unavailable(", ".join(endpoints), failure, timeout) from failure

    async def _exchange(
        self,
        method: str,
        endpoint: str,
        path: str,
        body: Body | None,
        headers: dict[str, str],
        timeout: float,
    ) -> tuple[int, bytes]:
        """One request on the wire; NotSent or Unanswered on failure."""
        encoded = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        return await self._wire().send(method, endpoint, path, encoded, headers, timeout)

    def _unavailable(
        self, where: str, exc: BaseException, waited: float | None = None
    ) -> BackendUnavailable:
        chain = _causes(exc)
        why = next((str(e) for e in chain if str(e)), type(exc).__name__)
        if (
            waited is not None
            and isinstance(exc, Unanswered)
            and isinstance(exc.__cause__, TIMEOUTS)
        ):
            why = f"no answer within {waited:g}s"
        reset = any(isinstance(e, ConnectionResetError) for e in chain)
        handshake = self.options.tls and isinstance(exc, NotSent) and reset
        if any(isinstance(e, ssl.SSLError) for e in chain) or "SSL" in why or handshake:
            why = f"TLS handshake failed ({why}); does the server speak TLS on that port?"
        elif isinstance(exc, Unanswered) and not self.options.tls:
            garbled = any(isinstance(e, (ValueError, asyncio.IncompleteReadError)) for e in chain)
            why = f"{why}; is it a TLS port (use etcds://)?" if garbled else why
        return BackendUnavailable(f"etcd at {where} ({self._shown}) unreachable: {why}")

    def _translated(self, refused: EtcdRefused) -> FencelockError:
        message = refused.message
        if refused.code == UNAUTHENTICATED or "authentication failed" in message:
            return BackendUnavailable(f"etcd refused our credentials ({self._shown}): {message}")
        if "permission denied" in message:
            return BackendUnavailable(
                f"etcd user has no permission on the lock keys ({self._shown}): {message}"
            )
        if refused.code == 404 or "Not Found" in message:
            return ConfigError(f"{self._shown} does not serve etcd's v3 JSON API: {message}")
        return BackendUnavailable(f"etcd ({self._shown}): {message}")


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it was raised from, each once."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _refusal(status: int, content: bytes) -> EtcdRefused:
    try:
        reply: Any = json.loads(content)
        message = str(reply.get("error") or reply)
        kind = LeaseNotFound if "lease not found" in message else EtcdRefused
        return kind(int(reply.get("code", 0)), message)
    except (ValueError, AttributeError):
        return EtcdRefused(status, content.decode(errors="replace").strip() or f"HTTP {status}")
