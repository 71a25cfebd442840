"""``etcds://`` against an etcd serving clients over TLS only, with a private CA."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import fencelock
from fencelock.testing import EtcdServer, ServerPool, TLSFiles, make_certificates


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return make_certificates(tmp_path_factory.mktemp("etcd-tls"))


@pytest.fixture(scope="module")
def tls_etcd(tmp_path_factory: pytest.TempPathFactory, certs: TLSFiles) -> Iterator[EtcdServer]:
    with ServerPool(tmp_path_factory.mktemp) as pool:
        yield pool.etcd(1, name="etcd-tls", tls=certs)[0]


def _with_ca(server: EtcdServer, certs: TLSFiles) -> str:
    return f"{server.url}?ca_file={certs.ca}"


def test_etcds_with_the_ca_locks_and_fences(tls_etcd: EtcdServer, certs: TLSFiles) -> None:
    assert tls_etcd.url.startswith("etcds://")
    with fencelock.connect(_with_ca(tls_etcd, certs)) as client:
        with client.lock("tls/one", ttl=3) as first:
            info = client.inspect("tls/one")
            assert info is not None
            assert info.owner == first.owner
        with client.lock("tls/one", ttl=3) as second:
            assert second.token > first.token


def test_etcds_asyncio_locks(tls_etcd: EtcdServer, certs: TLSFiles) -> None:
    async def twice() -> tuple[int, int]:
        async with fencelock.aconnect(_with_ca(tls_etcd, certs)) as client:
            async with client.lock("tls/async", ttl=3) as first:
                pass
            async with client.lock("tls/async", ttl=3) as second:
                return first.token, second.token

    first, second = asyncio.run(twice())
    assert 0 < first < second


def test_a_server_certificate_from_an_unknown_ca_is_refused(tls_etcd: EtcdServer) -> None:
    started = time.monotonic()
    with (
        pytest.raises(fencelock.BackendUnavailable, match=r"TLS handshake failed.*CERTIFICATE"),
        fencelock.connect(tls_etcd.url + "?connect_timeout=5") as client,
    ):
        client.lock("tls/x").acquire(timeout=1)
    assert time.monotonic() - started < 30


def test_plain_http_against_the_tls_port_says_to_use_etcds(tls_etcd: EtcdServer) -> None:
    url = tls_etcd.url.replace("etcds://", "etcd://") + "?connect_timeout=5&timeout=5"
    with (
        pytest.raises(fencelock.BackendUnavailable, match="use etcds://"),
        fencelock.connect(url) as client,
    ):
        client.lock("tls/x").acquire(timeout=1)


def test_a_missing_ca_file_is_a_config_error_naming_it(
    tls_etcd: EtcdServer, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-ca.pem"
    with (
        pytest.raises(fencelock.ConfigError, match=r"no-such-ca\.pem"),
        fencelock.connect(f"{tls_etcd.url}?ca_file={missing}") as client,
    ):
        client.lock("tls/x").acquire(timeout=1)
