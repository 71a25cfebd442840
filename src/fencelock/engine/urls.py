"""Backend URLs: ``scheme://[user[:password]@]host[:port][,host[:port]...][/path][?k=v]``.

A password reaches no message: every message that shows a URL shows :func:`redact`'s.
"""

from __future__ import annotations

import math
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from urllib.parse import parse_qsl, unquote, urlsplit

from fencelock.engine.timing import REQUEST_BOUND
from fencelock.errors import ConfigError


@dataclass(frozen=True)
class ParsedURL:
    scheme: str
    hosts: tuple[tuple[str, int | None], ...] = ()
    path: str = ""
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    options: dict[str, str] = field(default_factory=dict)
    raw: str = field(default="", repr=False)
    # Seconds past a call's timeout that a request in flight may take: every scheme's
    # ``request_bound`` option (default REQUEST_BOUND); a backend keeps it as its own.
    request_bound: float = REQUEST_BOUND

    @property
    def redacted(self) -> str:
        """The URL with any password replaced by ``***``, safe for messages."""
        return redact(self.raw)


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***``: the one way a URL enters a message.

    Works on malformed URLs too (those are the ones error messages show), and hides
    more rather than less when a raw reserved character makes the password's end unclear.
    """
    span = _userinfo_span(url)
    if span is None:
        return url
    start, at = span
    user, colon, _ = url[start:at].partition(":")
    return f"{url[:start]}{user}:***{url[at:]}" if colon else url


def _userinfo_span(url: str) -> tuple[int, int] | None:
    """Where ``user[:password]`` lies in ``url``: (its start, the index of its ``@``)."""
    separator = url.find("://")
    if separator < 0:  # not a URL at all: anything before an '@' may be a secret
        at = url.rfind("@")
        return (0, at) if at > 0 else None
    start = separator + 3
    end = _authority_end(url, start)
    at = url.rfind("@", start, end)
    if at >= 0:
        return start, at
    if _cut_short(url[start:end], url[end:]):
        return start, url.rfind("@")
    return None


def _authority_end(url: str, start: int) -> int:
    """Where the authority that begins at ``start`` ends, as ``urlsplit`` reads it."""
    return next((i for i, c in enumerate(url[start:], start) if c in "/?#"), len(url))


def _cut_short(authority: str, rest: str) -> bool:
    """True if a raw '#', '/' or '?' in a password ended the authority before its '@'.

    ``rest`` follows the authority. An '@' there belongs to the password when it is
    in the path or fragment, in a query field's name, or when what would be the port
    is no number (``redis://app:pa?ss@host`` reads as host ``app``, port ``pa``); an
    '@' in an option's value (``?ssl_ca_certs=/certs/a@b.pem``) is left alone.
    """
    if ":" not in authority or "@" not in rest:
        return False
    before_query, _, query = rest.partition("?")
    if "@" in before_query or "@" in rest.partition("#")[2]:
        return True
    names = [field.partition("=")[0] for field in query.split("&")]
    return any("@" in name for name in names) or not _ports_are_numbers(authority)


def _ports_are_numbers(hostlist: str) -> bool:
    for host in hostlist.split(","):
        port = (host.rpartition("]")[2] if host.startswith("[") else host).partition(":")[2]
        if port and not port.isdigit():
            return False
    return True


def parse_url(url: object) -> ParsedURL:
    """Split a backend URL into its parts, or raise ConfigError naming the problem."""
    if not isinstance(url, str):
        raise ConfigError(f"backend URL must be a str, not {type(url).__name__}")
    shown = redact(url)
    if "://" not in url:
        raise ConfigError(f"malformed backend URL {shown!r}: expected scheme://...")
    _reject_raw_reserved(url, shown)
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ConfigError(f"malformed backend URL {shown!r}: {exc}") from exc
    scheme = parts.scheme.lower()
    if not scheme:
        raise ConfigError(f"malformed backend URL {shown!r}: no scheme")
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    parsed = ParsedURL(
        scheme=scheme,
        hosts=tuple(_parse_host(h, shown) for h in hostlist.split(",")) if hostlist else (),
        path=unquote(parts.path),
        username=unquote(username) if username else None,
        password=unquote(password) if password else None,
        options=_parse_query(parts.query, shown),
        raw=url,
    )
    bound = number_option(parsed, "request_bound", REQUEST_BOUND)
    options = {key: value for key, value in parsed.options.items() if key != "request_bound"}
    return replace(parsed, options=options, request_bound=bound)


def _reject_raw_reserved(url: str, shown: str) -> None:
    start = url.index("://") + 3
    end = _authority_end(url, start)
    if "@" not in url[start:end] and _cut_short(url[start:end], url[end:]):
        raise ConfigError(
            f"malformed backend URL {shown!r}: the user name or password holds a raw '#', "
            "'/' or '?', which ends that part of a URL; percent-encode it (# as %23, / as "
            "%2F, ? as %3F; urllib.parse.quote(password, safe=''))"
        )
    if "#" in url:
        raise ConfigError(
            f"malformed backend URL {shown!r}: a raw '#' starts a URL fragment, which a "
            "backend URL does not have; percent-encode it as %23"
        )


def _parse_host(text: str, shown: str) -> tuple[str, int | None]:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest.removeprefix(":")
    else:
        host, _, port_text = text.partition(":")
    if not host:
        raise ConfigError(f"malformed backend URL {shown!r}: empty host in {text!r}")
    if not port_text:
        return host, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigError(f"malformed backend URL {shown!r}: bad port {port_text!r}")
    return host, int(port_text)


def _parse_query(query: str, shown: str) -> dict[str, str]:
    options: dict[str, str] = {}
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as exc:
        raise ConfigError(f"malformed query in backend URL {shown!r}: {exc}") from exc
    for key, value in pairs:
        if key in options:
            raise ConfigError(f"option {key!r} given twice in backend URL {shown!r}")
        options[key] = value
    return options


# Options every scheme takes, with one meaning (seconds): ``timeout`` bounds one request
# to the server, ``connect_timeout`` bounds opening a connection. A portable program can
# pass them whatever $FENCELOCK_URL names; memory:// accepts and ignores them.
COMMON_OPTIONS = frozenset({"timeout", "connect_timeout"})


def reject_unknown_options(parsed: ParsedURL, known: AbstractSet[str]) -> None:
    """Raise ConfigError if the URL carries an option this backend does not take."""
    unknown = sorted(set(parsed.options) - known)
    if unknown:
        valid = ", ".join(sorted(known)) or "none"
        raise ConfigError(
            f"unknown option {unknown[0]!r} for {parsed.scheme}:// URLs (valid: {valid})"
        )


def number_option(parsed: ParsedURL, key: str, default: float, allow_zero: bool = False) -> float:
    """A numeric URL option (seconds, counts): finite, > 0, or >= 0 with ``allow_zero``."""
    text = parsed.options.get(key)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or not (value > 0 or (allow_zero and value == 0)):
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"option {key}={text!r} in {parsed.redacted!r} must be a number {bound}")
    return value


def flag_option(parsed: ParsedURL, key: str) -> bool:
    """A boolean URL option: 1/0, true/false, yes/no."""
    text = parsed.options[key].lower()
    if text not in ("1", "0", "true", "false", "yes", "no"):
        raise ConfigError(f"option {key}={text!r} in {parsed.redacted!r} must be true or false")
    return text in ("1", "true", "yes")
