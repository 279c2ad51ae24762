"""Throw-away TLS certificates for a test server: a CA, a server and a client certificate."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .raw import ServerError

__all__ = ["make_certificates"]

_EC_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
_CA_CONFIG = (
    "[req]\ndistinguished_name = dn\nx509_extensions = ca\n[dn]\n[ca]\n"
    "basicConstraints = critical, CA:TRUE\nkeyUsage = critical, keyCertSign, cRLSign\n"
    "subjectKeyIdentifier = hash\nauthorityKeyIdentifier = keyid:always\n"
)
_LEAVES = (
    ("server", "serverAuth", "IP:127.0.0.1, DNS:localhost"),
    ("client", "clientAuth", "DNS:fastlock-client"),
)


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if proc.returncode:
        raise ServerError(f"openssl {args[0]} failed: {proc.stderr.strip()}")


def make_certificates(directory: Path) -> None:
    """Write ``ca.crt``, ``server.crt``/``.key`` (for 127.0.0.1 and localhost) and
    ``client.crt``/``.key`` into ``directory`` with the ``openssl`` command.

    All EC P-256 (fast to generate), valid two days, with the extensions a strict verifier
    (Python 3.13's ``VERIFY_X509_STRICT``) requires: critical basic constraints and key usage,
    SAN, subject and authority key ids.
    """
    (directory / "ca.cnf").write_text(_CA_CONFIG)
    _openssl(
        *("req", "-x509", "-new", *_EC_KEY, "-config", "ca.cnf", "-keyout", "ca.key", "-out", "ca.crt"),
        *("-days", "2", "-subj", "/CN=fastlock test CA"),
        cwd=directory,
    )
    for name, usage, san in _LEAVES:
        (directory / f"{name}.ext").write_text(
            "basicConstraints = critical, CA:FALSE\nkeyUsage = critical, digitalSignature\n"
            f"extendedKeyUsage = {usage}\nsubjectAltName = {san}\n"
            "subjectKeyIdentifier = hash\nauthorityKeyIdentifier = keyid:always\n"
        )
        _openssl(
            *("req", "-new", *_EC_KEY, "-keyout", f"{name}.key", "-out", f"{name}.csr"),
            *("-subj", f"/CN=fastlock-{name}"),
            cwd=directory,
        )
        _openssl(
            *("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key"),
            *("-set_serial", str(int.from_bytes(os.urandom(8), "big")), "-days", "2"),
            *("-out", f"{name}.crt", "-extfile", f"{name}.ext"),
            cwd=directory,
        )
