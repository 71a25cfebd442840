"""``etcd://``: etcd's own lock recipe (``concurrency.Mutex``) over its JSON gateway.

A contender puts ``<prefix><NAME>/<lease id in hex>`` with its session's etcd
lease, in one transaction that also reads the queue's head; the key with the
lowest create revision holds the lock and that revision is the fencing token. A
waiter watches only its predecessor's key, from the moment its watch exists, then
looks at that key once: a delete before the watch began is seen by the look, one
after by the watch (a watch from an older revision would wait out etcd's 100 ms
catch-up of lagging watchers at every handoff). With ``?prefix=`` the keys
are exactly those of ``etcdctl lock NAME`` and Go's ``concurrency.Mutex``.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from fencelock import blocking_call, clock, forking
from fencelock.aio import read_when_done, stop
from fencelock.backends.base import (
    Acquired,
    AttemptResult,
    Busy,
    Capabilities,
    LockInfo,
    RenewedAsOf,
    RenewsEach,
)
from fencelock.backends.etcd import gateway
from fencelock.backends.etcd.http import Gateway, LeaseNotFound
from fencelock.backends.etcd.name_watch import EtcdNameWatch
from fencelock.backends.etcd.options import etcd_options
from fencelock.backends.etcd.session import FRESH_FRACTION, EtcdSession, SessionEnded
from fencelock.engine.backoff import Backoff
from fencelock.engine.urls import ParsedURL
from fencelock.errors import FencelockError

# Where the last token of a lock nobody holds is kept (apart from every lock's queue).
RECORDS = b"\x00fencelock/last/"
# How soon a release whose reply was lost is sent again (up to 0.5 s, doubling to 5 s).
DELETE_RETRY = Backoff(0.5, 5.0, spread=0.5)


@dataclass(frozen=True)
class _Held:
    name: str
    key: bytes
    revision: int
    session: EtcdSession
    own_session: bool  # a lease that is not renewed has an etcd lease of its own


def _owner_of(kv: gateway.KeyValue) -> str:
    """A contender's owner: its key's value, or for etcdctl's (whose value is empty)
    its key's last part, the lease id."""
    return kv.value.decode() or kv.key.rsplit(b"/", 1)[-1].decode()


def session_ttl(ttl: float) -> int:
    """etcd leases last whole seconds: at least the TTL asked (the client trusts only that)."""
    return max(1, math.ceil(ttl))


class AsyncEtcdBackend(RenewsEach):
    """The asyncio etcd backend; the sync one runs it on a shared loop."""

    capabilities = Capabilities(
        fair=True,  # the queue is FIFO by create revision, fair or not
        renews_in_batches=True,  # answered from the session's keepalive, one loop trip
        steps=True,  # the blocking client steps it: a reply is read on the caller's thread
        steps_off_the_loop=True,
        name_watches=True,  # a watch on a key range: a group's changes are pushed
    )

    def outlives_client(self, renewed: bool) -> bool:
        """An unrenewed lease has an etcd lease of its own, which closing the client
        leaves to its TTL; a renewed one is in the client's shared session, revoked then."""
        return not renewed

    def __init__(self, parsed: ParsedURL) -> None:
        self.options = etcd_options(parsed)
        self.url = parsed.redacted
        self.request_bound = parsed.request_bound
        self._gateway = Gateway(self.options, self.url)
        self._start_afresh()
        forking.register(self)

    def _start_afresh(self) -> None:
        self._sessions: dict[int, EtcdSession] = {}  # shared, by TTL in seconds
        self._granting: dict[int, asyncio.Task[EtcdSession]] = {}
        self._held: dict[str, _Held] = {}  # by owner: the handle of each held lease
        self._keys: set[bytes] = set()  # keys of this client's contenders
        self._background: set[asyncio.Task[None]] = set()  # releases sent again

    def _reset_after_fork(self) -> None:
        """In a forked child: the parent's sessions and connections stay the parent's."""
        self._gateway.forget()
        self._start_afresh()

    def queue(self, name: str) -> bytes:
        return f"{self.options.prefix}{name}/".encode()

    def watch_names(self, prefixes: Sequence[str]) -> EtcdNameWatch:
        """Pushed news of every name under ``prefixes`` (the keys of their lines)."""
        keys = [f"{self.options.prefix}{prefix}".encode() for prefix in prefixes]
        return EtcdNameWatch(self._gateway.stream, keys, self.request_bound)

    async def open(self) -> None:
        await self._gateway.check_version()

    def attempt(
        self, name: str, owner: str, ttl: float, fair: bool = False, renewed: bool = True
    ) -> EtcdAttempt:
        return EtcdAttempt(self, name, owner, ttl, renewed)

    async def session(self, ttl: int, shared: bool) -> EtcdSession:
        """This client's live session of ``ttl`` seconds, or a lease of its own."""
        if shared:
            current = self._sessions.get(ttl)
            if current is not None and not current.ended:
                return current
        await blocking_call.onto_the_loop()  # a new session's keepalive runs on the loop
        if not shared:
            return await EtcdSession.grant(self._gateway, ttl)
        granting = self._granting.get(ttl)
        if granting is None or granting.done():
            granting = read_when_done(
                asyncio.get_running_loop().create_task(EtcdSession.grant(self._gateway, ttl))
            )
            self._granting[ttl] = granting
        fresh = await asyncio.shield(granting)
        self._sessions[ttl] = fresh
        return fresh

    def claim_key(
        self, name: str, session: EtcdSession, owner: str, own_suffix: bool = False
    ) -> bytes:
        """The contender's key: etcd's ``NAME/<lease hex>``, unless this client already
        contends for ``name`` in the same session, or an earlier release of that key has
        not landed yet (then a suffix of its owner keeps them apart)."""
        key = self.queue(name) + f"{session.lease_id:x}".encode()
        if key in self._keys or own_suffix:
            key += f".{owner[:12]}".encode()
        self._keys.add(key)
        return key

    def unclaim(self, key: bytes) -> None:
        self._keys.discard(key)

    def hold(self, owner: str, held: _Held) -> None:
        self._held[owner] = held

    async def call(self, path: str, body: gateway.Body) -> gateway.Reply:
        return await self._gateway.call(path, body)

    async def watch_delete(self, key: bytes, create_revision: int) -> None:
        """Return once ``key``, as created at ``create_revision``, is gone (or the watch
        ended in a way only a fresh look can tell). The watch starts now; once it
        exists, one look tells whether the key went before it began."""
        async for message in self._gateway.stream("watch", gateway.watch_create(key)):
            if gateway.created(message):
                reply = await self.call("kv/range", gateway.key_request(key))
                now = gateway.key_values(reply)
                if not now or now[0].create_revision != create_revision:
                    return  # gone already (a key made again is another waiter's)
            elif gateway.deleted(message):
                return

    async def release(self, name: str, owner: str) -> bool:
        held = self._held.pop(owner, None)
        if held is None or held.name != name:
            return await self._release_elsewhere(name, owner)
        record = self.release_record(name, held.revision, owner)
        delete = gateway.delete_if_value_txn(held.key, owner.encode(), record)
        try:
            reply = await self.call("kv/txn", delete)
        except LeaseNotFound:
            self.unclaim(held.key)
            return False  # the key went with its lease
        except FencelockError:
            # The key stays claimed until the delete lands: a new contender of ours in
            # this session must not take it over (and then see it deleted under it).
            await self._delete_eventually(held.session, delete, held.key)
            raise
        except BaseException:
            self.unclaim(held.key)
            raise
        self.unclaim(held.key)
        if held.own_session:  # its lease is being released: no news for it
            with contextlib.suppress(FencelockError):
                await held.session.revoke(None)
        return bool(reply.get("succeeded")) or gateway.recorded(reply, record)

    def release_record(self, name: str, revision: int, owner: str | None) -> tuple[bytes, bytes]:
        """The record a release writes: the lock's last token (what ``inspect`` shows once
        nobody holds it), and who gave it back. A delete sent again (its first reply lost
        to a leader change) that finds its key gone and this record finds its own
        release, not a loss; a release by another client (``owner`` None) differs."""
        by = b"" if owner is None else b" " + owner.encode()
        return RECORDS + self.queue(name), str(revision).encode() + by

    async def _delete_eventually(
        self, session: EtcdSession, delete: gateway.Body, key: bytes
    ) -> None:
        """Send a release whose reply was lost again until it is answered (or its etcd
        lease is gone): a key left behind would hold the lock while the session lives.
        ``key`` is free for this client's contenders again once that is settled."""

        async def again() -> None:
            pauses = DELETE_RETRY.waits(random.random)
            try:
                while not session.ended:
                    await asyncio.sleep(next(pauses))
                    try:
                        await self.call("kv/txn", delete)
                        return
                    except LeaseNotFound:
                        return
                    except FencelockError:
                        continue
            finally:
                self.unclaim(key)

        task = (await blocking_call.running_loop()).create_task(again())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _release_elsewhere(self, name: str, owner: str) -> bool:
        """Release a lease another client holds, found by its owner value (an operator's
        ``fencelock`` command, a test's thief)."""
        head = await self._head(name)
        if head is None or head.value != owner.encode():
            return False
        record = self.release_record(name, head.create_revision, None)
        reply = await self.call(
            "kv/txn", gateway.delete_if_value_txn(head.key, owner.encode(), record)
        )
        return bool(reply.get("succeeded"))

    async def _head(self, name: str) -> gateway.KeyValue | None:
        reply = await self.call("kv/range", gateway.range_request(self.queue(name), first=True))
        kvs = gateway.key_values(reply)
        return kvs[0] if kvs else None

    async def renew(self, name: str, owner: str, ttl: float) -> bool | RenewedAsOf:
        held = self._held.get(owner)
        if held is None or held.name != name:
            return False
        try:
            if ttl > held.session.ttl or (held.own_session and session_ttl(ttl) < held.session.ttl):
                # an etcd lease cannot be shortened: an unrenewed lease (its etcd lease its
                # own) moves to one of the TTL asked, so it ends then (Lease.expire_in)
                return await self._move(owner, held, session_ttl(ttl))
            as_of = await held.session.fresh(ttl * FRESH_FRACTION)
            # the key itself may have been deleted (an operator, a release by owner)
            if not await held.session.holds(held.key, ttl * FRESH_FRACTION):
                self._held.pop(owner, None)
                return False
            return RenewedAsOf(as_of)
        except (SessionEnded, LeaseNotFound):
            return False

    async def _move(self, owner: str, held: _Held, ttl: int) -> bool | RenewedAsOf:
        """Extend past the session's TTL: re-put the key with a longer etcd lease (a put
        keeps the create revision, so the token stands). The fencelock lease still hears
        only its first session's news; a later loss shows at its next renewal."""
        session = await self.session(ttl, shared=not held.own_session)
        try:
            as_of = await session.fresh(ttl * FRESH_FRACTION)
        except SessionEnded:
            # A shared etcd lease of that TTL that nobody kept alive since its last use
            # has expired: that is no news of this lock's, whose key lives on. Once more
            # with a fresh one (the ended one is never handed out again).
            session = await self.session(ttl, shared=not held.own_session)
            as_of = await session.fresh(ttl * FRESH_FRACTION)
        reply = await self.call(
            "kv/txn", gateway.move_txn(held.key, held.revision, owner.encode(), session.lease_id)
        )
        if not reply.get("succeeded"):
            return False
        self._held[owner] = _Held(held.name, held.key, held.revision, session, held.own_session)
        if held.own_session:
            with contextlib.suppress(FencelockError):
                await held.session.revoke(None)
        return RenewedAsOf(as_of)

    async def inspect(self, name: str) -> LockInfo | None:
        queue = self.queue(name)
        contenders = gateway.key_values(await self.call("kv/range", gateway.range_request(queue)))
        if contenders:
            return await self._info(name, contenders[0], len(contenders) - 1)
        records = await self.call("kv/range", {"key": gateway.b64(RECORDS + queue)})
        last = gateway.key_values(records)
        if not last:
            return None
        return LockInfo(name, None, int(last[0].value.split(b" ", 1)[0] or b"0"), None, 0)

    async def waiters(self, name: str) -> builtins.list[str]:
        """The owners queued behind the holder (the first key), by create revision."""
        queue = self.queue(name)
        contenders = gateway.key_values(await self.call("kv/range", gateway.range_request(queue)))
        return [_owner_of(kv) for kv in contenders[1:]]

    async def _info(self, name: str, head: gateway.KeyValue, waiters: int) -> LockInfo:
        owner = _owner_of(head)
        remaining: float | None = None
        if head.lease:
            alive = await self.call("lease/timetolive", {"ID": str(head.lease)})
            remaining = max(float(gateway.integer(alive, "TTL")), 0.0)
        return LockInfo(name, owner, head.create_revision, remaining, waiters)

    async def list(self, prefix: str) -> list[LockInfo]:
        under = f"{self.options.prefix}{prefix}".encode()
        everything = gateway.key_values(await self.call("kv/range", gateway.range_request(under)))
        queues: dict[bytes, list[gateway.KeyValue]] = {}
        for kv in everything:
            if kv.key.startswith(b"\x00") or b"/" not in kv.key[len(self.options.prefix) :]:
                continue
            queues.setdefault(kv.key.rsplit(b"/", 1)[0], []).append(kv)
        start = len(self.options.prefix)
        return [
            LockInfo(
                queue[start:].decode(),
                _owner_of(kvs[0]),
                kvs[0].create_revision,
                None,
                len(kvs) - 1,
            )
            for queue, kvs in sorted(queues.items())
        ]

    async def close(self) -> None:
        for task in list(self._background):
            with contextlib.suppress(Exception):
                await stop(task)
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            with contextlib.suppress(FencelockError):
                await session.revoke()
        await self._gateway.close()


class EtcdAttempt:
    """One contender: its key, once put, and its place in the queue."""

    def __init__(
        self, backend: AsyncEtcdBackend, name: str, owner: str, ttl: float, renewed: bool
    ) -> None:
        self._backend, self._name, self._owner = backend, name, owner
        self._lock_ttl, self._ttl, self._shared = ttl, session_ttl(ttl), renewed
        self._session: EtcdSession | None = None
        self._key: bytes | None = None
        self._revision = 0  # our key's create revision, once put
        self._acquired = False
        self._enqueuing: asyncio.Future[gateway.Reply] | None = None

    async def try_acquire(self) -> AttemptResult:
        for _ in range(3):  # a session that ended under us is replaced, and the key put again
            try:
                return await self._try()
            except (SessionEnded, LeaseNotFound):
                self._forget_session()
        raise SessionEnded(f"etcd leases for {self._name!r} kept ending as they were granted")

    def _an_earlier_leases_key(self, value: bytes) -> bool:
        """Whether the key we put holds ``value`` from an earlier lease of ours (a
        release of it not landed yet), not this attempt's."""
        return value not in (b"", self._owner.encode())

    async def _try(self) -> AttemptResult:
        if self._session is None or self._session.ended:
            self._session = await self._backend.session(self._ttl, self._shared)
            self._key = self._backend.claim_key(self._name, self._session, self._owner)
        session, key = self._session, self._key
        assert key is not None
        # trusted from the keepalive: recent enough for the lock's own TTL
        as_of = await session.fresh(self._lock_ttl * FRESH_FRACTION)
        # Shielded: if we are cancelled meanwhile, the put still gets its answer, and
        # close() deletes the key after it (a delete sent while the put was still in
        # flight could reach etcd first and leave the key holding the lock). Stepped
        # (the blocking client), it is read right here, and Ctrl-C waits for it too.
        enqueue = gateway.enqueue_txn(
            key, self._owner.encode(), session.lease_id, self._backend.queue(self._name)
        )
        if blocking_call.active():
            reply = await self._backend.call("kv/txn", enqueue)
        else:
            self._enqueuing = read_when_done(
                (await blocking_call.running_loop()).create_task(
                    self._backend.call("kv/txn", enqueue)
                )
            )
            reply = await asyncio.shield(self._enqueuing)
        where = gateway.read_enqueued(reply)
        if where.my_revision == 0:  # our key went with its lease
            session.end("expired before the lock was taken")
            raise SessionEnded("the session's lease expired")
        if self._an_earlier_leases_key(where.my_value):
            # The key is an earlier lease's of ours whose release has not landed: never
            # adopt it (that release would delete it under us). Contend with our own.
            self._key = self._backend.claim_key(self._name, session, self._owner, own_suffix=True)
            return await self._try()
        self._revision = where.my_revision
        if where.head is not None and where.head.create_revision != where.my_revision:
            return Busy(notified=True)
        self._acquired = True
        self._backend.hold(
            self._owner, _Held(self._name, key, where.my_revision, session, not self._shared)
        )
        return Acquired(where.my_revision, session=session.news, as_of=as_of)

    def _forget_session(self) -> None:
        if self._key is not None:
            self._backend.unclaim(self._key)
        self._session, self._key, self._revision = None, None, 0

    async def wait(self, timeout: float) -> None:
        """Until our predecessor's key is deleted (or ``timeout``), keeping the session
        alive meanwhile; returns at once if we have no predecessor."""
        session = self._session
        if session is None or self._revision == 0:
            return
        deadline = clock.now() + timeout
        before = gateway.range_request(self._backend.queue(self._name), last_before=self._revision)
        reply = await self._backend.call("kv/range", before)
        predecessors = gateway.key_values(reply)
        if not predecessors:
            return
        watch = self._backend.watch_delete(predecessors[0].key, predecessors[0].create_revision)
        watching = asyncio.ensure_future(watch)
        try:
            while (left := deadline - clock.now()) > 0:
                step = min(left, session.ttl * FRESH_FRACTION)
                done, _ = await asyncio.wait({watching}, timeout=step)
                if done:
                    watching.result()
                    return
                await session.fresh()  # a waiter's key lives as long as its session
        except (SessionEnded, LeaseNotFound):
            # The session ended while we waited (its member paused, say): so did our
            # place in the line. The next try queues again on a new session.
            self._forget_session()
        finally:
            with contextlib.suppress(Exception):
                await stop(watching)

    @property
    def idle(self) -> bool:
        """Whether :meth:`close` has nothing to do (the lease is held, or no key was put
        and none is being put): the blocking face then skips a hop onto the loop."""
        enqueuing = self._enqueuing is not None and not self._enqueuing.done()
        return not enqueuing and (self._acquired or self._key is None or self._session is None)

    async def close(self) -> None:
        """After success the key is the lock and stays; a waiter's key goes."""
        if self._enqueuing is not None and not self._enqueuing.done():
            with contextlib.suppress(Exception):
                await self._enqueuing  # see _try: the put first, then the delete
        if self._acquired or self._key is None or self._session is None:
            return
        key, session = self._key, self._session
        self._forget_session()
        if self._shared:
            await self._backend.call(
                "kv/txn", gateway.delete_if_value_txn(key, self._owner.encode(), None)
            )
        else:
            with contextlib.suppress(FencelockError):
                await session.revoke()
