"""A model of one Redis server that runs the backends' own Lua scripts.

:class:`RedisModel` keeps a keyspace of strings and sorted sets with expiry in
milliseconds by the server's own clock (Unix time, running at its own ``rate`` against
true time: drift), expiring a key lazily when it is touched, as Redis does, and every
expired key before each request. Scripts come as the clients send them (``SCRIPT LOAD``,
then ``EVALSHA``; ``NOSCRIPT`` for one it does not know, as after every restart) and
run in Lua 5.1, Redis's Lua (``lupa.lua51``), with ``redis.call`` and ``redis.pcall``
over the keyspace: ``GET``, ``SET`` (``NX``/``XX``, ``PX``/``EX``, ``GET``), ``DEL``, ``EXISTS``,
``PEXPIRE``, ``PTTL``, ``ZADD`` (``NX``/``XX``), ``ZREM``, ``ZRANGE`` (``WITHSCORES``),
``ZSCORE``, ``ZCARD``, ``TIME`` and ``PUBLISH``, converted to and from Lua as Redis
converts them. Outside scripts: ``PING``, ``SCAN``, ``SCRIPT LOAD``, ``EVALSHA``,
``EVAL``, ``SUBSCRIBE``, ``UNSUBSCRIBE``, and what redis-py says as it connects
(``HELLO 3``: RESP3 from then on, ``CLIENT SETINFO``, and ``CLIENT MAINT_NOTIFICATIONS``,
refused as Redis 7.0 refuses it). A command the model does not implement is an error
reply, and listed in :attr:`RedisModel.unmodeled` (the simulator makes that a
violation; the tests assert that it stays empty). ``WAIT`` (``wait_replicas``) is one.

Clients reach it through connections (:class:`Conn`): each request is executed when it
reaches the server, in the order sent on its connection; while the server is paused
(SIGSTOP) requests wait, and run in the order they came once it resumes, also those of
a connection its client has closed since (their replies go nowhere). A restart (a
kill, then a start) drops every connection and every subscription, forgets the loaded
scripts and what waited for a paused server, and keeps the data (an AOF) or not.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fencelock.backends.redis.scripts import KEY_PREFIX, lua
from fencelock.errors import BackendUnavailable
from fencelock.fencing import RedisGuard

EPOCH_US = 1_700_000_000_000_000  # the server's clock, in Unix microseconds, at its start
NOSCRIPT = "NOSCRIPT No matching script. Please use EVAL."
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
# A lock's key under the default key style, ``fencelock:{NAME}``: the name in braces
_LOCK_KEY = re.compile(re.escape(KEY_PREFIX) + r"\{(.*)\}")


class Status(str):
    """A simple string reply (``+OK``, ``+PONG``), as opposed to a bulk string."""


class CommandError(Exception):
    """An error reply; ``text`` as Redis words it (``ERR ...``, ``NOSCRIPT ...``)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


Reply = Any  # int, str, Status, None, a list or a dict of these, or a CommandError
CONNECT = ("connect",)  # a connection's first message: its handshake


@dataclass
class Entry:
    value: str | dict[str, float]  # a string, or a sorted set's scores by member
    expires: int | None = None  # the server's Unix time in ms; None: no expiry


@dataclass(eq=False)
class Conn:
    """The server's end of one client connection. ``send`` carries a reply or a pushed
    message to the client, in order; False if it was lost on the way."""

    client: int
    send: Callable[[Reply], bool]
    reset: Callable[[], None]  # the connection is dropped (the client learns it)
    alive: Callable[[], bool] = lambda: True  # whether its client's process lives
    incarnation: int = -1  # of the server process that accepted it (-1: not yet)
    channels: list[str] = field(default_factory=list)
    closed: bool = False  # by its client
    protocol: int = 2  # RESP2, or RESP3 after HELLO 3


def _script_body(source: str) -> str:
    """A script as Redis compiles it: the body of a function with no arguments."""
    return f"return function()\n{source}\nend"


def _number_arg(value: Any) -> str:
    """A Lua argument of ``redis.call`` as the string Redis makes of it."""
    if isinstance(value, bool):
        raise CommandError("ERR Lua redis lib command arguments must be strings or integers")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else format(value, ".17g")
    if isinstance(value, str):
        return value
    raise CommandError("ERR Lua redis lib command arguments must be strings or integers")


def _score_text(score: float) -> str:
    """A sorted set's score as Redis replies it: an integer without a point."""
    return str(int(score)) if score.is_integer() and abs(score) < 2**63 else format(score, ".17g")


def _score(text: str) -> float:
    try:
        score = float(text)
    except ValueError:
        raise CommandError("ERR value is not a valid float") from None
    if math.isnan(score):
        raise CommandError("ERR value is not a valid float")
    return score


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise CommandError("ERR value is not an integer or out of range") from None


@functools.lru_cache(maxsize=256)
def _glob(pattern: str) -> re.Pattern[str]:
    """Redis's glob (``*``, ``?``, ``[...]`` with ``^``, ``\\`` escapes) as a regex."""
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[" and "]" in pattern[i + 1 :]:
            end = pattern.index("]", i + 1)
            inner = pattern[i + 1 : end]
            negate = inner.startswith("^")
            inner = inner[1:] if negate else inner
            out.append(("[^" if negate else "[") + inner.replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out), re.DOTALL)


class RedisModel:
    """One Redis server; ``clock()`` is true time, the server's runs at ``rate`` to it."""

    def __init__(self, clock: Callable[[], float], *, rate: float = 1.0) -> None:
        self.clock, self.rate = clock, rate
        self.started = clock()
        self.keys: dict[str, Entry] = {}
        self.scripts: dict[str, str] = {}  # SCRIPT LOADed: SHA1 -> source
        self.unmodeled: list[str] = []
        self.incarnation = 0
        self.connections: list[Conn] = []  # open ones, in the order accepted
        self.paused_until: float | None = None  # true time
        self.waiting: list[tuple[Conn, Sequence[str]]] = []  # came while paused
        self.log: Callable[[str], None] = lambda line: None
        self._lua: Any = None
        self._lua_type: Callable[[Any], str | None] = lambda value: None
        self._compiled: dict[str, Any] = {}
        self._commands: dict[str, Callable[[list[str]], Reply]] = {
            "GET": self._get_command,
            "SET": self._set,
            "DEL": self._del,
            "EXISTS": self._exists,
            "PEXPIRE": self._pexpire,
            "PTTL": self._pttl,
            "ZADD": self._zadd,
            "ZREM": self._zrem,
            "ZRANGE": self._zrange,
            "ZSCORE": self._zscore,
            "ZCARD": self._zcard,
            "TIME": self._time,
            "PUBLISH": self._publish,
            "PING": self._ping,
        }
        self._outside: dict[str, Callable[[Conn, list[str]], Reply]] = {
            "SCAN": lambda conn, args: self._scan(args),
            "EVALSHA": lambda conn, args: self._evalsha(args),
            "EVAL": lambda conn, args: self._eval(args),
            "SCRIPT": lambda conn, args: self._script(args),
            "SUBSCRIBE": self._subscribe,
            "UNSUBSCRIBE": self._unsubscribe,
            "CLIENT": lambda conn, args: self._client(args),
            "HELLO": self._hello,
        }

    # --- time --------------------------------------------------------------------------

    def now_us(self, true_now: float | None = None) -> int:
        """The server's clock: Unix time in microseconds."""
        true = self.clock() if true_now is None else true_now
        return EPOCH_US + math.floor((true - self.started) * self.rate * 1_000_000)

    def now_ms(self, true_now: float | None = None) -> int:
        return self.now_us(true_now) // 1000

    def true_time(self, server_ms: int) -> float:
        """When, in true time, the server's clock reads ``server_ms``."""
        return self.started + (server_ms * 1000 - EPOCH_US) / 1_000_000 / self.rate

    # --- connections and requests ------------------------------------------------------

    @property
    def paused(self) -> bool:
        return self.paused_until is not None

    def receive(self, conn: Conn, request: Sequence[str]) -> None:
        """A request (or :data:`CONNECT`) reaches the server on ``conn``."""
        if self.paused:
            self.waiting.append((conn, request))
            return
        self._serve(conn, request)

    def _serve(self, conn: Conn, request: Sequence[str]) -> None:
        if request == CONNECT:
            conn.incarnation = self.incarnation
            if not conn.closed:
                self.connections.append(conn)
            conn.send(Status("OK"))
            return
        if conn.incarnation != self.incarnation:  # from before a restart: dropped with it
            return
        reply = self.execute(conn, list(request))
        self.log(f"server: {_shown(request)} from client {conn.client} -> {_shown_reply(reply)}")
        self._send(conn, reply)

    def _send(self, conn: Conn, message: Reply) -> None:
        """A lost reply hangs a connection (its client gives up on it); a message lost to
        a subscriber breaks the subscriber's connection: the server drops it."""
        if not conn.send(message) and conn.channels:
            self.drop(conn)

    def close(self, conn: Conn) -> None:
        """The client closed ``conn``: its subscriptions end (its requests already sent
        are still run: their bytes came before the close)."""
        conn.closed = True
        conn.channels.clear()
        if conn in self.connections:
            self.connections.remove(conn)

    def pause(self, until: float = math.inf) -> None:
        """The process stops (SIGSTOP) until true time ``until`` at least: requests wait
        until :meth:`resume`."""
        self.paused_until = until if self.paused_until is None else max(self.paused_until, until)

    def resume(self, ended: float = math.inf) -> None:
        """The process goes on, if its pause ends by ``ended`` (a pause made longer
        since goes on): what came meanwhile runs, in the order it came."""
        if self.paused_until is None or self.paused_until > ended:
            return
        self.paused_until = None
        waiting, self.waiting = self.waiting, []
        for conn, request in waiting:
            self._serve(conn, request)

    def restart(self, keep_data: bool, true_now: float) -> None:
        """A kill and a start: every connection dropped (its client told), subscriptions
        and loaded scripts gone, requests waiting on a paused server never run; the keys
        kept (an AOF, every write synced) or not."""
        self.incarnation += 1
        self.paused_until, self.waiting = None, []
        dropped, self.connections = self.connections, []
        for conn in dropped:
            conn.channels.clear()
            conn.reset()
        self.scripts.clear()
        if not keep_data:
            self.keys.clear()
        self.expire(true_now)

    def drop(self, conn: Conn) -> None:
        """The server drops ``conn`` (a message on it was lost: the connection broke)."""
        self.close(conn)
        conn.reset()

    # --- commands ----------------------------------------------------------------------

    def execute(self, conn: Conn | None, args: list[str]) -> Reply:
        """One command outside a script: its reply (an error reply as a CommandError)."""
        self.expire()
        if not args:
            return CommandError("ERR empty command")
        name = args[0].upper()
        try:
            outside = self._outside.get(name)
            if outside is not None:
                if conn is None:
                    raise CommandError(f"ERR {name} needs a connection")
                return outside(conn, args[1:])
            command = self._commands.get(name)
            if command is None:
                raise self._unmodeled(f"the command {name}")
            return command(args[1:])
        except CommandError as exc:
            return exc

    def _unmodeled(self, what: str) -> CommandError:
        self.unmodeled.append(what)
        return CommandError(f"ERR not in the Redis model: {what}")

    def expire(self, true_now: float | None = None) -> None:
        """Delete every key whose time is over (by the server's clock)."""
        now = self.now_ms(true_now)
        for key in [k for k, e in self.keys.items() if e.expires is not None and e.expires < now]:
            del self.keys[key]

    def _entry(self, key: str) -> Entry | None:
        """The live key (an expired one is deleted as it is touched)."""
        entry = self.keys.get(key)
        if entry is not None and entry.expires is not None and entry.expires < self.now_ms():
            del self.keys[key]
            return None
        return entry

    def _string(self, key: str) -> str | None:
        entry = self._entry(key)
        if entry is None:
            return None
        if not isinstance(entry.value, str):
            raise CommandError(WRONGTYPE)
        return entry.value

    def _zset(self, key: str) -> dict[str, float] | None:
        entry = self._entry(key)
        if entry is None:
            return None
        if not isinstance(entry.value, dict):
            raise CommandError(WRONGTYPE)
        return entry.value

    def _arity(self, args: list[str], least: int, name: str) -> None:
        if len(args) < least:
            raise CommandError(f"ERR wrong number of arguments for '{name.lower()}' command")

    def _get_command(self, args: list[str]) -> Reply:
        self._arity(args, 1, "GET")
        return self._string(args[0])

    def _set(self, args: list[str]) -> Reply:
        self._arity(args, 2, "SET")
        key, value, options = args[0], args[1], [a.upper() for a in args[2:]]
        expires: int | None = None
        only: str | None = None
        answer_before = False
        i = 0
        while i < len(options):
            option = options[i]
            if option in ("NX", "XX"):
                only = option
            elif option == "GET":
                answer_before = True
            elif option in ("PX", "EX") and i + 1 < len(options):
                amount = _integer(options[i + 1])
                if amount <= 0:
                    raise CommandError("ERR invalid expire time in 'set' command")
                expires = self.now_ms() + amount * (1000 if option == "EX" else 1)
                i += 1
            else:
                raise self._unmodeled(f"SET with {option}")
            i += 1
        exists = self._entry(key) is not None
        before = self._string(key) if answer_before else None
        if (only == "NX" and exists) or (only == "XX" and not exists):
            return before if answer_before else None
        self.keys[key] = Entry(value, expires)
        return before if answer_before else Status("OK")

    def _del(self, args: list[str]) -> Reply:
        self._arity(args, 1, "DEL")
        deleted = 0
        for key in args:
            if self._entry(key) is not None:
                del self.keys[key]
                deleted += 1
        return deleted

    def _exists(self, args: list[str]) -> Reply:
        self._arity(args, 1, "EXISTS")
        return sum(self._entry(key) is not None for key in args)

    def _pexpire(self, args: list[str]) -> Reply:
        self._arity(args, 2, "PEXPIRE")
        if len(args) > 2:
            raise self._unmodeled(f"PEXPIRE with {args[2]}")
        entry, ms = self._entry(args[0]), _integer(args[1])
        if entry is None:
            return 0
        if ms <= 0:
            del self.keys[args[0]]
        else:
            entry.expires = self.now_ms() + ms
        return 1

    def _pttl(self, args: list[str]) -> Reply:
        self._arity(args, 1, "PTTL")
        entry = self._entry(args[0])
        if entry is None:
            return -2
        return -1 if entry.expires is None else max(entry.expires - self.now_ms(), 0)

    def _zadd(self, args: list[str]) -> Reply:
        self._arity(args, 3, "ZADD")
        key, rest = args[0], list(args[1:])
        only: str | None = None
        while rest and rest[0].upper() in ("NX", "XX", "GT", "LT", "CH", "INCR"):
            flag = rest.pop(0).upper()
            if flag not in ("NX", "XX"):
                raise self._unmodeled(f"ZADD with {flag}")
            only = flag
        if not rest or len(rest) % 2:
            raise CommandError("ERR syntax error")
        pairs = [(_score(rest[i]), rest[i + 1]) for i in range(0, len(rest), 2)]
        scores = self._zset(key)
        if scores is None:
            if only == "XX":
                return 0
            scores = {}
            self.keys[key] = Entry(scores)
        added = 0
        for score, member in pairs:
            known = member in scores
            if (only == "NX" and known) or (only == "XX" and not known):
                continue
            added += not known
            scores[member] = score
        return added

    def _zrem(self, args: list[str]) -> Reply:
        self._arity(args, 2, "ZREM")
        scores = self._zset(args[0])
        if scores is None:
            return 0
        removed = sum(scores.pop(member, None) is not None for member in args[1:])
        if not scores:
            del self.keys[args[0]]
        return removed

    def _zrange(self, args: list[str]) -> Reply:
        self._arity(args, 3, "ZRANGE")
        flags = [a.upper() for a in args[3:]]
        if any(flag != "WITHSCORES" for flag in flags):
            raise self._unmodeled(f"ZRANGE with {' '.join(flags)}")
        scores = self._zset(args[0]) or {}
        ranked = sorted(scores.items(), key=lambda item: (item[1], item[0].encode()))
        start, stop, size = _integer(args[1]), _integer(args[2]), len(ranked)
        start, stop = start + size if start < 0 else start, stop + size if stop < 0 else stop
        chosen = ranked[max(start, 0) : stop + 1] if start <= stop else []
        if flags:
            return [text for m, s in chosen for text in (m, _score_text(s))]
        return [member for member, _ in chosen]

    def _zscore(self, args: list[str]) -> Reply:
        self._arity(args, 2, "ZSCORE")
        score = (self._zset(args[0]) or {}).get(args[1])
        return None if score is None else _score_text(score)

    def _zcard(self, args: list[str]) -> Reply:
        self._arity(args, 1, "ZCARD")
        return len(self._zset(args[0]) or {})

    def _time(self, args: list[str]) -> Reply:
        seconds, micros = divmod(self.now_us(), 1_000_000)
        return [str(seconds), str(micros)]

    def _publish(self, args: list[str]) -> Reply:
        self._arity(args, 2, "PUBLISH")
        channel, message = args[0], args[1]
        heard = 0
        for conn in list(self.connections):
            if channel in conn.channels and conn.alive():
                heard += 1
                self._send(conn, ["message", channel, message])
        return heard

    def _ping(self, args: list[str]) -> Reply:
        return args[0] if args else Status("PONG")

    def _scan(self, args: list[str]) -> Reply:
        """Every live key at once (a cursor of 0 back), filtered by ``MATCH``."""
        self._arity(args, 1, "SCAN")
        pattern: str | None = None
        options = list(args[1:])
        while options:
            option = options.pop(0).upper()
            if option == "MATCH" and options:
                pattern = options.pop(0)
            elif option == "COUNT" and options:
                options.pop(0)
            else:
                raise self._unmodeled(f"SCAN with {option}")
        if args[0] != "0":
            raise self._unmodeled("SCAN from a cursor the model never gave")
        keys = [key for key in list(self.keys) if self._entry(key) is not None]
        if pattern is not None:
            keys = [key for key in keys if _glob(pattern).fullmatch(key)]
        return ["0", keys]

    def _subscribe(self, conn: Conn, args: list[str]) -> Reply:
        """Confirms each channel as a pushed message (the reply is the last of them)."""
        self._arity(args, 1, "SUBSCRIBE")
        for channel in args:
            if not conn.closed and channel not in conn.channels:
                conn.channels.append(channel)
            confirmed = ["subscribe", channel, len(conn.channels)]
            if channel != args[-1]:
                self._send(conn, confirmed)
        return confirmed

    def _unsubscribe(self, conn: Conn, args: list[str]) -> Reply:
        """Each channel's end as a pushed message (the reply is the last of them)."""
        self._arity(args, 1, "UNSUBSCRIBE")
        for channel in args:
            if channel in conn.channels:
                conn.channels.remove(channel)
            ended = ["unsubscribe", channel, len(conn.channels)]
            if channel != args[-1]:
                self._send(conn, ended)
        return ended

    def _client(self, args: list[str]) -> Reply:
        """What redis-py sends as it connects: ``CLIENT SETINFO``, and on RESP3
        ``CLIENT MAINT_NOTIFICATIONS``, which Redis 7.0 does not know."""
        which = args[0].upper() if args else ""
        if which == "MAINT_NOTIFICATIONS":
            raise CommandError(f"ERR unknown subcommand '{args[0]}'. Try CLIENT HELP.")
        if which != "SETINFO":
            raise self._unmodeled(f"CLIENT {which}")
        return Status("OK")

    def _hello(self, conn: Conn, args: list[str]) -> Reply:
        """``HELLO 2`` or ``HELLO 3`` (no ``AUTH``, no ``SETNAME``): the protocol from now on."""
        if len(args) != 1 or args[0] not in ("2", "3"):
            raise self._unmodeled(f"HELLO {' '.join(args)}")
        conn.protocol = int(args[0])
        return {
            "server": "redis",
            "version": "7.0.15",
            "proto": conn.protocol,
            "id": self.connections.index(conn) + 1 if conn in self.connections else 0,
            "mode": "standalone",
            "role": "master",
            "modules": [],
        }

    def accept(self, conn: Conn) -> None:
        """A TCP connection accepted (by the kernel: also while the process is paused)."""
        conn.incarnation = self.incarnation
        if not conn.closed:
            self.connections.append(conn)

    # --- scripts ---------------------------------------------------------------------

    def _script(self, args: list[str]) -> Reply:
        self._arity(args, 1, "SCRIPT")
        if args[0].upper() != "LOAD" or len(args) != 2:
            raise self._unmodeled(f"SCRIPT {args[0].upper()}")
        sha = hashlib.sha1(args[1].encode()).hexdigest()
        self._compile(sha, args[1])
        self.scripts[sha] = args[1]
        return sha

    def _evalsha(self, args: list[str]) -> Reply:
        self._arity(args, 2, "EVALSHA")
        source = self.scripts.get(args[0].lower())
        if source is None:
            raise CommandError(NOSCRIPT)
        return self._run(args[0].lower(), source, args[1:])

    def _eval(self, args: list[str]) -> Reply:
        self._arity(args, 2, "EVAL")
        sha = hashlib.sha1(args[0].encode()).hexdigest()
        self.scripts[sha] = args[0]
        return self._run(sha, args[0], args[1:])

    def _runtime(self) -> Any:
        if self._lua is None:
            from lupa import lua51  # type: ignore[import-untyped,import-not-found,unused-ignore]

            lua = lua51.LuaRuntime(register_eval=False, register_builtins=False)
            lua.execute(
                "redis = {}\n"
                "function redis.error_reply(text) return {err = text} end\n"
                "function redis.status_reply(text) return {ok = text} end\n"
            )
            redis = lua.globals().redis
            redis.call = self._call
            redis.pcall = self._pcall
            self._lua, self._lua_type = lua, lua51.lua_type
        return self._lua

    def _compile(self, sha: str, source: str) -> Any:
        compiled = self._compiled.get(sha)
        if compiled is None:
            lua = self._runtime()
            try:
                compiled = lua.execute(_script_body(source))
            except Exception as exc:  # a script Lua cannot compile: Redis's error
                raise CommandError(f"ERR Error compiling script: {exc}") from None
            self._compiled[sha] = compiled
        return compiled

    def _run(self, sha: str, source: str, args: list[str]) -> Reply:
        """``EVALSHA``'s or ``EVAL``'s ``numkeys KEYS... ARGV...``, run in Lua."""
        numkeys = _integer(args[0])
        if numkeys < 0 or numkeys > len(args) - 1:
            raise CommandError("ERR Number of keys can't be greater than number of args")
        function = self._compile(sha, source)
        lua = self._runtime()
        context = lua.globals()
        context.KEYS = lua.table_from(args[1 : 1 + numkeys])
        context.ARGV = lua.table_from(args[1 + numkeys :])
        try:
            result = function()
        except CommandError as exc:  # redis.call's error, raised through the script
            return CommandError(f"{exc.text} script: {sha}")
        except Exception as exc:  # the script's own error (error(), a bad index, ...)
            return CommandError(f"ERR user_script: {str(exc).splitlines()[0]} script: {sha}")
        return self._from_lua(result)

    def _call(self, *args: Any) -> Any:
        """``redis.call``: an error reply raises (ending the script)."""
        reply = self._command([_number_arg(arg) for arg in args])
        if isinstance(reply, CommandError):
            raise reply
        return self._to_lua(reply)

    def _pcall(self, *args: Any) -> Any:
        """``redis.pcall``: an error reply is returned as ``{err = ...}``."""
        try:
            reply = self._command([_number_arg(arg) for arg in args])
        except CommandError as exc:
            reply = exc
        if isinstance(reply, CommandError):
            return self._lua.table_from({"err": reply.text})
        return self._to_lua(reply)

    def _command(self, args: list[str]) -> Reply:
        if not args:
            return CommandError("ERR Please specify at least one argument for this redis lib call")
        name = args[0].upper()
        command = self._commands.get(name)
        if command is None:
            if name in self._outside:
                return CommandError("ERR This Redis command is not allowed from script")
            return self._unmodeled(f"the command {name} in a script")
        try:
            return command(args[1:])
        except CommandError as exc:
            return exc

    def _to_lua(self, reply: Reply) -> Any:
        """A reply as Redis gives it to Lua: nil is false, a status ``{ok = ...}``."""
        if reply is None:
            return False
        if isinstance(reply, Status):
            return self._lua.table_from({"ok": str(reply)})
        if isinstance(reply, list):
            return self._lua.table_from([self._to_lua(item) for item in reply])
        return reply

    def _from_lua(self, value: Any) -> Reply:
        """A script's result as Redis replies it: a number truncated to an integer, a
        table up to its first nil, false as nil, true as 1."""
        if value is None or value is False:
            return None
        if value is True:
            return 1
        if isinstance(value, int | float):
            return int(value)
        if isinstance(value, str):
            return value
        if self._lua_type(value) == "table":
            if value["err"] is not None:
                return CommandError(str(value["err"]))
            if value["ok"] is not None:
                return Status(str(value["ok"]))
            items, i = [], 1
            while value[i] is not None:
                items.append(self._from_lua(value[i]))
                i += 1
            return items
        return None  # a function or userdata: Redis replies nil

    # --- what the simulator's invariants and faults read (changing nothing) -----------

    def _peek(self, key: str, true_now: float) -> Entry | None:
        entry = self.keys.get(key)
        if entry is None or (entry.expires is not None and entry.expires < self.now_ms(true_now)):
            return None
        return entry

    def holder(self, name: str, true_now: float) -> str | None:
        """The owner that holds lock ``name`` at ``true_now``, if any."""
        entry = self._peek(f"{KEY_PREFIX}{{{name}}}", true_now)
        return entry.value if entry is not None and isinstance(entry.value, str) else None

    def grant_until(self, name: str, owner: str, true_now: float) -> float | None:
        """Until when (true time) the server grants ``owner`` the lock; None: it does not."""
        entry = self._peek(f"{KEY_PREFIX}{{{name}}}", true_now)
        if entry is None or entry.value != owner:
            return None
        # a key lives through the millisecond its expiry names
        return math.inf if entry.expires is None else self.true_time(entry.expires + 1)

    def names(self) -> set[str]:
        """The names with a lock key (expired ones not yet deleted too)."""
        return {match[1] for key in self.keys if (match := _LOCK_KEY.fullmatch(key))}

    def owners(self) -> set[str]:
        """Whom the server grants a lock now (an expired key not yet deleted too)."""
        return {
            entry.value
            for key, entry in self.keys.items()
            if _LOCK_KEY.fullmatch(key) and isinstance(entry.value, str)
        }

    def force_end(self, name: str, true_now: float) -> set[str]:
        """An operator deletes lock ``name``'s key; the owners it ended."""
        held = self.holder(name, true_now)
        self.keys.pop(f"{KEY_PREFIX}{{{name}}}", None)
        return set() if held is None else {held}


def _shown(request: Sequence[str]) -> str:
    """A request, short, for the simulator's trace (a script by its first words)."""
    if request and request[0].upper() == "SCRIPT":
        return "SCRIPT LOAD"
    return " ".join(part if len(part) <= 48 else f"{part[:12]}…" for part in request[:8])


def _shown_reply(reply: Reply) -> str:
    if isinstance(reply, CommandError):
        return f"-{reply.text[:60]}"
    text = repr(reply)
    return text if len(text) <= 120 else f"{text[:117]}..."


class ModelFence:
    """:class:`RedisGuard`'s Redis side on a model of Redis: its script, ``fence.lua``,
    run by the model's Lua as Redis runs it (no redis-py, no server)."""

    def __init__(self, model: RedisModel) -> None:
        self.model = model
        self.conn = Conn(0, send=lambda reply: True, reset=lambda: None)
        self.source = lua("fence")

    def check(
        self, fence_key: str, token: int, allow_equal: bool, extra_keys: list[str], value: str
    ) -> tuple[bool, int]:
        keys, flag = [fence_key, *extra_keys], "1" if allow_equal else "0"
        reply = self.model.execute(
            self.conn, ["EVAL", self.source, str(len(keys)), *keys, str(token), flag, value]
        )
        if not isinstance(reply, list):
            raise BackendUnavailable(f"the fence script answered {_shown_reply(reply)}")
        accepted, last = reply
        return int(accepted) == 1, int(last)

    def last(self, fence_key: str) -> int | None:
        value = self.model.execute(self.conn, ["GET", fence_key])
        return None if value is None else int(str(value))

    def close(self) -> None:
        pass


def model_redis_guard(clock: Callable[[], float]) -> RedisGuard:
    """A :class:`RedisGuard` whose Redis is a model of its own, on ``clock`` (true time)."""
    guard = RedisGuard.__new__(RedisGuard)
    setattr(guard, "_fence", ModelFence(RedisModel(clock)))  # noqa: B010 - for its connection
    return guard
