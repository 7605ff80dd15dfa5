"""TLS settings and server contexts, with RocketMQ's own keys and semantics (docs/security.md).

RocketMQ reads its TLS settings in TlsSystemConfig (JVM system properties) and TlsHelper.buildSslContext:
`tls.server.mode` (disabled | permissive | enforcing) says whether the remoting port accepts TLS, plain or both
(one port: a first byte 0x16, a TLS handshake record, means TLS); the file named by `tls.config.file` (default
/etc/rocketmq/tls.properties, skipped when it does not exist) overrides the other server keys:
`tls.test.mode.enable` (default true: a self-signed certificate made at start, the configured ones ignored),
`tls.server.certPath`, `tls.server.keyPath`, `tls.server.keyPassword` (PEM, PKCS#8 as Netty wants it),
`tls.server.need.client.auth` (none | optional | require), `tls.server.authClient` and
`tls.server.trustCertPath`. The controller takes the same keys from controller.conf (cli/config.py), and
reads the tls.config.file the same way, again each time a certificate is rebuilt.

Where RocketMQ is silently lenient this module refuses, naming the key and the file: an unknown mode or
client-auth value (RocketMQ: permissive / none), a boolean that is not true or false, and a client certificate
that is requested but not verified (need.client.auth optional|require with authClient=false, which RocketMQ
serves with an InsecureTrustManager: any certificate passes, so it authenticates nobody).

`ServerTls.context()` is the SSLContext for the next connection: rebuilt when a file it was built from
changes (mtime, size, inode) or after `reload()` (SIGHUP), so that rotating a certificate needs no restart; a
rebuild that fails (a half-written file) keeps the previous context and logs the reason once.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import socket
import ssl
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace

from api.service.properties import PropertiesError, parse_properties
from raft.leaf.admission import TlsAdmission

log = logging.getLogger("controllerd.tls")

MODES = ("disabled", "permissive", "enforcing")
CLIENT_AUTH = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "require": ssl.CERT_REQUIRED}
DEFAULT_CONFIG_FILE = "/etc/rocketmq/tls.properties"  # TlsSystemConfig.tlsConfigFile's default
HANDSHAKE_RECORD = 0x16  # NettyRemotingServer.TlsModeHandler.HANDSHAKE_MAGIC_CODE
HANDSHAKE_TIMEOUT_S = 10.0  # Netty SslHandler's default handshakeTimeoutMillis
MAX_HANDSHAKES = 256  # connections at most between accept and a finished handshake (each holds ~0.5 MiB of TLS buffers)


class TlsError(ValueError):
    """A TLS setting that cannot be used: `str()` names the key, where it was set and why."""


@dataclass(frozen=True)
class TlsSettings:
    """The server-side TLS keys. `sources[key]` says where each set key came from (for messages)."""

    mode: str = "disabled"
    config_file: str = DEFAULT_CONFIG_FILE
    test_mode: bool = True
    need_client_auth: str = "none"
    cert_path: str = ""
    key_path: str = ""
    key_password: str | None = None
    auth_client: bool = False
    trust_cert_path: str = ""
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def enabled(self) -> bool:
        return self.mode != "disabled"

    @property
    def verifies_clients(self) -> bool:
        """Clients must present a certificate the trusted CA signed (what the start-up warning asks for)."""
        return self.enabled and not self.test_mode and self.need_client_auth == "require"

    def effective(self) -> TlsSettings:
        """These settings with tls.config.file's values over them (TlsHelper.extractTlsConfigFromFile), checked."""
        s = self
        path = self.config_file
        if path and os.path.isfile(path) and os.access(path, os.R_OK):
            try:
                with open(path, encoding="utf-8") as f:
                    props = parse_properties(f.read(), path)
            except (PropertiesError, UnicodeDecodeError) as e:
                raise TlsError(f"tls.config.file {path}: {e}") from None
            values: dict[str, object] = {}
            sources = dict(self.sources)
            for p in props:
                attr = FILE_KEYS.get(p.key)
                if attr is None:
                    continue  # client keys and others: not the server's (RocketMQ reads them for its clients)
                where = f"{path}:{p.line}"
                values[attr] = _bool(p.key, p.value, where) if attr in _BOOLS else p.value
                sources[p.key] = where
            s = replace(self, **values, sources=sources)  # type: ignore[arg-type]
        s.check()
        return s

    def where(self, key: str) -> str:
        return self.sources.get(key, "default")

    def check(self) -> None:
        def bad(key: str, value: object, reason: str) -> TlsError:
            return TlsError(f"{key}={value} ({self.where(key)}): {reason}")

        if self.mode not in MODES:
            raise bad("tls.server.mode", self.mode, f"must be one of {', '.join(MODES)}")
        if self.need_client_auth not in CLIENT_AUTH:
            raise bad("tls.server.need.client.auth", self.need_client_auth, f"must be one of {', '.join(CLIENT_AUTH)}")
        if not self.enabled or self.test_mode:
            return
        for key, value in (("tls.server.certPath", self.cert_path), ("tls.server.keyPath", self.key_path)):
            if not value:
                raise bad(key, "", "must be set when tls.server.mode is not disabled and tls.test.mode.enable=false")
        if self.need_client_auth != "none":
            if not self.auth_client:
                raise bad(
                    "tls.server.authClient",
                    "false",
                    f"tls.server.need.client.auth={self.need_client_auth} requests a client certificate that "
                    "would not be verified (RocketMQ's InsecureTrustManager accepts any): set "
                    "tls.server.authClient=true and tls.server.trustCertPath, or need.client.auth=none",
                )
            if not self.trust_cert_path:
                raise bad(
                    "tls.server.trustCertPath", "", "must name the CA file that client certificates are checked against"
                )

    def files(self) -> tuple[str, ...]:
        """The files a context is built from (their changes rebuild it)."""
        paths = [self.config_file] if self.config_file else []
        if not self.test_mode:
            paths += [p for p in (self.cert_path, self.key_path, self.trust_cert_path) if p]
        return tuple(paths)


FILE_KEYS = {
    "tls.test.mode.enable": "test_mode",
    "tls.server.need.client.auth": "need_client_auth",
    "tls.server.keyPath": "key_path",
    "tls.server.keyPassword": "key_password",
    "tls.server.certPath": "cert_path",
    "tls.server.authClient": "auth_client",
    "tls.server.trustCertPath": "trust_cert_path",
}
"""The server keys tls.config.file may set, and the TlsSettings field each sets (TlsHelper reads these and the
tls.client.* ones; tls.server.mode only from the system property, here controller.conf)."""
_BOOLS = {f.name for f in fields(TlsSettings) if f.type == "bool"}


def _bool(key: str, value: str, where: str) -> bool:
    low = value.strip().lower()
    if low not in ("true", "false"):
        raise TlsError(f"{key}={value} ({where}): must be true or false (RocketMQ would read it as false)")
    return low == "true"


def build_context(s: TlsSettings) -> ssl.SSLContext:
    """The server SSLContext of effective settings `s` (TlsError naming the key and file when one fails)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if s.test_mode:
        cert, key = _self_signed()
        ctx.load_cert_chain(cert, key)
        return ctx  # as RocketMQ's test mode: no client certificate is checked
    for key, path in (("tls.server.certPath", s.cert_path), ("tls.server.keyPath", s.key_path)):
        if not os.path.isfile(path):
            raise TlsError(f"{key}={path} ({s.where(key)}): no such file")
    try:
        ctx.load_cert_chain(s.cert_path, s.key_path, s.key_password)
    except (ssl.SSLError, OSError, ValueError) as e:
        raise TlsError(
            f"tls.server.certPath={s.cert_path} / tls.server.keyPath={s.key_path} "
            f"({s.where('tls.server.certPath')}): cannot load the certificate and key "
            f"(PEM; keyPassword {'set' if s.key_password else 'unset'}): {e}"
        ) from None
    ctx.verify_mode = CLIENT_AUTH[s.need_client_auth]
    if s.need_client_auth != "none":
        try:
            ctx.load_verify_locations(cafile=s.trust_cert_path)
        except (ssl.SSLError, OSError) as e:
            raise TlsError(
                f"tls.server.trustCertPath={s.trust_cert_path} ({s.where('tls.server.trustCertPath')}): "
                f"cannot load the CA certificates: {e}"
            ) from None
    return ctx


_SELF_SIGNED: tuple[str, str] | None = None
_SELF_SIGNED_LOCK = threading.Lock()


def forward_context(s: TlsSettings) -> ssl.SSLContext:
    """The client side of a node's own remoting connections to a peer (a 1009 a follower passes to the leader):
    it presents this node's server certificate (it must then also be valid for client authentication where the
    peers require client certificates) and trusts `tls.server.trustCertPath`; no host-name check, as RocketMQ's
    clients make none. Test mode: no certificate, nothing verified (as RocketMQ's test-mode clients)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = False
    if s.test_mode:
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    ctx.load_cert_chain(s.cert_path, s.key_path, s.key_password)
    if s.trust_cert_path:
        ctx.load_verify_locations(cafile=s.trust_cert_path)
    else:
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _self_signed() -> tuple[str, str]:
    """Test mode (tls.test.mode.enable=true): a self-signed certificate made once per process, as Netty's
    SelfSignedCertificate is in RocketMQ; its files live in a private temporary directory."""
    global _SELF_SIGNED
    with _SELF_SIGNED_LOCK:
        if _SELF_SIGNED is None:
            from cryptography import x509
            from cryptography.hazmat.primitives import hashes, serialization
            from cryptography.hazmat.primitives.asymmetric import ec
            from cryptography.x509.oid import NameOID

            key = ec.generate_private_key(ec.SECP256R1())
            name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
            now = datetime.datetime.now(datetime.UTC)
            cert = (
                x509.CertificateBuilder()
                .subject_name(name)
                .issuer_name(name)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(days=1))
                .not_valid_after(now + datetime.timedelta(days=365))
                .sign(key, hashes.SHA256())
            )
            d = tempfile.mkdtemp(prefix="controllerd-tls-test-")
            cert_path, key_path = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
            with open(cert_path, "wb") as f:
                f.write(cert.public_bytes(serialization.Encoding.PEM))
            fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(
                    key.private_bytes(
                        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
                    )
                )
            _SELF_SIGNED = (cert_path, key_path)
        return _SELF_SIGNED


def _signature(paths: tuple[str, ...]) -> tuple[tuple[int, int, int] | None, ...]:
    out: list[tuple[int, int, int] | None] = []
    for p in paths:
        try:
            st = os.stat(p)
            out.append((st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append(None)
    return tuple(out)


class ServerTls:
    """The context for new connections of one listener, rebuilt when its files change or on `reload()`."""

    def __init__(self, settings: TlsSettings, what: str) -> None:
        self.settings = settings
        self.what = what  # "remoting", "HTTP": named in the log lines
        self.effective = settings.effective()
        self._ctx = build_context(self.effective)
        self._sig = _signature(self.effective.files())
        self._failed_sig: object = None
        self.reloads = 0

    @property
    def mode(self) -> str:
        return self.effective.mode

    def reload(self) -> bool:
        """Rebuild now (SIGHUP); False (and the old context kept, the reason logged) when it fails."""
        self._sig = ()
        return self._refresh() is not None

    def context(self) -> ssl.SSLContext:
        if _signature(self.effective.files()) != self._sig:
            self._refresh()
        return self._ctx

    def _refresh(self) -> ssl.SSLContext | None:
        try:
            effective = self.settings.effective()
            sig = _signature(effective.files())
            ctx = build_context(effective)
        except TlsError as e:
            sig = _signature(self.effective.files())
            if sig != self._failed_sig:
                log.error("%s TLS certificates not reloaded, the previous ones stay in use: %s", self.what, e)
                self._failed_sig = sig
            self._sig = sig
            return None
        self._ctx, self.effective, self._sig, self._failed_sig = ctx, effective, sig, None
        self.reloads += 1
        log.info("%s TLS certificates loaded from %s", self.what, ", ".join(effective.files()) or "test mode")
        return ctx


class TlsAcceptor(TlsAdmission):
    """A TLS-only listener terminating TLS itself (the HTTPS port): accepts on `sock`, requires a first byte
    0x16, handshakes with the context current at that moment (`tls.context()`: a reloaded certificate, key or
    CA bundle applies to the next connection), then hands the connection to `factory`'s protocol. Every refusal
    is one warning `<listener> connection from HOST:PORT refused: REASON` and one `on_refused(reason)` (the
    counter). Bounded as the remoting port (raft.leaf.admission): at most MAX_HANDSHAKES connections between
    accept and a finished handshake, each for HANDSHAKE_TIMEOUT_S; one more drops the oldest."""

    def __init__(
        self,
        tls: ServerTls,
        listener: str,
        factory: Callable[[], asyncio.Protocol],
        on_refused: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(
            tls.context,
            factory,
            self.refused,
            self._accept_failed,
            handshakes_max=MAX_HANDSHAKES,
            handshake_timeout_s=HANDSHAKE_TIMEOUT_S,
        )
        self.tls, self.listener, self.factory, self.on_refused = tls, listener, factory, on_refused
        self.refusals: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._task = asyncio.get_running_loop().create_task(self.accept(sock), name=f"{self.listener}-accept")

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self.admitting) if t is not None]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)
        self._task = None

    def _accept_failed(self, e: OSError) -> bool:
        log.error("%s accept failed: %s; retrying in 1 s", self.listener, e)
        return True

    def refused(self, peer: str, reason: str, text: str) -> None:
        self.refusals[reason] = self.refusals.get(reason, 0) + 1
        if self.on_refused is not None:
            self.on_refused(reason)
        log.warning("%s connection from %s refused: %s", self.listener, peer, text)
