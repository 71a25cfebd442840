"""``zookeeper://``: a lock queue of ephemeral sequential nodes, the czxid as token.

A contender creates ``<base>/NAME/<owner>__lock__<seq>`` in its session; the
lowest sequence holds the lock, and its creation zxid (``czxid``, increasing
across the whole ensemble and its restarts) is the fencing token. A waiter
watches only its predecessor. Written for asyncio over kazoo's ``*_async`` calls
(:mod:`.bridge`); the blocking face runs it on one shared event loop.

The same line is the native read-write lock and semaphore (``shared_attempt``, see
:mod:`.queue`): one node per hold, so a read or a permit costs a create and a
listing, as kazoo's recipes do, instead of the generic gate-and-slot leases.

Not kazoo's ``Lock`` recipe (a contender orphaned by a suspended session can stall
it, kazoo #732): a create whose reply was lost is found again by its owner's name
before anything else is done, and a contender's node is deleted when it gives up.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kazoo import exceptions as kz

from fencelock import blocking_call, clock, forking
from fencelock.backends.base import (
    Acquired,
    AttemptResult,
    Busy,
    Capabilities,
    EndsWithItsSession,
    LockInfo,
    PermitsInUse,
    RenewedAsOf,
    RenewsEach,
    Share,
)
from fencelock.backends.zookeeper import at_least
from fencelock.backends.zookeeper import latch as latches
from fencelock.backends.zookeeper import queue as queues
from fencelock.backends.zookeeper.bridge import ANSWERS, SessionLost
from fencelock.backends.zookeeper.latch import ZooKeeperLatch
from fencelock.backends.zookeeper.name_watch import ZkNameWatch
from fencelock.backends.zookeeper.options import zookeeper_options
from fencelock.backends.zookeeper.session import Watch, ZkSession
from fencelock.engine.urls import ParsedURL
from fencelock.errors import FencelockError

# A renewal trusts a probe answered this long ago (as a fraction of the TTL).
FRESH_FRACTION = 1 / 3
# The session ``open()`` connects: the one the default lease TTL (30 s) uses.
OPENING_TTL = 30


@dataclass(frozen=True)
class _Held:
    name: str
    path: str
    token: int
    session: ZkSession
    own_session: bool  # a lease that is not renewed has a session of its own
    recorded: bool = True  # a lock's release records its token on the queue node


@dataclass(frozen=True)
class _Head:
    entry: queues.Contender
    token: int
    timeout: float | None  # the holder's session timeout: how long it lasts unheard
    waiters: int
    since: float  # its node's last write (the server's clock): when it was granted

    def info(self, name: str) -> LockInfo:
        return LockInfo(name, self.entry.owner, self.token, self.timeout, self.waiters, self.since)


def granted_at(stat: Any) -> float:
    """When a contender's lease was granted, from its node's stat: the node is created
    holding the lease when nobody is ahead of it, and written again (its data unchanged)
    when it is granted after a wait, so its last write is the grant (server's clock)."""
    return int(stat.mtime) / 1000


def session_timeout(ttl: float) -> int:
    """Sessions are asked for in whole seconds: at least the TTL (the client trusts
    only that; the server may grant more, never less without a ConfigError)."""
    return max(1, math.ceil(ttl))


class AsyncZooKeeperBackend(RenewsEach, EndsWithItsSession):
    """The asyncio ZooKeeper backend; the sync one runs it on a shared loop."""

    capabilities = Capabilities(
        fair=True,  # the queue is FIFO by sequence number, fair or not
        renews_in_batches=True,  # answered from the session's heartbeat, one loop trip
        shares=True,  # readers, writers and permits queue in one line
        latches=True,  # in a persistent node (a lease's node ends with its session)
        keeps=True,  # a name kept after its lease, by a mark the server times
        steps=True,  # kazoo's results can be waited for on the caller's thread (blocking_call.py)
        steps_off_the_loop=True,  # ... with no loop running, until a call suspends
        name_watches=True,  # child watches: a group's changes are pushed
    )

    def __init__(self, parsed: ParsedURL) -> None:
        self.options = zookeeper_options(parsed)
        self.url = parsed.redacted
        self.request_bound = parsed.request_bound
        self._start_afresh()
        forking.register(self)

    def _start_afresh(self) -> None:
        self._sessions: dict[int, ZkSession] = {}  # shared, by timeout asked
        self._opening: dict[int, asyncio.Task[ZkSession]] = {}
        self._held: dict[str, _Held] = {}  # by owner: the handle of each held lease
        self._own: set[ZkSession] = set()  # sessions of leases that are not renewed
        self._background: set[asyncio.Task[None]] = set()  # sessions being closed
        self._every: set[ZkSession] = set()  # every session made: close() stops them all

    def _reset_after_fork(self) -> None:
        """In a forked child: the parent's kazoo clients (their threads are not here)
        stay the parent's, unused and unclosed."""
        forking.abandon(list(self._every))
        self._start_afresh()

    def queue(self, name: str) -> str:
        return queues.queue_path(self.options.base, name)

    def watch_names(self, prefixes: Sequence[str]) -> ZkNameWatch:
        """Pushed news of every name under ``prefixes``, each the names below a node
        (``"group.members/"``: the lines below ``group.members``)."""
        paths = [self.queue(prefix.rstrip("/")) for prefix in prefixes]
        return ZkNameWatch(lambda: self.session(OPENING_TTL, shared=True), paths)

    async def open(self) -> None:
        await self.session(OPENING_TTL, shared=True)

    def attempt(
        self, name: str, owner: str, ttl: float, fair: bool = False, renewed: bool = True
    ) -> ZooKeeperAttempt:
        return ZooKeeperAttempt(self, name, owner, ttl, renewed)

    def latch(self, name: str) -> ZooKeeperLatch:
        """The count-down latch on ``name``, in a persistent node of its own."""
        return ZooKeeperLatch(self, name)

    def shared_attempt(self, name: str, owner: str, ttl: float, share: Share) -> ZooKeeperAttempt:
        """A read, write or permit entry in ``name``'s line (see :mod:`.queue`)."""
        return ZooKeeperAttempt(self, name, owner, ttl, True, share)

    async def session(self, timeout: int, shared: bool) -> ZkSession:
        """This client's live session of ``timeout`` seconds, or one of its own."""
        current = self._sessions.get(timeout) if shared else None
        if current is not None and not current.ended:
            return current
        await blocking_call.onto_the_loop()  # a new session's client lives on the loop
        if not shared:
            own = await self._connect(timeout)
            self._own.add(own)
            return own
        opening = self._opening.get(timeout)
        if opening is None or opening.done():
            opening = asyncio.get_running_loop().create_task(self._connect(timeout))
            opening.add_done_callback(_seen)  # its callers may all have been cut off
            self._opening[timeout] = opening
        fresh = await asyncio.shield(opening)
        self._sessions[timeout] = fresh
        if current is not None:  # the ended one: its client reconnects on its own; stop it
            self._every.discard(current)
            await self._in_background(current.stop())
        return fresh

    async def _in_background(self, work: Any) -> None:
        task = (await blocking_call.running_loop()).create_task(_quietly(work))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _connect(self, timeout: int) -> ZkSession:
        session = ZkSession(self.options, timeout, self.url)
        self._every.add(session)  # even one whose caller was cancelled while it connected
        await session.start()
        return session

    def hold(self, owner: str, held: _Held) -> None:
        self._held[owner] = held

    async def release(self, name: str, owner: str) -> bool:
        held = self._held.pop(owner, None)
        if held is None or held.name != name:
            return await self._release_elsewhere(name, owner)
        held.session.let_go(held.path)
        if held.session.ended:  # its node went with its session
            return False
        try:
            queue = self.queue(name)
            return await self._delete(held.session, queue, held.path, held.token, held.recorded)
        finally:
            if held.own_session:
                await self._end_own(held.session)

    async def keep(self, name: str, owner: str, seconds: float) -> bool:
        """End ``owner``'s lease and keep ``name`` taken ``seconds`` more, by the server's
        clock (:mod:`.keep`); False if the lease was not held any more."""
        held = self._held.pop(owner, None)
        if held is None or held.name != name:
            return False
        held.session.let_go(held.path)
        if held.session.ended:
            return False
        queue = self.queue(name)
        mark, data = at_least.mark_path(queue), at_least.mark_data(owner, seconds)
        try:
            for write_mark in ("create", "set_data"):  # a mark left by an earlier keep: set
                transaction = held.session.client.transaction()
                if write_mark == "create":
                    transaction.create(mark, data)
                else:
                    transaction.set_data(mark, data)
                transaction.delete(held.path)
                transaction.set_data(queue, str(held.token).encode())
                try:
                    results = await held.session.call(transaction.commit_async())
                except SessionLost:
                    return False
                if not any(isinstance(result, Exception) for result in results):
                    return True
                if not isinstance(results[0], kz.NodeExistsError):
                    return False  # our node was gone: the lease had ended
            return False
        finally:
            if held.own_session:
                await self._end_own(held.session)

    async def _delete(
        self, session: ZkSession, queue: str, path: str, token: int, recorded: bool = True
    ) -> bool:
        """Delete a holder's node and record its token on the queue node, in one step
        (a shared line's entries record nothing: its last token names no one holder);
        if the reply is lost, the delete is sent again until it is answered."""
        record = (queue, str(token).encode()) if recorded else None
        transaction = session.client.transaction()
        transaction.delete(path)
        if record is not None:
            transaction.set_data(*record)
        try:
            results = await session.call(transaction.commit_async())
        except SessionLost:
            return False  # the node went with its session
        except FencelockError:
            session.delete_eventually(path, record)
            raise
        return not any(isinstance(result, Exception) for result in results)

    async def _release_elsewhere(self, name: str, owner: str) -> bool:
        """Release a lease another client holds, found by its owner's node name (an
        operator's ``fencelock`` command, a test's thief)."""
        session = await self.session(OPENING_TTL, shared=True)
        queue = self.queue(queues.queue_of_part(name))
        await self._caught_up(session, queue)
        entries = await self._line(session, queue)
        holding = [entry for entry in queues.holders(entries) if entry.owner == owner]
        if not holding:
            return await self._end_keep(session, queue, owner)
        path = f"{queue}/{holding[0].node}"
        stat = await session.call(session.client.exists_async(path))
        if stat is None:
            return False
        return await self._delete(session, queue, path, int(stat.czxid))

    async def _head(self, session: ZkSession, queue: str) -> _Head | None:
        """The holder's node, read: its token, and the session timeout it recorded."""
        try:
            children = await session.call(session.client.get_children_async(queue))
        except kz.NoNodeError:
            return None
        contenders = queues.contenders(children)
        for entry in contenders:
            try:
                data, stat = await session.call(session.client.get_async(f"{queue}/{entry.node}"))
            except kz.NoNodeError:  # it went while we looked: the next one holds
                continue
            timeout, waiters = queues.recorded_timeout(data), len(contenders) - 1
            return _Head(entry, int(stat.czxid), timeout, waiters, granted_at(stat))
        return None

    async def _end_own(self, session: ZkSession) -> None:
        self._own.discard(session)
        self._every.discard(session)
        with contextlib.suppress(FencelockError):
            await session.stop(None)

    async def renew(self, name: str, owner: str, ttl: float) -> bool | RenewedAsOf:
        held = self._held.get(owner)
        if held is None or held.name != name:
            return False
        session = held.session
        session.check_extends(ttl)
        if held.own_session:  # an extend: the lease now ends on the server later
            session.close_after(ttl)
        try:
            if held.path not in session.mine:  # its first renewal: from now on a watch
                await session.watch_mine(held.path)  # tells of a deletion, unasked
            as_of = await session.fresh(ttl * FRESH_FRACTION)
        except SessionLost:
            as_of = None
        if as_of is None or not session.holds(held.path):  # gone with its session, or deleted
            self._held.pop(owner, None)
            session.let_go(held.path)  # lost: nothing more to hear of it
            return False
        return RenewedAsOf(as_of)

    async def _caught_up(self, session: ZkSession, path: str) -> None:
        """Let the server this session reads from catch up with the leader on ``path``
        (``sync``): a follower may not yet have applied a write another client's
        server has already acknowledged, such as the create that granted a lease."""
        await session.call(session.client.sync_async(path))

    async def inspect(self, name: str) -> LockInfo | None:
        session = await self.session(OPENING_TTL, shared=True)
        whole = queues.queue_of_part(name)
        await self._caught_up(session, self.queue(whole))
        if whole != name:  # a holder of a shared line, as ``list`` names it
            entries = await self._line(session, self.queue(whole))
            parts = await self._holding(session, self.queue(whole), whole, entries)
            return next((info for info in parts if info.name == name), None)
        queue = self.queue(name)
        head = await self._head(session, queue)
        if head is not None:
            return head.info(name)
        kept = await self._kept_info(session, queue, name)
        if kept is not None:
            return kept
        try:
            data, _ = await session.call(session.client.get_async(queue))
        except kz.NoNodeError:
            return None
        return LockInfo(name, None, int(data or b"0"), None, 0)

    async def list(self, prefix: str) -> list[LockInfo]:
        session = await self.session(OPENING_TTL, shared=True)
        await self._caught_up(session, self.options.base)
        found: builtins.list[LockInfo] = []
        await self._walk(session, self.options.base, "", prefix, found)
        return sorted(found, key=lambda info: info.name)

    async def waiters(self, name: str) -> builtins.list[str]:
        """The owners of the contenders that wait (every one that does not hold), in
        sequence order; kazoo's own contenders have a uuid there."""
        session = await self.session(OPENING_TTL, shared=True)
        queue = self.queue(name)
        await self._caught_up(session, queue)
        entries = await self._line(session, queue)
        holding = queues.holders(entries)
        return [entry.owner for entry in entries if entry not in holding]

    async def _walk(
        self, session: ZkSession, path: str, name: str, prefix: str, found: builtins.list[LockInfo]
    ) -> None:
        """Held locks at and under ``path`` (the queue of ``name``) whose names match."""
        try:
            children = await session.call(session.client.get_children_async(path))
        except kz.NoNodeError:
            return
        entries = queues.contenders(children)
        infos: builtins.list[LockInfo] = []
        if name and entries:
            infos = await self._holding(session, path, name, entries)
        elif name and at_least.MARK in children:  # kept after its last lease
            kept = await self._kept_info(session, path, name)
            infos = [] if kept is None else [kept]
        elif name.endswith(".latch") and not children:  # a latch's persistent node
            with contextlib.suppress(kz.NoNodeError):
                data, stat = await session.call(session.client.get_async(path))
                infos = latches.listed(name, data, int(stat.czxid))
        found.extend(info for info in infos if info.name.startswith(prefix))
        for child in children:
            if queues.contender(child) is not None or child == at_least.MARK:
                continue
            deeper = f"{name}/{child}" if name else child
            if deeper.startswith(prefix) or prefix.startswith(deeper + "/"):
                await self._walk(session, f"{path}/{child}", deeper, prefix, found)

    async def _kept(
        self, session: ZkSession, queue: str
    ) -> tuple[at_least.AtLeastMark, int] | None:
        """The keep marked on a line, and the mark's version; None if there is none."""
        try:
            data, stat = await session.call(session.client.get_async(at_least.mark_path(queue)))
        except kz.NoNodeError:
            return None
        kept = at_least.read_mark(data, int(stat.mtime))
        return None if kept is None else (kept, int(stat.version))

    async def _end_keep(self, session: ZkSession, queue: str, owner: str) -> bool:
        """End ``owner``'s keep of a name now (an operator's forced release)."""
        found = await self._kept(session, queue)
        if found is None or found[0].owner != owner:
            return False
        try:
            delete = session.client.delete_async(at_least.mark_path(queue), version=found[1])
            await session.call(delete)
        except (kz.NoNodeError, kz.BadVersionError):
            return False
        return True

    async def _kept_info(self, session: ZkSession, queue: str, name: str) -> LockInfo | None:
        """A name kept and not held, as ``inspect`` shows it (by this host's clock)."""
        found = await self._kept(session, queue)
        if found is None or found[0].left_by_this_clock() <= 0:
            return None
        try:
            data, _ = await session.call(session.client.get_async(queue))
        except kz.NoNodeError:
            data = b"0"
        kept = found[0]
        return LockInfo(name, kept.owner, int(data or b"0"), kept.left_by_this_clock(), 0)

    async def _line(self, session: ZkSession, queue: str) -> builtins.list[queues.Contender]:
        try:
            return queues.contenders(await session.call(session.client.get_children_async(queue)))
        except kz.NoNodeError:
            return []

    async def _holding(
        self, session: ZkSession, queue: str, name: str, entries: builtins.list[queues.Contender]
    ) -> builtins.list[LockInfo]:
        """What holds ``name`` now: its head, or every holder of a shared line, each
        under its part's name (``NAME.rw/r/<seq>``, ``NAME.sem/p/<n>/<seq>``)."""
        if not queues.shared(name):
            head = await self._head(session, queue)
            return [] if head is None else [head.info(name)]
        infos: builtins.list[LockInfo] = []
        for entry in queues.holders(entries):
            try:
                data, stat = await session.call(session.client.get_async(f"{queue}/{entry.node}"))
            except kz.NoNodeError:
                continue
            part = queues.part_name(name, entry)
            timeout = queues.recorded_timeout(data)
            infos.append(
                LockInfo(part, entry.owner, int(stat.czxid), timeout, None, granted_at(stat))
            )
        return infos

    async def close(self) -> None:
        """Stop every session, one still connecting too (each within its bound)."""
        sessions, self._every = self._every, set()
        self._sessions, self._own = {}, set()
        opening, self._opening = [t for t in self._opening.values() if not t.done()], {}
        await asyncio.gather(*(_quietly(s.stop()) for s in sessions), *self._background)
        for task in opening:  # its session is stopped: it ends at once
            task.cancel()
        await asyncio.gather(*opening, return_exceptions=True)


async def _quietly(work: Any) -> None:
    with contextlib.suppress(FencelockError):
        await work


def _seen(task: asyncio.Task[Any]) -> None:
    """A session's opening has ended: its failure, if nobody awaits it any more, is no
    "Task exception was never retrieved" (each caller that does still gets it)."""
    if not task.cancelled():
        task.exception()


class ZooKeeperAttempt:
    """One contender: its node, once created, and the one it waits behind."""

    def __init__(
        self,
        backend: AsyncZooKeeperBackend,
        name: str,
        owner: str,
        ttl: float,
        renewed: bool,
        share: Share | None = None,
    ) -> None:
        self._backend, self._name, self._owner = backend, name, owner
        self._ttl, self._shared, self._share = ttl, renewed, share
        self._kind: queues.Kind = "lock" if share is None or share.kind == "write" else share.kind
        self._permits = 1 if share is None else share.permits
        self._seen: builtins.list[str] | None = None  # the line as last read (a permit's watch)
        self._queue = backend.queue(name)
        self._session: ZkSession | None = None
        self._node: str | None = None  # our contender's name, once created
        self._token = 0
        self._creating: Any = None  # the create sent (kazoo's result): its node may exist
        self._predecessor: str | None = None
        self._sole_ahead = False  # the predecessor is the only contender ahead (a plain lock)
        self._exclusive_ahead = False  # we and the predecessor are plain locks' contenders
        self._handed_at: float | None = None  # when the wait that saw it go began
        self._acquired = False
        self._interrupted = False  # by lock.cancel(): a wait returns at once
        self._watch: Watch | None = None  # the wait's, while it waits

    @property
    def idle(self) -> bool:
        """True while :meth:`close` has nothing to do (the lease is held, or no node was
        ever asked for): the blocking face then skips a hop onto the loop."""
        return self._acquired or self._session is None or self._creating is None

    async def try_acquire(self) -> AttemptResult:
        for _ in range(3):  # a session that ended under us is replaced, the node made again
            try:
                return await self._try()
            except SessionLost:
                self._session, self._node, self._creating = None, None, None
        raise SessionLost(f"ZooKeeper sessions for {self._name!r} kept ending as they began")

    async def _try(self) -> AttemptResult:
        handed = self._handed_over()
        if handed is not None:
            return handed
        if self._session is None or self._session.ended:
            self._session = await self._backend.session(session_timeout(self._ttl), self._shared)
            self._session.check_granted(self._ttl)
        session = self._session
        sent = clock.now()
        listing = await self._enter(session) if self._node is None else None
        assert self._node is not None
        children = await self._children(session, listing)
        session.confirmed(sent)
        path = f"{self._queue}/{self._node}"
        ahead = queues.ahead_of(children, self._node)
        if ahead is None:  # deleted by someone: queue again
            self._node = None
            return Busy(retry_after=0.0)
        if self._kind == "permit":
            other = queues.permits_in_use(ahead, self._permits)
            if other is not None:
                raise PermitsInUse(self._name, other, self._permits)
        waiting_for = queues.blockers(ahead, self._kind, self._permits)
        if not waiting_for and at_least.MARK in children:
            left = await self._kept_for(session, path)
            if left is not None:  # first in line, but the name is kept a while yet
                return Busy(retry_after=left)
        if waiting_for:
            if self._kind == "permit":  # any of those before it may leave: watch the line
                self._predecessor, self._seen = self._queue, children
            else:
                self._predecessor = f"{self._queue}/{waiting_for[-1].node}"
                self._exclusive_ahead = self._share is None and waiting_for[-1].kind == "lock"
                self._sole_ahead = self._exclusive_ahead and len(ahead) == 1
            return Busy(notified=True)
        return self._granted(session, path, sent, waited=listing is None)

    def _handed_over(self) -> Acquired | None:
        """The lease, without listing the line again, if the wait just ended saw the only
        contender ahead of us deleted: sequence numbers only grow, so nobody can be ahead
        now, and the deletion reached us on our session, so our ephemeral node was there
        then. Only within the part of the TTL a renewal would accept as fresh (the grant
        counts from when that wait began), and never where an at-least mark may keep the
        name (its write comes in the release's own transaction, so its watch fires first)."""
        handed, self._handed_at = self._handed_at, None
        session, node = self._session, self._node
        if handed is None or session is None or session.ended or node is None:
            return None
        if clock.now() - handed > self._ttl * FRESH_FRACTION:
            return None
        session.confirmed(handed)  # SessionLost if kazoo moved on to a new session
        return self._granted(session, f"{self._queue}/{node}", handed, waited=True)

    def _granted(self, session: ZkSession, path: str, sent: float, waited: bool) -> Acquired:
        self._acquired = True
        if waited:  # its node written again (not awaited): the write's time is the grant's
            session.client.set_async(path, queues.node_data(self._owner, session.negotiated))
        self._backend.hold(
            self._owner,
            _Held(self._name, path, self._token, session, not self._shared, self._share is None),
        )
        if not self._shared:  # a lease not renewed ends on the server by its TTL
            session.close_after(self._ttl)
        return Acquired(self._token, session=session.news_of(path), as_of=sent)

    async def _kept_for(self, session: ZkSession, path: str) -> float | None:
        """Seconds the name is still kept, by the server's clock (the time a write of
        our own node's data is stamped with); an ended keep's mark is deleted."""
        found = await self._backend._kept(session, self._queue)
        if found is None:
            return None
        kept, version = found
        data = queues.node_data(self._owner, session.negotiated)
        stat = await session.call(session.client.set_async(path, data))
        left = kept.left(int(stat.mtime))
        if left > 0:
            return left
        with contextlib.suppress(kz.NoNodeError, kz.BadVersionError):
            mark = at_least.mark_path(self._queue)
            await session.call(session.client.delete_async(mark, version=version))
        return None

    async def _children(self, session: ZkSession, listing: Any) -> builtins.list[str]:
        """The line's children: ``listing``'s (sent right behind our create, so one round
        trip serves both: a session's requests are answered in order), else listed now.
        A pipelined listing that missed our node (the create had to make the line's node
        first) is not taken to mean our node was deleted: it is listed again."""
        if listing is not None:
            with contextlib.suppress(kz.NoNodeError):
                children: builtins.list[str] = await session.call(listing)
                if self._node in children:
                    return children
        return await session.call(session.client.get_children_async(self._queue))  # type: ignore[no-any-return]

    async def _enter(self, session: ZkSession) -> Any:
        """Create our node at the end of the line (once, even if a reply was lost); the
        listing sent right behind the create, if it was sent."""
        if self._creating is not None:  # an earlier create's reply was lost or abandoned
            found = await self._find_mine(session)
            if found is not None:
                self._node, self._token = found
                return None
        self._creating = session.client.create_async(
            f"{self._queue}/{queues.node_prefix(self._owner, self._share)}",
            queues.node_data(self._owner, session.negotiated),
            ephemeral=True,
            sequence=True,
            makepath=True,
            include_data=True,
        )
        listing = session.client.get_children_async(self._queue)
        path, stat = await session.call(self._creating)
        self._node, self._token = path.rsplit("/", 1)[1], int(stat.czxid)
        return listing

    async def _find_mine(self, session: ZkSession) -> tuple[str, int] | None:
        try:
            children = await session.call(session.client.get_children_async(self._queue))
        except kz.NoNodeError:
            return None
        mine = queues.mine_among(children, self._owner)
        if mine is None:
            return None
        stat = await session.call(session.client.exists_async(f"{self._queue}/{mine}"))
        return None if stat is None else (mine, int(stat.czxid))

    async def wait(self, timeout: float) -> None:
        """Until our predecessor's node is deleted, our session ends, or ``timeout``."""
        session, predecessor = self._session, self._predecessor
        if session is None or predecessor is None:
            return
        self._predecessor = None
        with session.watching() as watch:
            self._watch = watch
            try:
                if not self._interrupted:  # set before _watch was: nothing woke this one
                    await self._wait_behind(session, predecessor, watch, timeout)
            finally:
                self._watch = None

    def interrupt(self) -> None:
        """From any thread: the wait under way returns now (stepped too), the next at once."""
        self._interrupted = True
        watch = self._watch
        if watch is not None:
            watch.wake()

    async def _wait_behind(
        self, session: ZkSession, predecessor: str, watch: Watch, timeout: float
    ) -> None:
        if predecessor == self._queue:  # the whole line: wait unless it changed already
            listing = session.client.get_children_async(predecessor, watch=watch.callback)
            if sorted(await session.call(listing)) == sorted(self._seen or []):
                await watch.fired(timeout)
            return
        if self._exclusive_ahead:
            await self._await_holder(session, predecessor, watch, timeout)
            return
        # The predecessor's children, watched: such a watch fires when the node is
        # deleted (it has no children), not when it is written, so the stamp of a
        # reader's grant wakes no writer behind it.
        try:
            await session.call(session.client.get_children_async(predecessor, watch.callback))
        except kz.NoNodeError:
            return  # gone already
        await watch.fired(timeout)

    async def _await_holder(
        self, session: ZkSession, predecessor: str, watch: Watch, timeout: float
    ) -> None:
        """Until the predecessor (a plain lock's contender, as we are) is deleted. Its data
        is watched: the stamp a holder granted after a wait writes on its node says it
        holds, so it alone is ahead of us, and its deletion then hands us the lease
        without a listing (:meth:`_handed_over`) unless an at-least mark appeared: that
        is watched from then on, and the release that writes one writes it in the same
        transaction as the deletion, before it, so its watch fires first."""
        deadline = clock.now() + timeout
        sole, self._sole_ahead = self._sole_ahead, False
        while True:
            began = clock.now()
            marked = None
            if sole:
                mark = at_least.mark_path(self._queue)
                marked = session.client.exists_async(mark, watch=watch.touch_callback)
            found = await session.call(session.client.exists_async(predecessor, watch.callback))
            if found is not None:
                await watch.fired(max(deadline - clock.now(), 0.0))
            if found is None or watch.deleted:
                if marked is not None and not watch.touched and await session.call(marked) is None:
                    self._handed_at = began
                return
            if self._interrupted or sole or not watch.changed or watch.touched:
                return  # news, a mark, a second write, or a cancel: look again
            if clock.now() >= deadline:
                return
            sole = True  # its grant's stamp: it holds, so it alone is ahead of us
            watch.rearm()

    async def close(self) -> None:
        """After success the node is the lock and stays; a waiter's node goes, even one
        whose create was abandoned in flight (its reply is awaited first)."""
        session, creating = self._session, self._creating
        if self._acquired or session is None or creating is None:
            return
        self._session = None
        if not self._shared:
            await self._backend._end_own(session)
            return
        node = self._node
        if node is None:
            with contextlib.suppress(FencelockError, *ANSWERS):
                path, _ = await session.call(creating)
                node = path.rsplit("/", 1)[1]
        if node is None:
            found = await self._find_mine(session)
            node = None if found is None else found[0]
        if node is not None:
            try:
                await session.call(session.client.delete_async(f"{self._queue}/{node}"))
            except (kz.NoNodeError, SessionLost):
                pass
            except FencelockError:  # not answered: it must not stay in the line
                session.delete_eventually(f"{self._queue}/{node}")
                raise
