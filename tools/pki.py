"""Certificates for the TLS tests and the TLS benchmark, made with `cryptography` at run time (none is ever
committed): a CA, server and client certificates for 127.0.0.1/localhost, an expired one, another CA's."""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from raft.leaf.durable import atomic_write

DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Pair:
    cert: str
    key: str


class CA:
    """A certificate authority writing PEM files under `root`."""

    def __init__(self, root: Path, name: str = "test-ca") -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - DAY)
            .not_valid_after(now + 30 * DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.path = str(root / f"{name}.pem")
        write(self.path, self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, *, expired: bool = False, password: str | None = None, file: str = "") -> Pair:
        """A leaf with common name `name`, for 127.0.0.1 and localhost, usable by a server and a client (a broker
        is both); its key PKCS#8 PEM as Netty reads it, encrypted with `password` if given."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        start, end = (now - 10 * DAY, now - DAY) if expired else (now - DAY, now + 30 * DAY)
        sans: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
            .sign(self.key, hashes.SHA256())
        )
        base = self.root / (file or name)
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption()
        )
        pair = Pair(f"{base}.crt", f"{base}.key")
        write(pair.cert, cert.public_bytes(serialization.Encoding.PEM))
        write(pair.key, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption))
        return pair

    def client_context(self, pair: Pair | None = None, *, trust: str | None = None) -> ssl.SSLContext:
        """A client context trusting this CA (or `trust`), presenting `pair` if given."""
        ctx = ssl.create_default_context(cafile=trust or self.path)
        if pair is not None:
            ctx.load_cert_chain(pair.cert, pair.key)
        return ctx


def write(path: str, data: bytes) -> None:
    """Atomically (a temp file renamed over), as an operator rotating a certificate should."""
    atomic_write(os.path.dirname(path), os.path.basename(path), data)
