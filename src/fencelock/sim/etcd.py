"""The real etcd backend (:mod:`fencelock.backends.etcd`) run against a model of etcd's
v3 JSON gateway: its key claiming, session leases, resent releases and watches are the
real code, in virtual time, over the simulated network.

:class:`EtcdModel` is one etcd server as the gateway shows it, for the subset of the API
the backend uses: ``kv/range`` (a key, a range, sorted, limited, filtered by revision),
``kv/txn`` (compares on a key's value, version, revisions or lease; puts, deletes and
reads), ``kv/put``, ``kv/deleterange``, ``lease/grant``, ``lease/keepalive``,
``lease/revoke``, ``lease/timetolive`` and ``watch`` (from now on, ``NOPUT``/``NODELETE``),
with etcd's revision counter and per-key create/mod revision and version, its replies
and errors in the gateway's JSON (int64s as strings, zero fields left out). A lease ends
by the model's own clock, looked at lazily before each request: an expired lease is
revoked then (all its keys deleted in one revision, watchers told), as etcd's leader
revokes it (within 500 ms there). What the model does not implement (a read at a past
revision, a nested transaction, ``prev_kv``, auth, ...) is refused with gRPC's
Unimplemented and listed in :attr:`EtcdModel.unmodeled`: a test asserts that it stays
empty.

:class:`SimEtcdGateway` is the backend's own :class:`~fencelock.backends.etcd.http.Gateway`
(its error translation, patience and keepalive handling unchanged) over
:class:`SimEtcdWire`, which sends each request as one message to the model instead of
over HTTP: on the simulated network (:class:`NetworkTransport`) or straight to the
model (:class:`DirectTransport`, for holding the model to a real server).
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import re
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, TypeVar

from fencelock.backends.etcd import gateway
from fencelock.backends.etcd.backend import AsyncEtcdBackend, _owner_of
from fencelock.backends.etcd.http import Gateway
from fencelock.backends.etcd.options import DEFAULT_PREFIX, EtcdOptions
from fencelock.backends.etcd.wire import Unanswered, Wire
from fencelock.engine.urls import parse_url
from fencelock.errors import BackendUnavailable
from fencelock.sim.backend import REQUEST_BOUND
from fencelock.sim.network import Network

T = TypeVar("T")
Json = dict[str, Any]

# etcd's smallest lease TTL with its default election timing (1.5 x 1 s, rounded up): a
# grant of less is raised to it, as etcd does.
MIN_TTL = 2
MAX_TTL = 9_000_000_000
VERSION = {"etcdserver": "3.4.23", "etcdcluster": "3.4.0"}
CLUSTER_ID, MEMBER_ID = "14841639068965178418", "10276657743932975437"
FIRST_LEASE = 0x694D_7A3B_0000_0001  # etcd's IDs: a member's bits, then a count
LEASE_NOT_FOUND = "etcdserver: requested lease not found"
# gRPC status codes and the HTTP status the gateway answers each with
INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, OUT_OF_RANGE, UNIMPLEMENTED = 3, 5, 9, 11, 12
HTTP_STATUS = {
    INVALID_ARGUMENT: 400,
    NOT_FOUND: 404,
    FAILED_PRECONDITION: 400,
    OUT_OF_RANGE: 400,
    UNIMPLEMENTED: 501,
}

SORT_TARGETS = ("KEY", "VERSION", "CREATE", "MOD", "VALUE")
SORT_ORDERS = ("NONE", "ASCEND", "DESCEND")
SORT_ATTRIBUTES = {"KEY": "key", "VERSION": "version", "CREATE": "create_revision"}
SORT_ATTRIBUTES |= {"MOD": "mod_revision", "VALUE": "value"}
COMPARE_TARGETS = ("VERSION", "CREATE", "MOD", "VALUE", "LEASE")
COMPARE_RESULTS = ("EQUAL", "GREATER", "LESS", "NOT_EQUAL")
WATCH_FILTERS = ("NOPUT", "NODELETE")
COMPARE_FIELDS = {"key", "range_end", "target", "result", "value", "version", "lease"}
COMPARE_FIELDS |= {"create_revision", "mod_revision"}
RANGE_FIELDS = {"key", "range_end", "limit", "sort_order", "sort_target", "count_only"}
RANGE_FIELDS |= {"keys_only", "serializable", "revision", "min_create_revision"}
RANGE_FIELDS |= {"max_create_revision", "min_mod_revision", "max_mod_revision"}


@dataclass(kw_only=True)
class Key:
    """One key as etcd keeps it."""

    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int  # 0: none

    @property
    def owner(self) -> str:
        """The fencelock owner it stands for, as the backend reads it."""
        return _owner_of(gateway.KeyValue(self.key, self.value, self.create_revision, self.lease))


@dataclass
class EtcdLease:
    id: int
    ttl: int  # as granted (seconds)
    expires: float  # by the model's clock
    keys: set[bytes] = field(default_factory=set)


@dataclass
class Watcher:
    """A watch stream's server end: its key range, filters, and where its messages go
    (``send(None)``: the stream broke)."""

    key: bytes
    range_end: bytes | None
    noput: bool
    nodelete: bool
    send: Callable[[bytes | None], None]


@dataclass(frozen=True)
class Holder:
    """Who holds a lock: the head of its queue (the lowest create revision)."""

    owner: str
    token: int  # its key's create revision
    lease: int
    until: float  # true time its lease ends (inf: a key with no lease)


@dataclass(frozen=True)
class _Event:
    key: bytes
    put: bool
    body: Json


class _Refused(Exception):
    """The server answers with an error (gRPC ``code``, ``message``)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _bytes(body: Json, name: str) -> bytes:
    return gateway.unb64(body.get(name))


def _int(body: Json, name: str) -> int:
    return int(body.get(name) or 0)


def _enum(body: Json, name: str, names: tuple[str, ...]) -> str:
    """An enum field, given by name or by number (absent: the first, zero)."""
    given = body.get(name, 0)
    chosen = names[given] if isinstance(given, int) and 0 <= given < len(names) else given
    if chosen not in names:
        raise _Refused(INVALID_ARGUMENT, f"invalid value for enum {name}: {given!r}")
    return str(chosen)


def _in(key: bytes, start: bytes, end: bytes | None) -> bool:
    """Whether ``key`` is in etcd's range ``[start, end)`` (no end: the one key; end
    ``\\x00``: every key from ``start`` on)."""
    if end is None:
        return key == start
    return key >= start and (end == b"\x00" or key < end)


def _range_end(body: Json) -> bytes | None:
    return _bytes(body, "range_end") if body.get("range_end") else None


def _kv(kv: Key, keys_only: bool = False) -> Json:
    """A key in the gateway's JSON: zero fields left out."""
    out: Json = {"key": _b64(kv.key), "create_revision": str(kv.create_revision)}
    out.update(mod_revision=str(kv.mod_revision), version=str(kv.version))
    if kv.value and not keys_only:
        out["value"] = _b64(kv.value)
    if kv.lease:
        out["lease"] = str(kv.lease)
    return out


def _compared(kv: Key | None, compare: Json) -> bool:
    """One compare of a transaction on one key (None: absent, etcd's zero key)."""
    target = _enum(compare, "target", COMPARE_TARGETS)
    result = _enum(compare, "result", COMPARE_RESULTS)
    if target == "VALUE":
        if kv is None:  # etcd: a value compare on a missing key always fails
            return False
        ours, theirs = kv.value, _bytes(compare, "value")
        order = (ours > theirs) - (ours < theirs)
    else:
        name = {"VERSION": "version", "CREATE": "create_revision", "MOD": "mod_revision"}
        attribute = name.get(target, "lease")
        mine = 0 if kv is None else int(getattr(kv, attribute))
        wanted = _int(compare, "lease" if target == "LEASE" else attribute)
        order = (mine > wanted) - (mine < wanted)
    return {"EQUAL": order == 0, "GREATER": order > 0, "LESS": order < 0}.get(result, order != 0)


def _filtered(kvs: list[Key], body: Json) -> list[Key]:
    """``kvs`` within a range request's min/max create and mod revisions (0: no bound)."""
    for bound in ("create_revision", "mod_revision"):
        low, high = _int(body, f"min_{bound}"), _int(body, f"max_{bound}")
        kvs = [kv for kv in kvs if (not low or getattr(kv, bound) >= low)]
        kvs = [kv for kv in kvs if (not high or getattr(kv, bound) <= high)]
    return kvs


def _sorted(kvs: list[Key], body: Json) -> list[Key]:
    """``kvs`` (in key order) as a range request sorts them."""
    target = _enum(body, "sort_target", SORT_TARGETS)
    order = _enum(body, "sort_order", SORT_ORDERS)
    if order == "NONE" and target != "KEY":
        order = "ASCEND"  # etcd sorts by a target other than the key even when not told
    if order == "NONE":
        return kvs
    attribute = SORT_ATTRIBUTES[target]
    return sorted(kvs, key=lambda kv: getattr(kv, attribute), reverse=order == "DESCEND")


class EtcdModel:
    """One etcd server, as its JSON gateway answers; ``clock()`` is true time, and the
    server's own clock runs at ``rate`` against it (drift)."""

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        prefix: str = DEFAULT_PREFIX,
        rate: float = 1.0,
        min_ttl: int = MIN_TTL,
    ) -> None:
        self.clock, self.prefix, self.rate, self.min_ttl = clock, prefix, rate, min_ttl
        self.started = clock()
        self.revision = 1  # etcd's first: the empty store's
        self.term = 2
        self.keys: dict[bytes, Key] = {}
        self.leases: dict[int, EtcdLease] = {}
        self.watchers: list[Watcher] = []
        self.unmodeled: list[str] = []  # requests refused as beyond the model
        self._next_lease = FIRST_LEASE
        self._events: list[_Event] = []  # the writes of the request being applied
        self._handlers: dict[str, Callable[[Json], Json]] = {
            "/v3/kv/range": self._range_request,
            "/v3/kv/put": self._put_request,
            "/v3/kv/deleterange": self._delete_request,
            "/v3/kv/txn": self._txn,
            "/v3/lease/grant": self._grant,
            "/v3/lease/keepalive": self._keepalive,
            "/v3/lease/revoke": self._revoke_request,
            "/v3/lease/timetolive": self._time_to_live,
        }

    # --- time ------------------------------------------------------------------------

    def server_time(self, true_now: float) -> float:
        return self.started + (true_now - self.started) * self.rate

    def true_time(self, server_time: float) -> float:
        return self.started + (server_time - self.started) / self.rate

    def now(self) -> float:
        """The server's clock now."""
        return self.server_time(self.clock())

    # --- requests --------------------------------------------------------------------

    def handle(self, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        """One HTTP request to the gateway: its status and body."""
        if method == "GET" and path == "/version":
            return 200, json.dumps(VERSION).encode()
        handler = self._handlers.get(path)
        if method != "POST" or not path.startswith("/v3/"):
            return 404, b"Not Found"
        if handler is None:  # auth, compaction, maintenance, ...
            return self._error(self._unmodeled(path))
        self.expire()
        try:
            reply = handler(json.loads(body or b"{}"))
        except _Refused as refused:
            return self._error(refused)
        return 200, json.dumps(reply, separators=(",", ":")).encode()

    def _error(self, refused: _Refused) -> tuple[int, bytes]:
        if refused.code == UNIMPLEMENTED:
            self.unmodeled.append(refused.message)
        error = {"error": refused.message, "message": refused.message, "code": refused.code}
        return HTTP_STATUS.get(refused.code, 500), json.dumps(error).encode()

    def _unmodeled(self, what: str) -> _Refused:
        return _Refused(UNIMPLEMENTED, f"not in the etcd model: {what}")

    def _only(self, body: Json, allowed: set[str], what: str) -> None:
        extra = sorted(set(body) - allowed)
        if extra:
            raise self._unmodeled(f"{what} with {', '.join(extra)}")

    def _header(self) -> Json:
        return {
            "cluster_id": CLUSTER_ID,
            "member_id": MEMBER_ID,
            "revision": str(self.revision),
            "raft_term": str(self.term),
        }

    # --- keys ------------------------------------------------------------------------

    def _key_of(self, body: Json) -> bytes:
        key = _bytes(body, "key")
        if not key:
            raise _Refused(INVALID_ARGUMENT, "etcdserver: key is not provided")
        return key

    def _in_range(self, start: bytes, end: bytes | None) -> list[Key]:
        if end is None:
            one = self.keys.get(start)
            return [] if one is None else [one]
        return [kv for key, kv in sorted(self.keys.items()) if _in(key, start, end)]

    def _range(self, body: Json) -> Json:
        self._only(body, RANGE_FIELDS, "a range")
        if _int(body, "revision") not in (0, self.revision):
            raise self._unmodeled("a read at another revision")
        kvs = self._in_range(self._key_of(body), _range_end(body))
        count = len(kvs)  # etcd counts the range, before the revision filters
        kvs = _sorted(_filtered(kvs, body), body)
        reply: Json = {}
        limit = _int(body, "limit")
        if limit and len(kvs) > limit:
            kvs, reply["more"] = kvs[:limit], True
        if kvs and not body.get("count_only"):
            reply["kvs"] = [_kv(kv, bool(body.get("keys_only"))) for kv in kvs]
        if count:
            reply["count"] = str(count)
        return reply

    def _range_request(self, body: Json) -> Json:
        return {"header": self._header(), **self._range(body)}

    def _check_put(self, body: Json) -> None:
        self._only(body, {"key", "value", "lease"}, "a put")
        self._key_of(body)
        lease = _int(body, "lease")
        if lease and lease not in self.leases:
            raise _Refused(NOT_FOUND, LEASE_NOT_FOUND)

    def _put(self, body: Json) -> Json:
        key, value, lease = self._key_of(body), _bytes(body, "value"), _int(body, "lease")
        revision = self.revision + 1  # every write of one request shares the next revision
        old = self.keys.get(key)
        if old is not None and old.lease and old.lease in self.leases:
            self.leases[old.lease].keys.discard(key)
        created = revision if old is None else old.create_revision
        version = 1 if old is None else old.version + 1
        kv = Key(
            key=key,
            value=value,
            create_revision=created,
            mod_revision=revision,
            version=version,
            lease=lease,
        )
        self.keys[key] = kv
        if lease:
            self.leases[lease].keys.add(key)
        self._events.append(_Event(key, True, {"kv": _kv(kv)}))
        return {}

    def _delete(self, key: bytes) -> None:
        kv = self.keys.pop(key)
        if kv.lease in self.leases:
            self.leases[kv.lease].keys.discard(key)
        deleted = {"key": _b64(key), "mod_revision": str(self.revision + 1)}
        self._events.append(_Event(key, False, {"type": "DELETE", "kv": deleted}))

    def _delete_range(self, body: Json) -> Json:
        self._only(body, {"key", "range_end"}, "a delete")
        doomed = self._in_range(self._key_of(body), _range_end(body))
        for kv in doomed:
            self._delete(kv.key)
        return {"deleted": str(len(doomed))} if doomed else {}

    def _committed(self) -> None:
        """The request's writes, if any, make one revision; watchers hear of it."""
        events, self._events = self._events, []
        if not events:
            return
        self.revision += 1
        for watcher in list(self.watchers):
            mine = [
                event.body
                for event in events
                if _in(event.key, watcher.key, watcher.range_end)
                and not (watcher.noput if event.put else watcher.nodelete)
            ]
            if mine:
                message = {"result": {"header": self._header(), "events": mine}}
                watcher.send(json.dumps(message, separators=(",", ":")).encode())

    def _put_request(self, body: Json) -> Json:
        self._check_put(body)
        self._put(body)
        self._committed()
        return {"header": self._header()}

    def _delete_request(self, body: Json) -> Json:
        reply = self._delete_range(body)
        self._committed()
        return {"header": self._header(), **reply}

    def _txn(self, body: Json) -> Json:
        self._only(body, {"compare", "success", "failure"}, "a txn")
        compares: list[Json] = body.get("compare", [])
        succeeded = all(self._holds(compare) for compare in compares)
        # etcd checks the whole branch (a put's lease exists) before applying any of it
        ops = [self._checked(op) for op in body.get("success" if succeeded else "failure", [])]
        answers = [(f"response_{kind}", self._apply(kind, request)) for kind, request in ops]
        self._committed()
        reply: Json = {"header": self._header()}
        if succeeded:
            reply["succeeded"] = True
        if answers:
            revision = {"header": {"revision": str(self.revision)}}
            reply["responses"] = [{kind: {**revision, **answer}} for kind, answer in answers]
        return reply

    def _checked(self, op: Json) -> tuple[str, Json]:
        """A transaction's operation, checked before any of them is applied: its kind
        (``range``, ``put``, ``delete_range``) and request."""
        self._only(op, {"request_range", "request_put", "request_delete_range"}, "a txn op")
        if len(op) != 1:
            raise _Refused(INVALID_ARGUMENT, "etcdserver: a txn op has one request")
        name, request = next(iter(op.items()))
        kind = name.removeprefix("request_")
        if kind == "put":
            self._check_put(request)
        elif kind == "delete_range":
            self._only(request, {"key", "range_end"}, "a delete")
            self._key_of(request)
        else:
            self._range(request)  # reads nothing it could change
        return kind, request

    def _apply(self, kind: str, request: Json) -> Json:
        if kind == "put":
            return self._put(request)
        if kind == "delete_range":
            return self._delete_range(request)
        return self._range(request)

    def _holds(self, compare: Json) -> bool:
        self._only(compare, COMPARE_FIELDS, "a compare")
        kvs = self._in_range(self._key_of(compare), _range_end(compare))
        if not kvs:
            return _compared(None, compare)
        return all(_compared(kv, compare) for kv in kvs)

    # --- leases ----------------------------------------------------------------------

    def _grant(self, body: Json) -> Json:
        self._only(body, {"TTL", "ID"}, "a lease grant")
        ttl, lease = _int(body, "TTL"), _int(body, "ID")
        if ttl > MAX_TTL:
            raise _Refused(OUT_OF_RANGE, "etcdserver: too large lease TTL")
        if lease in self.leases:
            raise _Refused(FAILED_PRECONDITION, "etcdserver: lease already exists")
        if not lease:
            while self._next_lease in self.leases:
                self._next_lease += 1
            lease, self._next_lease = self._next_lease, self._next_lease + 1
        ttl = max(ttl, self.min_ttl)
        self.leases[lease] = EtcdLease(lease, ttl, self.now() + ttl)
        return {"header": self._header(), "ID": str(lease), "TTL": str(ttl)}

    def _keepalive(self, body: Json) -> Json:
        """A keepalive stream's one answer: the TTL granted, none for a lease that is gone."""
        self._only(body, {"ID"}, "a keepalive")
        lease = self.leases.get(_int(body, "ID"))
        result: Json = {"header": self._header(), "ID": str(_int(body, "ID"))}
        if lease is not None:
            lease.expires = self.now() + lease.ttl
            result["TTL"] = str(lease.ttl)
        return {"result": result}

    def _revoke_request(self, body: Json) -> Json:
        self._only(body, {"ID"}, "a lease revoke")
        if _int(body, "ID") not in self.leases:
            raise _Refused(NOT_FOUND, LEASE_NOT_FOUND)
        self.revoke(_int(body, "ID"))
        return {"header": self._header()}

    def _time_to_live(self, body: Json) -> Json:
        self._only(body, {"ID", "keys"}, "a lease's time to live")
        lease = self.leases.get(_int(body, "ID"))
        reply: Json = {"header": self._header(), "ID": str(_int(body, "ID"))}
        if lease is None:
            reply["TTL"] = "-1"
            return reply
        reply["TTL"] = str(int(lease.expires - self.now()))  # Go's conversion truncates
        reply["grantedTTL"] = str(lease.ttl)
        if body.get("keys") and lease.keys:
            reply["keys"] = [_b64(key) for key in sorted(lease.keys)]
        return reply

    def revoke(self, lease: int) -> None:
        """End ``lease``: its keys go, in one revision (as etcd's revoke, one transaction)."""
        ended = self.leases.pop(lease)
        for key in sorted(ended.keys):
            self._delete(key)
        self._committed()

    def expire(self, server_now: float | None = None) -> None:
        """Revoke every lease whose TTL is over by the server's clock (now by default)."""
        now = self.now() if server_now is None else server_now
        for lease in sorted(self.leases.values(), key=lambda lease: (lease.expires, lease.id)):
            if lease.expires <= now:
                self.revoke(lease.id)

    # --- watches ---------------------------------------------------------------------

    def open_watch(
        self, body: bytes, send: Callable[[bytes | None], None]
    ) -> tuple[int, bytes, Watcher | None]:
        """A watch stream's request: its first reply (``created``), and the watcher that
        sends the rest through ``send`` until :meth:`cancel_watch`."""
        self.expire()
        try:
            request = json.loads(body or b"{}")
            self._only(request, {"create_request"}, "a watch request")
            create: Json = request["create_request"]
            self._only(create, {"key", "range_end", "filters", "start_revision"}, "a watch")
            if _int(create, "start_revision") not in (0, self.revision + 1):
                raise self._unmodeled("a watch from a past revision")
            filters = {
                WATCH_FILTERS[f] if isinstance(f, int) else f for f in create.get("filters", [])
            }
            watcher = Watcher(
                self._key_of(create),
                _range_end(create),
                "NOPUT" in filters,
                "NODELETE" in filters,
                send,
            )
        except _Refused as refused:
            status, content = self._error(refused)
            return status, content, None
        self.watchers.append(watcher)
        created = {"result": {"header": self._header(), "created": True}}
        return 200, json.dumps(created, separators=(",", ":")).encode(), watcher

    def cancel_watch(self, watcher: Watcher) -> None:
        if watcher in self.watchers:
            self.watchers.remove(watcher)

    # --- what the simulator's invariants and faults use ------------------------------

    def _queue(self, name: str) -> bytes:
        return f"{self.prefix}{name}/".encode()

    def _head(self, name: str, live_at: float | None) -> Key | None:
        """The first key in ``name``'s queue (of those whose lease lives at server time
        ``live_at``; None: of all kept, an expired lease's not yet revoked too)."""
        queue = self._queue(name)
        kvs = [
            kv
            for key, kv in self.keys.items()
            if key.startswith(queue)
            and (live_at is None or not kv.lease or self.leases[kv.lease].expires > live_at)
        ]
        return min(kvs, key=lambda kv: kv.create_revision, default=None)

    def holder(self, name: str, true_now: float) -> Holder | None:
        """Who holds ``name`` at ``true_now``: the first key of its queue whose lease
        lives (etcd's lock recipe); changes nothing."""
        head = self._head(name, self.server_time(true_now))
        if head is None:
            return None
        until = math.inf if not head.lease else self.true_time(self.leases[head.lease].expires)
        return Holder(head.owner, head.create_revision, head.lease, until)

    def grant_until(self, name: str, owner: str, true_now: float) -> float | None:
        """Until when (true time) the server grants ``owner`` the lock; None: it does not."""
        held = self.holder(name, true_now)
        return None if held is None or held.owner != owner else held.until

    def names(self) -> set[str]:
        """Every name with a key in its queue."""
        start = len(self.prefix.encode())
        return {
            key[start:].rsplit(b"/", 1)[0].decode()
            for key in self.keys
            if key.startswith(self.prefix.encode()) and b"/" in key[start:]
        }

    def owners(self) -> set[str]:
        """Whom the server grants a lock now (a head whose lease expired included)."""
        heads = (self._head(name, None) for name in self.names())
        return {head.owner for head in heads if head is not None}

    def force_end(self, name: str, true_now: float, revoke: bool = True) -> set[str]:
        """An operator ends ``name``'s holder: revokes its etcd lease (every lock held in
        it ends; ``revoke=False``: deletes its key only). The owners it ended."""
        self.expire(self.server_time(true_now))
        head = self._head(name, None)
        if head is None:
            return set()
        if not (revoke and head.lease):
            self._delete(head.key)
            self._committed()
            return {head.owner}
        heads = [self._head(other, None) for other in self.names()]
        ended = {kv.owner for kv in heads if kv is not None and kv.lease == head.lease}
        self.revoke(head.lease)
        return ended

    def restart(self, keep_data: bool, true_now: float) -> None:
        """A restart: every watch stream breaks. With its data, a lease survives with its
        full TTL again, counted from now (etcd's new leader refreshes every lease, and
        adds an election timeout, left out here: the model ends it no later), expired
        ones revoked first. Without, the store is a new one: revision 1 again, so tokens
        go back (a loss etcd cannot survive); lease IDs are still never reused."""
        now = self.server_time(true_now)
        self.expire(now)
        watchers, self.watchers = self.watchers, []
        for watcher in watchers:
            watcher.send(None)
        self.term += 1
        if keep_data:
            for lease in self.leases.values():
                lease.expires = now + lease.ttl
        else:
            self.keys.clear()
            self.leases.clear()
            self.revision = 1


# --- the client side --------------------------------------------------------------------


class Transport(Protocol):
    """How a client's messages reach the model and its pushes reach the client."""

    async def call(
        self, apply: Callable[[], T], timeout: float, what: str, link: object | None = None
    ) -> T: ...

    def push(self, deliver: Callable[[], None]) -> None: ...


class NetworkTransport:
    """Client ``client``'s messages over the simulated network."""

    def __init__(self, network: Network, client: int) -> None:
        self.network, self.client = network, client

    async def call(
        self, apply: Callable[[], T], timeout: float, what: str, link: object | None = None
    ) -> T:
        return await self.network.call(self.client, apply, timeout, what, link)

    def push(self, deliver: Callable[[], None]) -> None:
        self.network.push(self.client, deliver)


class DirectTransport:
    """Straight to the model: no delay, no loss, applied at once."""

    async def call(
        self, apply: Callable[[], T], timeout: float, what: str, link: object | None = None
    ) -> T:
        return apply()

    def push(self, deliver: Callable[[], None]) -> None:
        asyncio.get_running_loop().call_soon(deliver)


class _Stream:
    """A watch stream's client end: the server's messages in the order it sent them (one
    connection), each pushed on its own; a lost one stalls the rest, as on a connection
    that hangs."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._sent = 0  # by the server
        self._read = 0  # by the client
        self._arrived: dict[int, bytes | None] = {}
        self._news = asyncio.Event()
        self.closed = False
        self.watcher: Watcher | None = None
        self.created = b""  # the server's first reply

    def send(self, message: bytes | None) -> None:
        """The server sends ``message`` (None: the connection broke)."""
        number, self._sent = self._sent, self._sent + 1
        self._transport.push(lambda: self._arrive(number, message))

    def _arrive(self, number: int, message: bytes | None) -> None:
        if not self.closed:
            self._arrived[number] = message
            self._news.set()

    async def next(self) -> bytes:
        while self._read not in self._arrived:
            self._news.clear()
            await self._news.wait()
        message = self._arrived.pop(self._read)
        self._read += 1
        if message is None:
            raise Unanswered("the server closed the watch stream")
        return message


class SimEtcdWire(Wire):
    """The gateway's wire, each request one message to ``model`` over ``transport``."""

    def __init__(self, model: EtcdModel, transport: Transport, options: EtcdOptions) -> None:
        super().__init__(options.endpoints, False, options.connect_timeout)
        self.model, self.transport, self.options = model, transport, options

    async def send(
        self,
        method: str,
        url: str,
        path: str,
        body: bytes,
        headers: dict[str, str],
        timeout: float,
    ) -> tuple[int, bytes]:
        def apply() -> tuple[int, bytes]:
            return _Reply(*self.model.handle(method, path, body))

        try:
            return await self.transport.call(apply, timeout, _what(path, body))
        except BackendUnavailable as exc:  # as the real wire's read that timed out
            raise Unanswered(str(exc)) from TimeoutError(str(exc))

    async def stream(
        self, url: str, path: str, body: bytes, headers: dict[str, str]
    ) -> AsyncGenerator[tuple[int, bytes], None]:
        """A watch: its create one message, then what the server sends while the
        stream is open, in order; closing it cancels the watch."""
        stream = _Stream(self.transport)

        def apply() -> tuple[int, bytes]:
            if stream.closed:  # the connection closed before the request arrived
                return 499, b""
            if stream.watcher is not None:  # sent again: the one connection has one watch
                return 200, stream.created
            status, stream.created, stream.watcher = self.model.open_watch(body, stream.send)
            return _Reply(status, stream.created)

        try:
            try:
                # the real wire waits for the head without a bound; the URL's timeout here
                # (a waiter sleeps out its wait either way)
                status, first = await self.transport.call(
                    apply, self.options.timeout, _what(path, body)
                )
            except BackendUnavailable as exc:
                raise Unanswered(str(exc)) from exc
            yield status, first
            while status == 200:
                yield status, await stream.next()
        finally:
            stream.closed = True
            if stream.watcher is not None:
                self.model.cancel_watch(stream.watcher)

    def close(self) -> None:
        pass

    def forget(self) -> None:
        pass


class _Reply(NamedTuple):
    """A reply as the wire returns it, shown short in the simulator's trace."""

    status: int
    content: bytes

    def __repr__(self) -> str:
        shown = _HEADER.sub(b"", self.content)[:160].decode(errors="replace")
        return f"{self.status} {shown}"


_HEADER = re.compile(rb'"header":\{[^}]*\},?')


def _what(path: str, body: bytes) -> str:
    """A request, for the simulator's trace."""
    return f"etcd {path.removeprefix('/v3/')} {body[:120].decode(errors='replace')}"


class SimEtcdGateway(Gateway):
    """The backend's gateway (http.py: its retries, patience and error translation)
    over a :class:`SimEtcdWire`."""

    def __init__(self, options: EtcdOptions, shown_url: str, wire: SimEtcdWire) -> None:
        super().__init__(options, shown_url)
        self._connections = wire


def _etcd_backend(model: EtcdModel, transport: Transport, timeout: float) -> AsyncEtcdBackend:
    """A real :class:`AsyncEtcdBackend` whose gateway talks to ``model``: built from an
    ``etcd://`` URL, then given the simulated gateway in place of its own."""
    url = f"etcd://sim-host:2379?timeout={timeout}"
    if model.prefix != DEFAULT_PREFIX:
        url += f"&prefix={model.prefix}"
    backend = AsyncEtcdBackend(parse_url(url))
    wire = SimEtcdWire(model, transport, backend.options)
    backend._gateway = SimEtcdGateway(backend.options, backend.url, wire)
    backend.request_bound = timeout
    return backend


def sim_etcd_backend(
    model: EtcdModel, network: Network, client_number: int, timeout: float = REQUEST_BOUND
) -> AsyncEtcdBackend:
    """Client ``client_number``'s etcd backend, over ``network`` to ``model``; a request
    unanswered for ``timeout`` seconds (the URL's ``timeout``) is BackendUnavailable."""
    return _etcd_backend(model, NetworkTransport(network, client_number), timeout)


def direct_etcd_backend(model: EtcdModel, timeout: float = 10.0) -> AsyncEtcdBackend:
    """An etcd backend whose requests reach ``model`` at once (no network)."""
    return _etcd_backend(model, DirectTransport(), timeout)
