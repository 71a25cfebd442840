"""Authentication and TLS failures said in plain words, on ``redis://`` and ``redlock://``.

A server that needs a password and got none; a password with reserved characters,
percent-encoded; a certificate issued for another host name (refused with every
supported redis-py, not only those that check the name by default); TLS spoken to
a plaintext port. Real redis-server processes; certificates made with ``openssl``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from urllib.parse import quote

import pytest

import fencelock
from fencelock.backends.redis.options import redis_options
from fencelock.engine.urls import parse_url
from fencelock.fencing import RedisGuard
from fencelock.testing import RedisServer, ServerPool, TLSFiles, make_certificates
from tests.redis.conftest import Background, redis_cli
from tests.redis.test_waiting_faults import DOCUMENTED_ACL

PASSWORD = "pa#ss/w?rd"  # every character a URL reserves, so it must be percent-encoded
HANG_BOUND = 10.0  # "not a hang"; the tests judge the wording, not the timing


def _error_of(open_and_use: Callable[[], object]) -> BaseException:
    """The exception ``open_and_use`` raised, run on a thread so a hang fails the test."""
    attempt = Background(open_and_use)
    assert attempt.wait(HANG_BOUND), f"still running after {HANG_BOUND}s"
    assert attempt.error is not None, attempt.outcome()
    return attempt.error


def _acquire(url: str) -> None:
    with fencelock.connect(url) as client:
        client.lock("auth-tls/x", ttl=5).acquire(timeout=0).release()


def _acquire_async(url: str) -> None:
    async def run() -> None:
        async with fencelock.aconnect(url) as client:
            lease = await client.lock("auth-tls/x", ttl=5).acquire(timeout=0)
            await lease.release()

    asyncio.run(run())


def _guard_write(url: str) -> None:
    guard = RedisGuard(url)
    try:
        guard.write("auth-tls/x", 1, "{auth-tls/x}:data", "v")
    finally:
        guard.close()


# -- authentication ------------------------------------------------------------------


@pytest.fixture(scope="module")
def password_nodes(module_servers: ServerPool) -> list[RedisServer]:
    """Three servers with ``requirepass PASSWORD`` (one for redis://, three for Redlock)."""
    nodes = [
        module_servers.redis("--requirepass", PASSWORD, name=f"requirepass{n}") for n in range(3)
    ]
    for node in nodes:
        assert redis_cli(node.port, "ping", password=PASSWORD) == "PONG", node.log()
    return nodes


def _hosts(nodes: list[RedisServer]) -> str:
    return ",".join(f"127.0.0.1:{node.port}" for node in nodes)


@pytest.mark.parametrize("use", [_acquire, _acquire_async, _guard_write])
def test_redis_without_a_password_says_the_server_requires_authentication(
    password_nodes: list[RedisServer], use: Callable[[str], None]
) -> None:
    where = f"127.0.0.1:{password_nodes[0].port}"
    error = _error_of(lambda: use(f"redis://{where}/0"))
    assert isinstance(error, fencelock.BackendUnavailable), repr(error)
    message = str(error)
    assert f"Redis at {where} requires authentication" in message, message
    assert "password" in message, message
    assert "HELLO" not in message, message


@pytest.mark.parametrize("use", [_acquire, _acquire_async])
def test_redlock_without_a_password_says_the_servers_require_authentication(
    password_nodes: list[RedisServer], use: Callable[[str], None]
) -> None:
    error = _error_of(lambda: use(f"redlock://{_hosts(password_nodes)}"))
    assert isinstance(error, fencelock.BackendUnavailable), repr(error)
    message = str(error)
    said = [n for n in password_nodes if f"127.0.0.1:{n.port} requires authentication" in message]
    assert len(said) >= 2, message  # decided once a quorum became impossible
    assert "refused the credentials" not in message, message


@pytest.mark.parametrize("scheme", ["redis", "redlock"])
def test_a_percent_encoded_password_with_reserved_characters_works(
    password_nodes: list[RedisServer], scheme: str
) -> None:
    hosts = f"127.0.0.1:{password_nodes[0].port}" if scheme == "redis" else _hosts(password_nodes)
    url = f"{scheme}://:{quote(PASSWORD, safe='')}@{hosts}"
    with fencelock.connect(url) as client:
        with client.lock("auth-tls/encoded", ttl=5) as first:
            pass
        with client.lock("auth-tls/encoded", ttl=5) as second:
            assert second.token > first.token


def test_the_same_password_written_raw_says_to_percent_encode_it(
    password_nodes: list[RedisServer],
) -> None:
    with pytest.raises(fencelock.ConfigError) as caught:
        fencelock.connect(f"redis://:{PASSWORD}@127.0.0.1:{password_nodes[0].port}/0")
    assert "percent-encode" in str(caught.value)
    assert PASSWORD not in str(caught.value)


# -- the guard under the documented ACL ----------------------------------------------

GUARD_ACL = ("~fencelock-fence:*", "~app:*")  # the guard's keys, and the data it writes


@pytest.fixture(scope="module")
def acl_redis(module_servers: ServerPool) -> RedisServer:
    """``app``: the documented lock ACL plus the guard's lines; ``locks``: without them."""
    return module_servers.redis(
        *("--user", "app", "on", ">secret", "resetchannels", *DOCUMENTED_ACL, *GUARD_ACL),
        *("--user", "locks", "on", ">secret", "resetchannels", *DOCUMENTED_ACL),
        *("--user", "default", "off"),
        name="guard-acl",
    )


def test_the_documented_acl_covers_the_guard(acl_redis: RedisServer) -> None:
    url = f"redis://app:secret@127.0.0.1:{acl_redis.port}/0"
    with fencelock.connect(url) as client, client.lock("acl/guarded", ttl=5) as lease:
        guard = RedisGuard(url)
        try:
            guard.write("acl/guarded", lease.token, "app:{acl/guarded}:data", "v1")
            with pytest.raises(fencelock.StaleToken):
                guard.write("acl/guarded", lease.token - 1, "app:{acl/guarded}:data", "v0")
            assert guard.last("acl/guarded") == lease.token
        finally:
            guard.close()
    got = redis_cli(acl_redis.port, "get", "app:{acl/guarded}:data", user="app", password="secret")
    assert got == "v1"


def test_the_lock_acl_alone_does_not_cover_the_guard(acl_redis: RedisServer) -> None:
    guard = RedisGuard(f"redis://locks:secret@127.0.0.1:{acl_redis.port}/0")
    try:
        with pytest.raises(fencelock.BackendUnavailable, match="ACL"):
            guard.write("acl/guarded", 1, "app:{acl/guarded}:data", "v")
    finally:
        guard.close()


# -- a certificate for another host name -----------------------------------------------


@pytest.fixture(scope="module")
def wrong_name_certs(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    """A CA, and a server certificate it signed for ``wrong.example`` only (not 127.0.0.1)."""
    return make_certificates(tmp_path_factory.mktemp("tls-wrong-name"), "DNS:wrong.example")


@pytest.fixture(scope="module")
def wrong_name_nodes(module_servers: ServerPool, wrong_name_certs: TLSFiles) -> list[RedisServer]:
    return [module_servers.redis(tls=wrong_name_certs, name=f"tls-wrong-{n}") for n in range(3)]


def test_every_tls_url_checks_the_host_name_by_default() -> None:
    """Explicitly, since redis-py < 6 does not (``pyproject.toml`` allows redis>=5)."""
    for url in ("rediss://h/0", "redis://h/0?ssl_cert_reqs=required", "redlocks://a,b,c"):
        options = redis_options(parse_url(url), ("h", 1))
        assert options.ssl["ssl_check_hostname"] is True, url
    tls = redis_options(parse_url("rediss://h/0"))
    assert tls.client_kwargs()["ssl_check_hostname"] is True
    assert tls.client_kwargs(asyncio=True)["ssl_check_hostname"] is True
    unverified = redis_options(parse_url("rediss://h/0?ssl_cert_reqs=none"))
    assert unverified.ssl["ssl_check_hostname"] is False  # nothing is verified then
    opted_out = redis_options(parse_url("rediss://h/0?ssl_check_hostname=false"))
    assert opted_out.ssl["ssl_check_hostname"] is False


def test_checking_the_host_name_without_verifying_the_certificate_is_refused() -> None:
    with pytest.raises(fencelock.ConfigError, match="ssl_check_hostname"):
        fencelock.connect("rediss://127.0.0.1:1/0?ssl_cert_reqs=none&ssl_check_hostname=true")


@pytest.mark.parametrize("use", [_acquire, _acquire_async, _guard_write])
def test_rediss_refuses_a_certificate_for_another_host_name(
    wrong_name_nodes: list[RedisServer], use: Callable[[str], None]
) -> None:
    server = wrong_name_nodes[0]
    where = f"127.0.0.1:{server.port}"
    assert server.tls is not None
    ca = server.tls.ca
    error = _error_of(lambda: use(f"rediss://{where}/0?ssl_ca_certs={ca}"))
    assert isinstance(error, fencelock.BackendUnavailable), repr(error)
    message = str(error)
    assert f"cannot reach Redis at {where}: TLS host name verification failed" in message
    assert "127.0.0.1" in message


@pytest.mark.parametrize("use", [_acquire, _acquire_async])
def test_redlocks_refuses_a_certificate_for_another_host_name(
    wrong_name_nodes: list[RedisServer], use: Callable[[str], None]
) -> None:
    hosts = ",".join(f"127.0.0.1:{node.port}" for node in wrong_name_nodes)
    tls = wrong_name_nodes[0].tls
    assert tls is not None
    ca = tls.ca
    error = _error_of(lambda: use(f"redlocks://{hosts}?ssl_ca_certs={ca}&timeout=1"))
    assert isinstance(error, fencelock.BackendUnavailable), repr(error)
    message = str(error)
    said = [
        node
        for node in wrong_name_nodes
        if f"Redis at 127.0.0.1:{node.port}: TLS host name verification failed" in message
    ]
    assert len(said) >= 2, message  # decided once a quorum became impossible


def test_ssl_check_hostname_false_accepts_it(wrong_name_nodes: list[RedisServer]) -> None:
    server = wrong_name_nodes[0]
    assert server.tls is not None
    url = f"rediss://127.0.0.1:{server.port}/0?ssl_ca_certs={server.tls.ca}"
    _acquire(url + "&ssl_check_hostname=false")


# -- TLS to a plaintext port ---------------------------------------------------------


@pytest.mark.parametrize("use", [_acquire, _acquire_async])
def test_rediss_to_a_plaintext_server_says_the_tls_handshake_failed(
    plain_redis: RedisServer, use: Callable[[str], None]
) -> None:
    where = f"127.0.0.1:{plain_redis.port}"
    error = _error_of(lambda: use(f"rediss://{where}/0?connect_timeout=0.5&timeout=0.5"))
    assert isinstance(error, fencelock.BackendUnavailable), repr(error)
    message = str(error)
    assert f"cannot reach Redis at {where}" in message
    assert "TLS handshake failed" in message
    assert "redis://" in message, message  # says what a plaintext port takes


def test_redlocks_to_plaintext_servers_says_the_tls_handshake_failed(
    module_servers: ServerPool,
) -> None:
    nodes = [module_servers.redis(name=f"plaintext{n}") for n in range(3)]
    hosts = ",".join(f"127.0.0.1:{node.port}" for node in nodes)
    error = _error_of(lambda: _acquire(f"redlocks://{hosts}?timeout=0.5"))
    assert isinstance(error, fencelock.BackendUnavailable), repr(error)
    assert str(error).count("TLS handshake failed") >= 2, str(error)
