"""One Redlock step: the same request to several nodes, over as soon as its outcome is known.

The request is written to every node at once; there is no task per node. The step
is decided when a quorum said yes or so many said no that a quorum no longer can
(the rules of :mod:`fencelock.engine.redlock`), or when every node answered: each
request is answered by its node's reply or, within the per-node timeout, by an
error (see :mod:`fencelock.backends.redlock.node`). Replies that come after the
decision go to ``late`` (failures that come after it are dropped); :meth:`Round.settled`
waits for them too, for an error message that counts every node.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from typing import Any

from fencelock.backends.redis.errors import refused
from fencelock.backends.redis.resp import RawReply, ReplyError, Script
from fencelock.backends.redlock.node import NodeLink
from fencelock.engine import redlock as plan
from fencelock.errors import BackendUnavailable

Reply = Any  # what ``convert`` makes of a node's answer: plan.NodeWon, True, plan.NodeError...
Convert = Callable[[RawReply, str], Reply]
Late = Callable[[int, Reply], None]
PENDING = plan.NodeError("pending")  # no answer when the step was decided


class Round:
    """Replies of one step, in node order; ``await outcome()`` returns at the decision.

    A reply counts as yes if it is ``True`` or :class:`plan.NodeWon`, as no
    otherwise; a :class:`plan.NodeError` counts as no only if ``errors_say_no``.
    """

    def __init__(
        self,
        links: Sequence[NodeLink],
        quorum: int,
        convert: Convert,
        errors_say_no: bool = True,
        late: Late | None = None,
    ) -> None:
        self._links, self._quorum, self._convert = links, quorum, convert
        self._errors_say_no, self._late = errors_say_no, late
        self.replies: list[Reply] = [None] * len(links)
        loop = asyncio.get_running_loop()
        self._decided: asyncio.Future[list[Reply]] = loop.create_future()
        self._settled: asyncio.Future[None] | None = None
        self._after: dict[int, RawReply] = {}  # answers that came after the decision
        self._left = self._spare = self._yes = self._no = 0

    def send(self, command: bytes, script: Script, only: Sequence[int] | None = None) -> None:
        """Write ``command`` (an EVALSHA of ``script``) to the nodes ``only`` (default all)."""
        indexes = range(len(self._links)) if only is None else only
        self._left = len(indexes)
        self._spare = self._left - self._quorum
        for i in indexes:
            self._links[i].send(command, functools.partial(self._deliver, i), script)

    @property
    def decided(self) -> bool:
        """True once the outcome is known (or nobody waits for it any more)."""
        return self._decided.done()

    async def outcome(self) -> list[Reply]:
        """Wait for the decision; replies still missing then are :data:`PENDING`."""
        return await self._decided

    async def settled(self) -> list[Reply]:
        """Wait for every node's answer (each comes within the per-node timeout)."""
        if self._left > 0:
            self._settled = asyncio.get_running_loop().create_future()
            await self._settled
        for index, answer in self._after.items():
            self.replies[index] = self._reply(index, answer)
        self._after.clear()
        return [PENDING if r is None else r for r in self.replies]

    def _deliver(self, index: int, answer: RawReply) -> None:
        self._left -= 1
        if self._decided.done():  # decided, or the waiter was cancelled
            self._after[index] = answer  # read by settled(), if anyone asks
            # Only a reply can have changed something; a late failure (a hung node's
            # requests timing out together) carries no news.
            if self._late is not None and not isinstance(answer, BackendUnavailable):
                self._late(index, self._reply(index, answer))
            if self._left == 0 and self._settled is not None and not self._settled.done():
                self._settled.set_result(None)
            return
        reply = self._reply(index, answer)
        self.replies[index] = reply
        if reply is True or isinstance(reply, plan.NodeWon):
            self._yes += 1
        elif self._errors_say_no or not isinstance(reply, plan.NodeError):
            self._no += 1
        if self._left == 0 or self._yes >= self._quorum or self._no > self._spare:
            self._decided.set_result([PENDING if r is None else r for r in self.replies])

    def _reply(self, index: int, answer: RawReply) -> Reply:
        where = self._links[index].where
        try:
            return self._convert(answer, where)
        except Exception:  # a reply of the wrong shape is that node's failure
            return plan.NodeError(f"{where} sent an unexpected reply: {answer!r}")


def node_error(answer: RawReply, where: str) -> plan.NodeError | None:
    """The node's failure, if ``answer`` is one (an error reply, or no reply at all)."""
    if isinstance(answer, ReplyError):
        return plan.NodeError(str(refused(where, answer.text)))
    if isinstance(answer, BackendUnavailable):
        return plan.NodeError(str(answer))
    return None


def phase_one_reply(answer: RawReply, where: str) -> Reply:
    """Phase 1's ``{1, counter}`` or ``{0, pttl, owner}`` as :class:`plan.NodeWon` or
    ``NodeBusy``."""
    error = node_error(answer, where)
    if error is not None:
        return error
    if not isinstance(answer, list) or len(answer) not in (2, 3):
        raise TypeError(answer)
    taken, value = answer[0], answer[1]
    if taken == 1 and len(answer) == 2:
        return plan.NodeWon(int(value))
    if taken != 0:
        raise TypeError(answer)
    pttl = int(value)
    owner = answer[2].decode() if len(answer) == 3 and isinstance(answer[2], bytes) else None
    return plan.NodeBusy(pttl / 1000 if pttl >= 0 else None, owner)


def boolean_reply(answer: RawReply, where: str) -> Reply:
    """A compare-and-set script's 1 or 0 as ``True`` or ``False``."""
    error = node_error(answer, where)
    if error is not None:
        return error
    if not isinstance(answer, int):
        raise TypeError(answer)
    return answer == 1
