"""A redis-py client or connection pool handed to ``connect()``: fencelock takes its
connection settings (host, port, database, credentials, timeouts, TLS) and opens
connections of its own with them, so the application's pool is never borrowed."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

_SSL_KEYS = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_check_hostname")


def is_redis_object(obj: object) -> bool:
    """A ``redis.Redis`` (sync or asyncio) or a ``ConnectionPool``."""
    return hasattr(obj, "connection_pool") or hasattr(obj, "connection_kwargs")


def url_from_redis(obj: object) -> str:
    """The ``redis://``, ``rediss://`` or ``redis+unix://`` URL with ``obj``'s connection
    settings."""
    pool = getattr(obj, "connection_pool", obj)
    kwargs: dict[str, Any] = dict(getattr(pool, "connection_kwargs", {}))
    if "path" in kwargs:
        options = {"db": str(int(kwargs.get("db") or 0))}
        query = _query(kwargs, tls=False).removeprefix("?")
        return (
            f"redis+unix://{_userinfo(kwargs)}{quote(str(kwargs['path']), safe='/')}"
            f"?{urlencode(options)}" + (f"&{query}" if query else "")
        )
    tls = "SSL" in getattr(getattr(pool, "connection_class", None), "__name__", "")
    scheme = "rediss" if tls else "redis"
    return f"{scheme}://{_userinfo(kwargs)}{_host(kwargs)}/{int(kwargs.get('db') or 0)}" + _query(
        kwargs, tls
    )


def _userinfo(kwargs: dict[str, Any]) -> str:
    user, password = kwargs.get("username"), kwargs.get("password")
    if user is None and password is None:
        return ""
    text = quote(str(user or ""), safe="")
    if password is not None:
        text += ":" + quote(str(password), safe="")
    return text + "@"


def _host(kwargs: dict[str, Any]) -> str:
    host = str(kwargs.get("host") or "localhost")
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{int(kwargs.get('port') or 6379)}"


def _query(kwargs: dict[str, Any], tls: bool) -> str:
    options: dict[str, str] = {}
    for ours, theirs in (
        ("timeout", "socket_timeout"),
        ("connect_timeout", "socket_connect_timeout"),
    ):
        if kwargs.get(theirs):
            options[ours] = str(float(kwargs[theirs]))
    if tls:
        for key in _SSL_KEYS:
            if kwargs.get(key) is not None:
                value = kwargs[key]
                options[key] = ("true" if value else "false") if isinstance(value, bool) else value
        reqs = kwargs.get("ssl_cert_reqs")
        if reqs is not None:
            options["ssl_cert_reqs"] = _cert_reqs(reqs)
    return "?" + urlencode(options) if options else ""


def _cert_reqs(value: object) -> str:
    """``ssl.CERT_REQUIRED`` (an enum) or the strings redis-py takes."""
    name = getattr(value, "name", value)
    return str(name).lower().removeprefix("cert_")
