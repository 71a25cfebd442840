"""``redlock://h1:p1,h2:p2,h3:p3``: Redlock over N independent Redis masters, with tokens.

Every request goes to all nodes at once, each bounded by a short per-node timeout,
and a step ends as soon as its outcome is decided (a quorum agreed, or can no
longer agree): a hung node costs at most the timeout, never a stall. Tokens come
from the two-phase quorum counter of :mod:`fencelock.engine.redlock`. The lock
scripts run on fencelock's own pipelined connections (:mod:`.node`, one
per node, no task per request), and so do waiters' subscriptions to releases
(:mod:`.listener`); ``inspect`` and ``list`` use redis-py. The asyncio
implementation is the only one; the sync client runs it on a loop shared by its
calling threads (:mod:`.shared_loop`).
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import math
import random
from collections import OrderedDict
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

import redis.asyncio

from fencelock import clock, forking
from fencelock.aio import TIMEOUTS, within
from fencelock.backends.base import (
    Acquired,
    AttemptResult,
    Capabilities,
    LockInfo,
    RenewsEach,
)
from fencelock.backends.redis.errors import translated
from fencelock.backends.redis.options import RedisOptions, redis_options
from fencelock.backends.redis.resp import RawReply, Script
from fencelock.backends.redis.scripts import LockKeys, lua, ms, name_of, scan_pattern
from fencelock.backends.redlock.listener import ReleaseListener, Waiters
from fencelock.backends.redlock.node import NodeLink
from fencelock.backends.redlock.round import (
    PENDING,
    Reply,
    Round,
    boolean_reply,
    phase_one_reply,
)
from fencelock.backends.wakeup import await_then_rearm
from fencelock.engine import redlock as plan
from fencelock.engine.urls import ParsedURL
from fencelock.errors import BackendUnavailable, ConfigError, LeaseLost
from fencelock.holder import new_identity

T = TypeVar("T")
DEFAULT_NODE_TIMEOUT = 0.1
PHASE1 = Script(lua("redlock_phase1"))
PHASE2 = Script(lua("redlock_phase2"))
RELEASE = Script(lua("redlock_release"))
RENEW = Script(lua("renew"))
# Owners given up remembered for late phase-1 wins (a late win arrives within the
# per-node timeout, so this only has to outlast a burst of failed tries).
FINISHED_REMEMBERED = 4096
# Trust bounds of held leases remembered for their renewals; a lease beyond this many
# is renewed against the validity alone (its lease still stops at its own bound).
TRUSTED_REMEMBERED = 65536


def _ignore(answer: RawReply) -> None:
    pass


class Node:
    """One Redis master: the scripts' connection, and redis-py for everything else."""

    def __init__(self, options: RedisOptions, waiters: Waiters) -> None:
        self.options = options
        self.where = options.where
        self.link = NodeLink(options, (PHASE1, PHASE2, RELEASE, RENEW))
        self.redis: Any = redis.asyncio.Redis(**options.client_kwargs(asyncio=True))
        self.listener = ReleaseListener(options, waiters)

    async def close(self) -> None:
        await self.link.close()
        await self.listener.close()
        await self.redis.aclose()


def node_options(parsed: ParsedURL) -> list[RedisOptions]:
    if "keys" in parsed.options:
        raise ConfigError(
            f"option keys= is for redis:// (a lock at its name, where redis-py's Lock keeps "
            f"it); Redlock keeps its keys under fencelock:{{NAME}} on every node: "
            f"{parsed.redacted!r}"
        )
    hosts = plan.validate_nodes([(h, p or 6379) for h, p in parsed.hosts])
    options = [redis_options(parsed, host) for host in hosts]
    if "timeout" not in parsed.options:
        options = [_with_timeout(o, DEFAULT_NODE_TIMEOUT) for o in options]
    return options


def _with_timeout(options: RedisOptions, timeout: float) -> RedisOptions:
    from dataclasses import replace

    return replace(options, timeout=timeout, connect_timeout=min(options.connect_timeout, timeout))


class RedlockAttempt:
    """One acquisition. Every try stores a fresh owner (20 random bytes), so a late
    reply or release of an earlier, abandoned try can never touch a later one."""

    def __init__(self, backend: AsyncRedlockBackend, name: str, owner: str, ttl: float) -> None:
        self._backend, self._owner, self._ttl = backend, owner, ttl
        self._keys = LockKeys.of(name)
        self._event: asyncio.Event | None = None
        self._tries = 0
        self._acquired = False

    @property
    def idle(self) -> bool:
        """True while :meth:`close` has nothing to do (no release watch to drop)."""
        return self._event is None

    async def _take(self) -> AttemptResult:
        self._tries += 1
        owner = self._owner if self._tries == 1 else new_identity(self._owner)
        result = await self._backend.take(self._keys, owner, self._ttl)
        self._acquired = isinstance(result, Acquired)
        return result

    async def try_acquire(self) -> AttemptResult:
        result = await self._take()
        if isinstance(result, Acquired):
            return result
        first = self._event is None
        if self._event is None:
            self._event = asyncio.Event()
        # A release that came before the watch took effect went unheard: try again.
        # (Later tries are watched throughout, unless a node's subscription was lost.)
        if await self._backend.watch(self._keys.channel, self._event) or first:
            return await self._take()
        return result

    async def wait(self, timeout: float) -> None:
        await await_then_rearm(self._event, timeout)

    async def close(self) -> None:
        if self._event is not None:
            self._backend.unwatch(self._keys.channel, self._event, self._acquired)
            self._event = None


class AsyncRedlockBackend(RenewsEach):
    """Leases on a quorum of independent Redis masters."""

    capabilities = Capabilities(
        fair=False,
        renews_in_batches=True,  # each on its own, pipelined on the nodes' connections
    )

    def outlives_client(self, renewed: bool) -> bool:
        """Whether a lease left to its TTL stays on the server after the client closes."""
        return True

    def __init__(self, parsed: ParsedURL) -> None:
        self.url = parsed.redacted
        self.request_bound = parsed.request_bound
        self._options = node_options(parsed)
        self._connect()
        self.timeout = self.nodes[0].options.timeout
        self._quorum = plan.quorum(len(self.nodes))
        # Owners given up (released or abandoned): a phase-1 win for one of them that
        # arrives late left a key behind, and is undone at once.
        self._finished: OrderedDict[str, None] = OrderedDict()
        # Held leases' trust bounds (``started + ttl - drift``) by owner: a renewal
        # that answers after its lease's bound does not bring the lease back.
        self._trusted: OrderedDict[str, float] = OrderedDict()
        self._closed = False
        forking.register(self)

    def _connect(self) -> None:
        """This process's connections to the nodes and its waiters (none opened yet)."""
        self.watching = Waiters()  # this client's waiters by channel
        self.nodes = [Node(options, self.watching) for options in self._options]
        self.links = [node.link for node in self.nodes]

    def _reset_after_fork(self) -> None:
        """In a forked child: the parent's connections (on its loop) stay its own."""
        if not self._closed:
            forking.abandon(self.nodes, self.watching)
            self._connect()
            self._trusted = OrderedDict()

    async def open(self) -> None:
        """Nodes are dialled on first use: Redlock works on with a minority of them down."""

    def attempt(
        self, name: str, owner: str, ttl: float, fair: bool = False, renewed: bool = True
    ) -> RedlockAttempt:
        return RedlockAttempt(self, name, owner, ttl)

    async def take(self, keys: LockKeys, owner: str, ttl: float) -> AttemptResult:
        started = clock.now()
        late = functools.partial(self._late_phase1, keys, owner)
        first = Round(self.links, self._quorum, phase_one_reply, late=late)
        try:
            firsts, outcome = await self._phases(first, keys, owner, ttl, started)
        except BaseException:  # cancelled (or failed): whatever phase 1 set must not linger
            self._release_everywhere(keys, owner)
            raise
        if isinstance(outcome, plan.Confirmed):
            self._trust(owner, outcome.trusted_until)
            return Acquired(outcome.token, owner)
        self._release_everywhere(keys, owner)
        failed = [i for i, r in enumerate(firsts) if _answered_error(r)]
        if len(failed) > len(self.nodes) - self._quorum:  # replies not awaited do not count
            raise await self._unreachable_after(first)
        if outcome.retry_after is not None and PENDING in firsts and not plan.held_by_one(firsts):
            # Decided before every node answered: the others may show that no single
            # owner holds it (a split vote), which is retried soon, not after a TTL.
            again = plan.decide_phase_one(await first.settled(), ttl, started, clock.now())
            outcome = again if isinstance(again, plan.Abort) else outcome
        return plan.busy_result(outcome, random.random)

    async def _phases(
        self, first: Round, keys: LockKeys, owner: str, ttl: float, started: float
    ) -> tuple[list[Reply], plan.Abort | plan.Confirmed]:
        """Phase 1, then phase 2 if it won: the phase-1 replies and the outcome."""
        first.send(PHASE1.call((keys.lock, keys.token), (owner, ms(ttl))), PHASE1)
        firsts = await first.outcome()
        step = plan.decide_phase_one(firsts, ttl, started, clock.now())
        if isinstance(step, plan.Abort):
            return firsts, step
        second = Round(self.links, self._quorum, boolean_reply)
        second.send(PHASE2.call((keys.lock, keys.token), (owner, step.token)), PHASE2, step.nodes)
        seconds = await second.outcome()
        return firsts, plan.decide_phase_two(step, dict(enumerate(seconds)), clock.now())

    def _late_phase1(self, keys: LockKeys, owner: str, index: int, reply: Reply) -> None:
        if isinstance(reply, plan.NodeWon) and owner in self._finished:
            self.links[index].send(RELEASE.call((keys.lock,), (owner, "")), _ignore, RELEASE)

    def _trust(self, owner: str, until: float) -> None:
        self._trusted[owner] = until
        self._trusted.move_to_end(owner)
        while len(self._trusted) > TRUSTED_REMEMBERED:
            self._trusted.popitem(last=False)

    def _finish(self, owner: str) -> None:
        self._trusted.pop(owner, None)
        self._finished[owner] = None
        while len(self._finished) > FINISHED_REMEMBERED:
            self._finished.popitem(last=False)

    def _release_everywhere(self, keys: LockKeys, owner: str) -> None:
        """Undo a failed try on every node, quietly: waking rivals would split them again.

        No waiting: each node runs its requests in order, so this release runs after
        our phase-1 request there; a phase-1 win it misses is undone as it arrives.
        """
        self._finish(owner)
        command = RELEASE.call((keys.lock,), (owner, ""))
        for link in self.links:
            link.send(command, _ignore, RELEASE)

    async def _unreachable_after(self, step: Round) -> BackendUnavailable:
        """The error for a step too few nodes answered, once every node has (or timed out)."""
        replies = await step.settled()
        return self._unreachable(_failed(replies), replies)

    def _unreachable(self, failed: Sequence[int], replies: Sequence[Reply]) -> BackendUnavailable:
        reasons = (
            "; ".join(
                r.reason for r in replies if isinstance(r, plan.NodeError) and r.reason != "pending"
            )
            or "no replies"
        )
        return BackendUnavailable(
            f"redlock: {len(failed)} of {len(self.nodes)} nodes unavailable, no quorum of "
            f"{self._quorum} possible ({reasons})"
        )

    async def watch(self, channel: str, event: asyncio.Event) -> bool:
        """Queue ``event`` for releases of ``channel``; True if a node was subscribed anew.

        Returns once enough nodes confirmed that any quorum a holder has includes
        one of them (``n - quorum + 1``), or that many can no longer confirm; the
        others' confirmations (each within the per-node timeout) come later.
        """
        key = channel.encode()
        self.watching.add(key, event)
        asked = [node.listener.subscribe(key) for node in self.nodes]
        pending = [confirmation for confirmation in asked if confirmation is not None]
        if pending:
            already = len(asked) - len(pending)
            await _enough(pending, len(self.nodes) - self._quorum + 1 - already)
        return bool(pending)

    def unwatch(self, channel: str, event: asyncio.Event, acquired: bool) -> None:
        key = channel.encode()
        if self.watching.remove(key, event, pass_on=not acquired):
            for node in self.nodes:
                node.listener.idle(key)

    async def release(self, name: str, owner: str) -> bool:
        """Compare-and-delete on every node; raises BackendUnavailable if too few answered."""
        keys = LockKeys.of(name)
        self._finish(owner)
        step = Round(self.links, self._quorum, boolean_reply, errors_say_no=False)
        step.send(RELEASE.call((keys.lock,), (owner, keys.channel)), RELEASE)
        released = plan.decide_release(await step.outcome())
        if released is None:
            replies = await step.settled()  # decided early with nodes still to answer
            released = plan.decide_release(replies)
            if released is None:
                raise self._unconfirmed_release(name, replies)
        return released

    def _unconfirmed_release(self, name: str, replies: Sequence[Reply]) -> BackendUnavailable:
        failed = _failed(replies)
        reasons = "; ".join(replies[i].reason for i in failed)
        return BackendUnavailable(
            f"redlock: release of {name!r} not confirmed: {len(failed)} of {len(self.nodes)} "
            f"nodes did not answer, so fewer than a quorum of {self._quorum} did ({reasons}); "
            "the lease's keys left on them expire by their TTL"
        )

    async def renew(self, name: str, owner: str, ttl: float) -> bool:
        """Compare-and-extend on every node; True if :func:`plan.decide_extend` says it held.

        False if it was lost; raises BackendUnavailable if too few nodes answered to
        tell, LeaseLost if a quorum extended it only after the lease's safe time.
        """
        keys = LockKeys.of(name)
        started = clock.now()
        step = Round(self.links, self._quorum, boolean_reply, errors_say_no=False)
        step.send(RENEW.call((keys.lock,), (owner, ms(ttl))), RENEW)
        replies = await step.outcome()
        until = self._trusted.get(owner, math.inf)
        bound = plan.decide_extend(replies, ttl=ttl, started=started, now=clock.now(), until=until)
        if bound is not None:
            self._trust(owner, bound)
            return True
        why = plan.why_not_extended(replies)
        if why is plan.NotExtended.LOST:
            self._trusted.pop(owner, None)
            return False
        if why is plan.NotExtended.TOO_SLOW:  # the bound stays: later renewals are late too
            raise LeaseLost(f"redlock: lease on {name!r} not extended: {why.value}")
        failed = _failed(replies)
        reasons = "; ".join(replies[i].reason for i in failed)
        raise BackendUnavailable(
            f"redlock: cannot tell whether the lease on {name!r} was extended: {len(failed)} "
            f"of {len(self.nodes)} nodes unavailable ({reasons})"
        )

    async def _bounded(self, node: Node, work: Awaitable[T]) -> T | plan.NodeError:
        """``work`` on ``node`` within the per-node timeout, or that node's failure."""
        try:
            return await within(self.timeout, work)
        except TIMEOUTS:
            return plan.NodeError(f"{node.where} did not answer within {self.timeout:g}s")
        except Exception as exc:  # a driver error of any kind is this node's failure
            return plan.NodeError(f"{node.where}: {_describe(exc)}")

    async def inspect(self, name: str) -> LockInfo | None:
        keys = LockKeys.of(name)
        replies = await asyncio.gather(
            *(
                self._bounded(
                    node,
                    node.redis.pipeline(transaction=False)
                    .get(keys.lock)
                    .pttl(keys.lock)
                    .get(keys.token)
                    .execute(),
                )
                for node in self.nodes
            )
        )
        answers = [r for r in replies if not isinstance(r, plan.NodeError)]
        if len(answers) < self._quorum:
            raise self._unreachable(
                [i for i, r in enumerate(replies) if isinstance(r, plan.NodeError)], replies
            )
        return _quorum_view(name, answers, self._quorum, len(self.nodes))

    async def list(self, prefix: str) -> list[LockInfo]:
        """Held locks; raises BackendUnavailable unless a quorum of nodes answered.

        A lock held on a quorum has a key on at least one node of any other quorum,
        so the names a quorum of nodes knows are all there is to inspect.
        """
        scans = await asyncio.gather(*(self._names(node, prefix) for node in self.nodes))
        failed = _failed(scans)
        if len(self.nodes) - len(failed) < self._quorum:
            raise self._unreachable(failed, scans)
        names = set().union(*(scan for scan in scans if not isinstance(scan, plan.NodeError)))
        infos = [await self.inspect(name) for name in sorted(names)]
        return [i for i in infos if i is not None and i.held]

    async def waiters(self, name: str) -> builtins.list[str] | None:
        """None: independent masters keep no line in common."""
        return None

    async def _names(self, node: Node, prefix: str) -> set[str] | plan.NodeError:
        try:
            with translated(node.where):
                return {
                    name_of(key) async for key in node.redis.scan_iter(match=scan_pattern(prefix))
                }
        except BackendUnavailable as exc:
            return plan.NodeError(str(exc))

    async def close(self) -> None:
        self._closed = True
        await asyncio.gather(*(node.close() for node in self.nodes), return_exceptions=True)


def _quorum_view(name: str, answers: list[list[RawReply]], q: int, n: int) -> LockInfo | None:
    view = plan.quorum_view(name, [(owner, pttl, token) for owner, pttl, token in answers], q, n)
    return None if view is None else LockInfo(name, *view)


async def _enough(confirmations: Sequence[asyncio.Future[bool]], need: int) -> None:
    """Return once ``need`` of ``confirmations`` are True, or so many False that they cannot be."""
    if need <= 0:
        return
    decided = asyncio.get_running_loop().create_future()
    spare = len(confirmations) - need
    counts = {True: 0, False: 0}

    def count(confirmation: asyncio.Future[bool]) -> None:
        if decided.done():
            return
        counts[confirmation.result()] += 1
        if counts[True] >= need or counts[False] > spare:
            decided.set_result(None)

    for confirmation in confirmations:
        confirmation.add_done_callback(count)
    await decided


def _failed(replies: Sequence[Reply]) -> list[int]:
    return [i for i, r in enumerate(replies) if isinstance(r, plan.NodeError)]


def _answered_error(reply: Reply) -> bool:
    return isinstance(reply, plan.NodeError) and reply.reason != "pending"


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
