"""Opening a Redlock node connection: its TLS context, then AUTH and SELECT.

The settings are the ``redis://`` ones (:class:`RedisOptions`), applied as redis-py
applies them, so a URL means the same on both backends; failures are worded by
:mod:`fencelock.backends.redis.errors`, as for ``redis://``.
"""

from __future__ import annotations

import ssl

from fencelock.backends.redis.options import RedisOptions
from fencelock.backends.redis.resp import pack
from fencelock.errors import BackendUnavailable

_CERT_REQS = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def tls_context(options: RedisOptions) -> ssl.SSLContext:
    """The client TLS context for ``options.ssl`` (redis-py's defaults: verify the server)."""
    settings = options.ssl
    reqs_text = str(settings.get("ssl_cert_reqs", "required")).lower()
    if reqs_text not in _CERT_REQS:
        raise BackendUnavailable(
            f"{options.where}: ssl_cert_reqs must be none, optional or required, got {reqs_text!r}"
        )
    context = ssl.create_default_context()
    verify = _CERT_REQS[reqs_text]
    context.check_hostname = bool(settings.get("ssl_check_hostname", True)) and (
        verify != ssl.CERT_NONE
    )
    context.verify_mode = verify
    certfile, keyfile = settings.get("ssl_certfile"), settings.get("ssl_keyfile")
    if certfile:
        context.load_cert_chain(certfile, keyfile)
    if settings.get("ssl_ca_certs"):
        context.load_verify_locations(cafile=settings["ssl_ca_certs"])
    return context


def gate_commands(options: RedisOptions) -> list[bytes]:
    """Commands that must succeed before any script runs on a new connection."""
    commands = []
    if options.password is not None:
        credentials = [options.password]
        if options.username is not None:
            credentials.insert(0, options.username)
        commands.append(pack([b"AUTH", *credentials]))
    if options.db:
        commands.append(pack([b"SELECT", options.db]))
    return commands
