"""Invariants on what a run did, each written once, as ledgers fed with its events: the
world and its workloads feed them as a run goes, and tests feed them histories of their
own (a broken history must be told). A check says what is wrong, in a sentence, or
None; the caller raises it (``World.violated``).

Times are true times (the simulation's, not a client's own clock); a token is what the
server issued with a grant."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

# --- tokens grow ----------------------------------------------------------------------


@dataclass(frozen=True)
class Grant:
    """A grant on a name: when it was asked for, when it was known granted, its token."""

    asked: float
    granted: float
    token: int


@dataclass
class TokenOrder:
    """Per name, every grant so far. A grant asked for after another was granted (and
    known to be) has a greater token; ``since``: grants asked for before it (a store
    that lost its data and counts again from the start) are no measure."""

    grants: dict[str, list[Grant]] = field(default_factory=dict)

    def above(self, name: str, token: int, before: float, since: float = -math.inf) -> int | None:
        """The greatest token granted on ``name`` before ``before`` (and asked for after
        ``since``) if ``token`` is not above it; None if it is."""
        earlier = [
            g.token
            for g in self.grants.get(name, ())
            if g.granted < before and g.asked > since and g.token >= token
        ]
        return max(earlier, default=None)

    def add(self, name: str, grant: Grant) -> None:
        self.grants.setdefault(name, []).append(grant)


# --- releases -------------------------------------------------------------------------


@dataclass(frozen=True)
class Release:
    """A release sent by client ``client`` for ``owner``'s lease on ``name`` at ``sent``,
    whether the server granted ``owner`` the name then, and the leases (name, owner)
    the sending client trusted then."""

    client: int
    name: str
    owner: str
    sent: float
    granted: bool
    trusting: tuple[tuple[str, str], ...] = ()


@dataclass
class Releases:
    """Releases, and the leases the server ended: a release is reported done only for a
    lease the server still granted its owner as it went out (or one its client knew
    lost: then the release says so whatever the server did), and afterwards the server
    grants that owner the name no longer; a lease ends on the server before its time
    only by a release naming its owner (its own, or an eviction's) or by a fault: a
    release never ends another owner's lease."""

    out: list[Release] = field(default_factory=list)  # every release sent, in order
    named: set[str] = field(default_factory=set)  # owners some release has named

    def sent(
        self,
        client: int,
        name: str,
        owner: str,
        now: float,
        granted: bool,
        trusting: tuple[tuple[str, str], ...] = (),
    ) -> Release:
        release = Release(client, name, owner, now, granted, trusting)
        self.out.append(release)
        self.named.add(owner)
        return release

    def answered(
        self, release: Release, done: bool, lost_before: bool, still_granted: bool
    ) -> str | None:
        """The server answered ``release`` (``done``: it says the lease was released;
        ``lost_before``: its client knew the lease lost as it sent it, or a fault had
        ended it on the server)."""
        if not done:
            return None
        who = f"client {release.client}'s release of {release.name} ({release.owner[:8]})"
        if not release.granted and not lost_before:
            return (
                f"{who} was reported done, but the server no longer granted that lease "
                "when it was sent, and its client did not know it lost"
            )
        if still_granted:
            return f"{who} was reported done, and the server still grants that owner the name"
        return None

    def ended(
        self, client: int, name: str, owner: str, token: int, until: float, now: float
    ) -> str | None:
        """The server no longer grants ``owner`` (client ``client``'s lease, ``token``) the
        name at ``now``; it granted it until ``until`` at the last look. The caller leaves
        out a lease a fault ended."""
        if now >= until or owner in self.named:
            return None
        others = [r for r in self.out if r.name == name and r.owner != owner and r.sent <= now][-1:]
        by = "".join(
            f"; the last release of another owner's lease on it: client {r.client}'s, sent "
            f"at {r.sent - 1000:.4f}"
            for r in others
        )
        return (
            f"client {client}'s lease on {name} (token {token}) ended on the server "
            f"{until - now:.4f}s before its time, by no release of its own{by}"
        )


# --- read-write locks -----------------------------------------------------------------


@dataclass(frozen=True)
class Hold:
    """A read or write hold of a read-write lock: its client, its mode, its token."""

    client: int
    mode: str  # "read" or "write"
    token: int


@dataclass
class RWHolds:
    """A read-write lock's holds: a writer's token is greater than the token of every
    hold (read or write) granted before it; no reader is trusted while a writer is."""

    order: TokenOrder = field(default_factory=TokenOrder)

    def granted(
        self,
        name: str,
        hold: Hold,
        asked: float,
        now: float,
        since: float = -math.inf,
        checked: bool = True,
    ) -> str | None:
        """``hold`` was granted at ``now`` (``since``: as :class:`TokenOrder`; not
        ``checked``: a hold lost as it came, or one a fault ended, only counted)."""
        above = None
        if hold.mode == "write" and checked:
            above = self.order.above(name, hold.token, now, since=since)
        self.order.add(name, Grant(asked, now, hold.token))
        if above is None:
            return None
        return (
            f"client {hold.client}'s write hold of {name} has token {hold.token}, not above "
            f"{above}, a hold's granted before it"
        )

    @staticmethod
    def trusted(holds: Sequence[Hold]) -> str | None:
        """The holds trusted now: a writer alone."""
        if len(holds) > 1 and any(hold.mode == "write" for hold in holds):
            who = ", ".join(f"client {h.client} {h.mode}s (token {h.token})" for h in holds)
            return f"a writer trusted beside another hold: {who}"
        return None


# --- elections ------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Campaigner:
    """A client that won a term, as it stands now: whether it trusts its term (victims
    of a fault too), whether the server grants it its leadership lease and its
    announcement, whether it trusts its announcement, whether a fault ended either on
    the server, and whether a fault had ended its leadership before it announced."""

    client: int
    term: int
    trusts: bool
    leads: bool  # the server grants it the leadership lease
    announced: bool  # the server holds its announcement
    trusts_announcement: bool
    struck: bool = False  # a fault ended its leadership or its announcement on the server
    struck_first: bool = False  # ... before its announcement was made


@dataclass
class Terms:
    """An election: a client that acts as leader (trusts its term) holds the leadership
    lease, and the announcement it trusts, on the server (unless a fault ended them);
    two clients are never both announced while both trust their terms (a fault's victim
    too: a new leader clears the announcements before it announces); a new leader's
    term is greater than every term granted before it won (not only before it asked, as
    the world's tokens: a term lost as it came is not checked)."""

    order: TokenOrder = field(default_factory=TokenOrder)

    def won(
        self,
        name: str,
        client: int,
        term: int,
        asked: float,
        now: float,
        since: float = -math.inf,
        checked: bool = True,
    ) -> str | None:
        """Client ``client`` won ``term`` at ``now`` (``since``, ``checked``: as
        :meth:`RWHolds.granted`): above every term granted before."""
        above = self.order.above(name, term, now, since=since) if checked else None
        self.order.add(name, Grant(asked, now, term))
        if above is None:
            return None
        return (
            f"client {client} leads {name} with term {term}, not above term {above}, "
            "granted before it"
        )

    @staticmethod
    def standing(campaigners: Sequence[Campaigner]) -> str | None:
        for c in campaigners:
            if c.trusts and not c.struck and not c.leads:
                return (
                    f"client {c.client} acts as leader (term {c.term}) but the server no "
                    "longer grants it the leadership"
                )
            if c.trusts and c.trusts_announcement and not c.struck and not c.announced:
                return (
                    f"client {c.client} leads (term {c.term}) and trusts its announcement, "
                    "which the server no longer holds"
                )
        both = [c for c in campaigners if c.trusts and c.announced and not c.struck_first]
        if len(both) > 1:
            who = ", ".join(f"client {c.client} (term {c.term})" for c in both)
            return f"two clients announced as leaders, both trusting their terms: {who}"
        return None


# --- fencing guards -------------------------------------------------------------------


@dataclass(frozen=True)
class Write:
    """A write offered to a guard: by whom, for which key, with which token."""

    client: int
    key: str
    token: int
    allow_equal: bool


@dataclass
class Fences:
    """What guards accepted, per guard and key: a write whose token is below one
    accepted already (or equal, unless allowed) is refused; any other is accepted (a
    guard refusing a newer token would keep its resource from every later holder); and
    the guard's own last token is the last accepted."""

    accepted: dict[tuple[str, str], int] = field(default_factory=dict)

    def offered(self, guard: str, write: Write, accepted: bool, last: int | None) -> str | None:
        """``guard`` accepted ``write`` or refused it, and now says ``last``."""
        before = self.accepted.get((guard, write.key))
        stale = before is not None and (
            write.token < before or (write.token == before and not write.allow_equal)
        )
        what = f"{guard} guard: client {write.client}'s write of {write.key}, token {write.token}"
        if accepted and stale:
            return f"{what}, accepted after token {before} was"
        if not accepted and not stale:
            return f"{what}, refused though the last accepted was {before}"
        if accepted:
            self.accepted[guard, write.key] = write.token
        if last != self.accepted.get((guard, write.key)):
            return f"{what}: the guard's last token is {last}, not the last accepted"
        return None
