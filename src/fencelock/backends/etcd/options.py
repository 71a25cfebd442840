"""What an ``etcd://`` URL says: endpoints, TLS, credentials, key prefix, timeouts."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from fencelock.engine.urls import ParsedURL, number_option, reject_unknown_options
from fencelock.errors import ConfigError

DEFAULT_PORT = 2379
DEFAULT_PREFIX = "fencelock/"
KNOWN = {"prefix", "connect_timeout", "timeout", "ca_file", "cert_file", "key_file"}


@dataclass(frozen=True, kw_only=True)
class EtcdOptions:
    endpoints: tuple[str, ...]  # base URLs, e.g. http://127.0.0.1:2379
    prefix: str
    connect_timeout: float
    timeout: float  # one request, once connected
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    @property
    def tls(self) -> bool:
        return self.endpoints[0].startswith("https:")

    def ssl_context(self) -> ssl.SSLContext | bool:
        """What the wire verifies the servers with (``False``: plain HTTP)."""
        if not self.tls:
            return False
        try:
            context = ssl.create_default_context(cafile=self.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"etcd ca_file {self.ca_file!r} cannot be used: {exc}") from exc
        if self.cert_file:
            try:
                context.load_cert_chain(self.cert_file, self.key_file)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(
                    f"etcd cert_file {self.cert_file!r} / key_file {self.key_file!r} "
                    f"cannot be used: {exc}"
                ) from exc
        return context


def etcd_options(parsed: ParsedURL) -> EtcdOptions:
    """Read and check the URL; raises :class:`ConfigError` naming what is wrong."""
    reject_unknown_options(parsed, KNOWN)
    if not parsed.hosts:
        raise ConfigError(f"{parsed.redacted!r} names no etcd endpoint (etcd://host:port,...)")
    if parsed.path.strip("/"):
        raise ConfigError(
            f"{parsed.redacted!r}: etcd URLs take no path; put keys under ?prefix=... instead"
        )
    if bool(parsed.username) != bool(parsed.password):
        raise ConfigError(f"{parsed.redacted!r}: give both a user and a password, or neither")
    scheme = "https" if parsed.scheme == "etcds" else "http"
    endpoints = tuple(f"{scheme}://{host}:{port or DEFAULT_PORT}" for host, port in parsed.hosts)
    prefix = parsed.options.get("prefix", DEFAULT_PREFIX)
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    for option in ("ca_file", "cert_file", "key_file"):
        if option in parsed.options and scheme == "http":
            raise ConfigError(f"option {option} needs TLS: use etcds:// in {parsed.redacted!r}")
    return EtcdOptions(
        endpoints=endpoints,
        prefix=prefix,
        connect_timeout=number_option(parsed, "connect_timeout", 5.0),
        timeout=number_option(parsed, "timeout", 10.0),
        username=parsed.username,
        password=parsed.password,
        ca_file=parsed.options.get("ca_file"),
        cert_file=parsed.options.get("cert_file"),
        key_file=parsed.options.get("key_file"),
    )
