"""``redlock://h1:p1,h2:p2,h3:p3``: Redlock over N independent Redis masters, with tokens.

Every request goes to all nodes at once, each bounded by a short per-node timeout,
and a step ends as soon as its outcome is decided (a quorum agreed, or can no
longer agree): a hung node costs at most the timeout, never a stall. Tokens come
from the two-phase quorum counter of :mod:`fencelock.engine.redlock`. The asyncio
implementation is the only one; the sync client runs it on a loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import secrets
import sys
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import redis.asyncio

from fencelock import clock
from fencelock.backends.base import Acquired, AttemptResult, LockInfo
from fencelock.backends.redis_async import AsyncReleaseListener
from fencelock.backends.redis_common import (
    LockKeys,
    RedisOptions,
    lua,
    ms,
    name_of,
    redis_options,
    scan_pattern,
    translated,
)
from fencelock.engine import redlock as plan
from fencelock.engine.urls import ParsedURL
from fencelock.errors import BackendUnavailable

DEFAULT_NODE_TIMEOUT = 0.1

if sys.version_info >= (3, 11):

    async def within(awaitable: Awaitable[T], seconds: float) -> T:
        """Await with a deadline, without the extra task ``wait_for`` costs before 3.12."""
        async with asyncio.timeout(seconds):
            return await awaitable

else:  # pragma: no cover - Python 3.10

    async def within(awaitable: Awaitable[T], seconds: float) -> T:
        return await asyncio.wait_for(awaitable, seconds)


T = TypeVar("T")
Reply = Any  # a node's parsed answer, or plan.NodeError


class Node:
    """One Redis master: its client, scripts and release listener."""

    def __init__(self, options: RedisOptions) -> None:
        self.options = options
        self.where = options.where
        self.redis: Any = redis.asyncio.Redis(**options.client_kwargs(asyncio=True))
        self.phase1 = self.redis.register_script(lua("redlock_phase1"))
        self.phase2 = self.redis.register_script(lua("redlock_phase2"))
        self.release = self.redis.register_script(lua("release"))
        self.renew = self.redis.register_script(lua("renew"))
        self.listener = AsyncReleaseListener(self.redis)

    async def close(self) -> None:
        await self.listener.close()
        await self.redis.aclose()


def node_options(parsed: ParsedURL) -> list[RedisOptions]:
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

    async def _take(self) -> AttemptResult:
        self._tries += 1
        owner = self._owner if self._tries == 1 else secrets.token_hex(20)
        return await self._backend.take(self._keys, owner, self._ttl)

    async def try_acquire(self) -> AttemptResult:
        result = await self._take()
        if isinstance(result, Acquired) or self._event is not None:
            return result
        self._event = asyncio.Event()
        await self._backend.watch(self._keys.channel, self._event)
        return await self._take()

    async def wait(self, timeout: float) -> None:
        if self._event is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._event.wait(), timeout)
            self._event.clear()

    async def close(self) -> None:
        if self._event is not None:
            self._backend.unwatch(self._keys.channel, self._event)
            self._event = None


class AsyncRedlockBackend:
    """Leases on a quorum of independent Redis masters."""

    supports_fair = False

    def __init__(self, parsed: ParsedURL) -> None:
        self.url = parsed.redacted
        self.nodes = [Node(options) for options in node_options(parsed)]
        self.timeout = self.nodes[0].options.timeout
        self._background: set[asyncio.Task[Any]] = set()
        # Owners given up (released or abandoned): a phase-1 win for one of them that
        # arrives late left a key behind, and is undone at once.
        self._finished: OrderedDict[str, None] = OrderedDict()

    def attempt(self, name: str, owner: str, ttl: float, fair: bool = False) -> RedlockAttempt:
        return RedlockAttempt(self, name, owner, ttl)

    async def take(self, keys: LockKeys, owner: str, ttl: float) -> AttemptResult:
        n, q = len(self.nodes), plan.quorum(len(self.nodes))
        started = clock.now()
        firsts = await self._fan_out(
            lambda node: self._phase1(node, keys, owner, ttl),
            lambda done: _count(done, plan.NodeWon) >= q or _count_not(done, plan.NodeWon) > n - q,
            late=lambda i, reply: self._late_phase1(keys, owner, i, reply),
        )
        step = plan.decide_phase_one(firsts, ttl, started, clock.now())
        if isinstance(step, plan.Stamp):
            seconds = await self._fan_out(
                lambda node: self._on(node, node.phase2, keys, [owner, str(step.token)]),
                lambda done: (
                    sum(r is True for r in done) >= q
                    or sum(r is not True and r is not None for r in done) > len(step.nodes) - q
                ),
                only=step.nodes,
            )
            done = plan.decide_phase_two(step, dict(enumerate(seconds)), clock.now())
            if isinstance(done, plan.Confirmed):
                return Acquired(done.token, owner)
            step_abort = done
        else:
            step_abort = step
        self._release_everywhere(keys, owner)
        failed = [i for i, r in enumerate(firsts) if _answered_error(r)]
        if len(failed) > n - q:  # replies merely not awaited do not count as failures
            raise self._unreachable(failed, firsts)
        return plan.busy_result(step_abort, random.random)

    def _late_phase1(self, keys: LockKeys, owner: str, index: int, reply: Reply) -> None:
        if isinstance(reply, plan.NodeWon) and owner in self._finished:
            self._background_release(keys, owner, [self.nodes[index]])

    def _finish(self, owner: str) -> None:
        self._finished[owner] = None
        while len(self._finished) > 4096:
            self._finished.popitem(last=False)

    async def _phase1(self, node: Node, keys: LockKeys, owner: str, ttl: float) -> Reply:
        reply = await node.phase1(keys=[keys.lock, keys.token], args=[owner, ms(ttl)])
        if int(reply[0]) == 1:
            return plan.NodeWon(int(reply[1]))
        pttl = int(reply[1])
        return plan.NodeBusy(pttl / 1000 if pttl >= 0 else None)

    async def _on(self, node: Node, script: Any, keys: LockKeys, args: list[str]) -> Reply:
        return bool(await script(keys=[keys.lock, keys.token], args=args))

    async def _fan_out(
        self,
        call: Callable[[Node], Awaitable[Reply]],
        decided: Callable[[list[Reply]], bool],
        only: Sequence[int] | None = None,
        late: Callable[[int, Reply], None] | None = None,
    ) -> list[Reply]:
        """Send ``call`` to the nodes at once; return when ``decided`` or all answered.

        Replies still missing are NodeError("pending"); their requests go on in the
        background, bounded by the per-node timeout, and ``late(i, reply)`` sees them.
        """
        indexes = list(range(len(self.nodes))) if only is None else list(only)
        replies: list[Reply] = [None] * len(self.nodes)
        tasks = {asyncio.ensure_future(self._bounded(call, self.nodes[i])): i for i in indexes}
        pending = set(tasks)
        while pending and not decided(replies):
            finished, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in finished:
                replies[tasks[task]] = task.result()
        for task in pending:
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            if late is not None:
                task.add_done_callback(functools.partial(_report_late, late, tasks[task]))
        return [plan.NodeError("pending") if r is None else r for r in replies]

    async def _bounded(
        self, call: Callable[[Node], Awaitable[T]], node: Node
    ) -> T | plan.NodeError:
        try:
            return await within(call(node), self.timeout)
        except asyncio.TimeoutError:
            return plan.NodeError(f"{node.where}: no reply within {self.timeout}s")
        except Exception as exc:  # a driver error of any kind is this node's failure
            return plan.NodeError(f"{node.where}: {_describe(exc)}")

    def _release_everywhere(self, keys: LockKeys, owner: str) -> None:
        """Undo a failed try on every node, quietly: waking rivals would split them again."""
        self._finish(owner)
        self._background_release(keys, owner, self.nodes)

    def _background_release(self, keys: LockKeys, owner: str, nodes: Sequence[Node]) -> None:
        for node in nodes:
            task = asyncio.ensure_future(
                self._bounded(lambda nd: nd.release(keys=[keys.lock], args=[owner, ""]), node)
            )
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    def _unreachable(self, failed: Sequence[int], replies: Sequence[Reply]) -> BackendUnavailable:
        reasons = (
            "; ".join(
                r.reason for r in replies if isinstance(r, plan.NodeError) and r.reason != "pending"
            )
            or "no replies"
        )
        return BackendUnavailable(
            f"redlock: {len(failed)} of {len(self.nodes)} nodes unavailable, no quorum of "
            f"{plan.quorum(len(self.nodes))} possible ({reasons})"
        )

    async def watch(self, channel: str, event: asyncio.Event) -> None:
        await asyncio.gather(
            *(
                self._bounded(lambda nd: nd.listener.watch(channel, event), node)
                for node in self.nodes
            )
        )

    def unwatch(self, channel: str, event: asyncio.Event) -> None:
        for node in self.nodes:
            node.listener.unwatch(channel, event)

    async def release(self, name: str, owner: str) -> bool:
        keys = LockKeys.of(name)
        self._finish(owner)
        q = plan.quorum(len(self.nodes))
        replies = await self._fan_out(
            lambda node: self._on_lock(node.release, keys, [owner, keys.channel]),
            lambda done: sum(r is True for r in done) >= q,
        )
        return plan.decide_release(replies)

    async def renew(self, name: str, owner: str, ttl: float) -> bool:
        keys = LockKeys.of(name)
        n, q = len(self.nodes), plan.quorum(len(self.nodes))
        replies = await self._fan_out(
            lambda node: self._on_lock(node.renew, keys, [owner, ms(ttl)]),
            lambda done: sum(r is True for r in done) >= q or sum(r is False for r in done) > n - q,
        )
        if sum(r is True for r in replies) >= q:
            return True
        if sum(r is False for r in replies) > n - q:
            return False
        raise self._unreachable(
            [i for i, r in enumerate(replies) if isinstance(r, plan.NodeError)], replies
        )

    async def _on_lock(self, script: Any, keys: LockKeys, args: list[Any]) -> bool:
        return bool(await script(keys=[keys.lock], args=args))

    async def inspect(self, name: str) -> LockInfo | None:
        keys = LockKeys.of(name)
        replies = await asyncio.gather(
            *(
                self._bounded(
                    lambda nd: (
                        nd.redis.pipeline(transaction=False)
                        .get(keys.lock)
                        .pttl(keys.lock)
                        .get(keys.token)
                        .execute()
                    ),
                    node,
                )
                for node in self.nodes
            )
        )
        answers = [r for r in replies if not isinstance(r, plan.NodeError)]
        if len(answers) < plan.quorum(len(self.nodes)):
            raise self._unreachable(
                [i for i, r in enumerate(replies) if isinstance(r, plan.NodeError)], replies
            )
        return _quorum_view(name, answers, plan.quorum(len(self.nodes)))

    async def list(self, prefix: str) -> list[LockInfo]:
        names: set[str] = set()
        for node in self.nodes:
            try:
                with translated(node.where):
                    async for key in node.redis.scan_iter(match=scan_pattern(prefix)):
                        names.add(name_of(key))
            except BackendUnavailable:
                continue
        infos = [await self.inspect(name) for name in sorted(names)]
        return [i for i in infos if i is not None and i.held]

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*(node.close() for node in self.nodes), return_exceptions=True)


def _quorum_view(name: str, answers: list[list[Any]], q: int) -> LockInfo | None:
    owners: dict[str, list[int]] = {}
    tokens = [int(token) for _, _, token in answers if token is not None]
    for owner, pttl, _ in answers:
        if owner is not None:
            owners.setdefault(owner, []).append(int(pttl))
    if not owners and not tokens:
        return None
    holder = next((o for o, ttls in owners.items() if len(ttls) >= q), None)
    remaining = None
    if holder is not None:
        remaining = sorted(owners[holder], reverse=True)[q - 1] / 1000
    return LockInfo(name=name, owner=holder, token=max(tokens, default=0), remaining=remaining)


def _report_late(late: Callable[[int, Reply], None], index: int, task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        late(index, task.result())


def _answered_error(reply: Reply) -> bool:
    return isinstance(reply, plan.NodeError) and reply.reason != "pending"


def _count(replies: list[Reply], kind: type) -> int:
    return sum(isinstance(r, kind) for r in replies)


def _count_not(replies: list[Reply], kind: type) -> int:
    return sum(r is not None and not isinstance(r, kind) for r in replies)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class RedlockBackend:
    """The blocking face: the asyncio implementation on a loop thread."""

    def __new__(cls, parsed: ParsedURL) -> Any:
        from fencelock.backends.loop_thread import LoopThreadBackend

        node_options(parsed)  # fail fast on bad input, in the caller's thread
        return LoopThreadBackend(lambda: AsyncRedlockBackend(parsed))
