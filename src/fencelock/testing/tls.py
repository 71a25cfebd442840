"""Throwaway TLS material for test servers: a CA and a server certificate it signed."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from fencelock.testing.tools import require_binary


@dataclass(frozen=True)
class TLSFiles:
    """A CA and the server certificate and key it signed (PEM files)."""

    ca: Path
    cert: Path
    key: Path


def openssl(workdir: Path, *args: str) -> None:
    """Run ``openssl ARGS`` in ``workdir``; its stderr in the error if it fails."""
    done = subprocess.run(  # noqa: S603 (a test server with arguments built here, no shell)
        [require_binary("openssl"), *args], cwd=workdir, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed:\n{done.stderr}")


def make_certificates(directory: Path, subject_alt_name: str = "IP:127.0.0.1") -> TLSFiles:
    """A new CA in ``directory`` and a server certificate it signed for ``subject_alt_name``
    (valid two days)."""
    common_name = subject_alt_name.partition(":")[2]
    (directory / "san.cnf").write_text(f"subjectAltName={subject_alt_name}\n")
    openssl(
        directory,
        *("req", "-x509", "-new", "-nodes", "-newkey", "rsa:2048", "-days", "2"),
        *("-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=fencelock test CA"),
    )
    openssl(
        directory,
        *("req", "-new", "-nodes", "-newkey", "rsa:2048"),
        *("-keyout", "server.key", "-out", "server.csr", "-subj", f"/CN={common_name}"),
    )
    openssl(
        directory,
        *("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key"),
        *("-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "san.cnf"),
    )
    return TLSFiles(
        ca=directory / "ca.crt", cert=directory / "server.crt", key=directory / "server.key"
    )
