"""Backend URLs: ``scheme://[user[:password]@]host[:port][,host[:port]...][/path][?k=v]``."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlsplit

from fencelock.errors import ConfigError


@dataclass(frozen=True)
class ParsedURL:
    scheme: str
    hosts: tuple[tuple[str, int | None], ...] = ()
    path: str = ""
    username: str | None = None
    password: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    raw: str = ""

    @property
    def redacted(self) -> str:
        """The URL with any password replaced by ``***``, safe for messages."""
        if self.password is None:
            return self.raw
        return self.raw.replace(":" + _quoted_password(self.raw), ":***", 1)


def _quoted_password(raw: str) -> str:
    netloc = urlsplit(raw).netloc
    userinfo = netloc.rpartition("@")[0]
    return userinfo.partition(":")[2]


def parse_url(url: object) -> ParsedURL:
    """Split a backend URL into its parts, or raise ConfigError naming the problem."""
    if not isinstance(url, str):
        raise ConfigError(f"backend URL must be a str, not {type(url).__name__}")
    if "://" not in url:
        raise ConfigError(f"malformed backend URL {url!r}: expected scheme://...")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ConfigError(f"malformed backend URL {url!r}: {exc}") from exc
    scheme = parts.scheme.lower()
    if not scheme:
        raise ConfigError(f"malformed backend URL {url!r}: no scheme")
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    return ParsedURL(
        scheme=scheme,
        hosts=tuple(_parse_host(h, url) for h in hostlist.split(",")) if hostlist else (),
        path=unquote(parts.path),
        username=unquote(username) if username else None,
        password=unquote(password) if password else None,
        options=_parse_query(parts.query, url),
        raw=url,
    )


def _parse_host(text: str, url: str) -> tuple[str, int | None]:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest.removeprefix(":")
    else:
        host, _, port_text = text.partition(":")
    if not host:
        raise ConfigError(f"malformed backend URL {url!r}: empty host in {text!r}")
    if not port_text:
        return host, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigError(f"malformed backend URL {url!r}: bad port {port_text!r}")
    return host, int(port_text)


def _parse_query(query: str, url: str) -> dict[str, str]:
    options: dict[str, str] = {}
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as exc:
        raise ConfigError(f"malformed query in backend URL {url!r}: {exc}") from exc
    for key, value in pairs:
        if key in options:
            raise ConfigError(f"option {key!r} given twice in backend URL {url!r}")
        options[key] = value
    return options


def reject_unknown_options(parsed: ParsedURL, known: set[str]) -> None:
    """Raise ConfigError if the URL carries an option this backend does not take."""
    unknown = sorted(set(parsed.options) - known)
    if unknown:
        valid = ", ".join(sorted(known)) or "none"
        raise ConfigError(
            f"unknown option {unknown[0]!r} for {parsed.scheme}:// URLs (valid: {valid})"
        )


def number_option(parsed: ParsedURL, key: str, default: float, allow_zero: bool = False) -> float:
    """A numeric URL option (seconds, counts): > 0, or >= 0 with ``allow_zero``."""
    text = parsed.options.get(key)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (value > 0 or (allow_zero and value == 0)):
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"option {key}={text!r} in {parsed.redacted!r} must be a number {bound}")
    return value


def flag_option(parsed: ParsedURL, key: str) -> bool:
    """A boolean URL option: 1/0, true/false, yes/no."""
    text = parsed.options[key].lower()
    if text not in ("1", "0", "true", "false", "yes", "no"):
        raise ConfigError(f"option {key}={text!r} in {parsed.redacted!r} must be true or false")
    return text in ("1", "true", "yes")
