"""HTTPS on controllerHttpAddr (controllerHttpTls): real uvicorn on loopback with the tls.server.* settings and
client certificates; rmqctl with https://, --cacert, --cert and --key; a replaced certificate served to the next
connection; and hostile input: a plain HTTP request on the HTTPS port, a TLS ClientHello on a plain HTTP port.
Every refused handshake is one warning naming the client and the reason and one count in /metrics
(controllerd_tls_refused_total, listener http and raft); a replaced CA bundle applies to the next connection."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import socket
import ssl
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from api.http.members import member_request
from api.server import ControllerServer
from api.service.tls import TlsSettings
from cli.rmqctl import main as rmqctl
from raft.testing.cluster import free_ports
from tests.api.harness import GROUP_RAFT, SETTINGS, TOKEN, service_options
from tests.raft.helpers import eventually
from tools.pki import CA, Pair, write

pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def serving(root: Path, https: TlsSettings | None) -> AsyncIterator[int]:
    raft, http = free_ports(2)
    settings = SETTINGS if https is None else replace(SETTINGS, http_tls=True, remoting_tls=https)
    server = ControllerServer(service_options(root, [raft], 0, GROUP_RAFT), settings, ("127.0.0.1", http))
    await server.start()
    try:
        await server.service.node.wait_for_leader(10)
        yield http
    finally:
        await server.stop()


def client_auth(ca: CA, server: Pair, trust: str | None = None) -> TlsSettings:
    """HTTPS with `server`'s certificate, requiring client certificates that `trust` (default: `ca`) signed."""
    return TlsSettings(
        mode="disabled",  # HTTPS does not depend on the remoting port's mode
        config_file="",
        test_mode=False,
        need_client_auth="require",
        cert_path=server.cert,
        key_path=server.key,
        auth_client=True,
        trust_cert_path=trust or ca.path,
    )


async def rmqctl_run(*args: str) -> Result:
    """rmqctl in a thread (its HTTP client blocks; the server runs on this loop)."""
    return await asyncio.to_thread(CliRunner().invoke, rmqctl, list(args))


async def test_https_with_client_certificates_rmqctl_and_rotation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("RMQCTL_CACERT", "RMQCTL_CERT", "RMQCTL_KEY"):
        monkeypatch.setenv(variable, "")  # rmqctl's flags set them: restored (removed) after the test
    ca = CA(tmp_path / "pki")
    server, client = ca.issue("controller"), ca.issue("operator")
    https = client_auth(ca, server)
    async with serving(tmp_path / "n", https) as port:
        url = f"https://127.0.0.1:{port}"
        tls = ("--cacert", ca.path, "--cert", client.cert, "--key", client.key)
        ok = await rmqctl_run("-o", "json", "--token", TOKEN, *tls, "raft", "status", "-a", url)
        assert ok.exit_code == 0, ok.output
        assert json.loads(ok.output)["body"]["role"] == "leader"
        no_cert = await rmqctl_run(
            "--timeout", "2", "--cacert", ca.path, "--cert", "", "--key", "", "raft", "status", "-a", url
        )
        assert no_cert.exit_code == 3, no_cert.output  # the handshake is refused: unreachable
        plain = await rmqctl_run("--timeout", "2", "raft", "status", "-a", f"http://127.0.0.1:{port}")
        assert plain.exit_code == 3, plain.output
        missing = await rmqctl_run("--cacert", str(tmp_path / "nope.pem"), "raft", "status", "-a", url)
        assert missing.exit_code == 2 and f"--cacert {tmp_path / 'nope.pem'}: no such file" in missing.output

        # plain HTTP on the HTTPS port: closed without an HTTP answer, and the port keeps serving
        def plain_request() -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
                try:
                    return s.recv(4096)
                except ConnectionResetError:  # closed with the request unread: a reset
                    return b""

        assert not (await asyncio.to_thread(plain_request)).startswith(b"HTTP/")

        def serial() -> int:
            ctx = ca.client_context(client)
            with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                    der = tls.getpeercert(binary_form=True)
            assert der is not None
            return int(x509.load_der_x509_certificate(der).serial_number)

        before = await asyncio.to_thread(serial)
        ca.issue("controller")  # rotated in place (atomic rename)
        assert await asyncio.to_thread(serial) != before
        live = await asyncio.to_thread(
            httpx.get, f"{url}/livez", verify=ca.client_context(client), timeout=5
        )  # still serving
        assert live.status_code == 200


async def test_a_tls_client_hello_on_the_plain_http_port_is_refused_and_the_port_keeps_serving(tmp_path: Path) -> None:
    async with serving(tmp_path / "n", None) as port:
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        with pytest.raises((ssl.SSLError, ConnectionError)):
            _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, ssl_handshake_timeout=5)
            writer.close()
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"http://127.0.0.1:{port}/livez", timeout=5)).status_code == 200


# --- refused handshakes, and a replaced CA bundle -----------------------------------------------------------

BOTH_LOOPS = pytest.mark.parametrize(
    "anyio_backend", [("asyncio", {}), ("asyncio", {"use_uvloop": True})], ids=["asyncio", "uvloop"]
)
TRUNCATED_CLIENT_HELLO = b"\x16\x03\x01\x00\xc8\x01\x00"  # a ClientHello's first 7 bytes, then nothing


def tls_client(pair: Pair | None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    if pair is not None:
        ctx.load_cert_chain(pair.cert, pair.key)
    return ctx


def get(port: int, ctx: ssl.SSLContext | None, data: bytes = b"", path: str = "/livez") -> tuple[str, bytes]:
    """(our host:port, the answer) of one request over TLS with `ctx`, or of `data` sent plain (no answer)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        me = "{}:{}".format(*raw.getsockname()[:2])
        if ctx is None:
            raw.sendall(data)
            return me, b""
        answer = b""
        try:
            with ctx.wrap_socket(raw) as s:
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
                while chunk := s.recv(65536):
                    answer += chunk
        except (ssl.SSLError, OSError):
            pass
        return me, answer


@contextlib.asynccontextmanager
async def https_server(root: Path, ca: CA, trust: str) -> AsyncIterator[tuple[ControllerServer, int]]:
    https = client_auth(ca, ca.issue("controller"), trust)
    raft, http = free_ports(2)
    settings = replace(SETTINGS, http_tls=True, remoting_tls=https)
    server = ControllerServer(service_options(root, [raft], 0, GROUP_RAFT), settings, ("127.0.0.1", http))
    await server.start()
    try:
        yield server, http
    finally:
        await server.stop()


def refusal_lines(caplog: pytest.LogCaptureFixture, peer: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.getMessage().startswith(f"HTTP connection from {peer} refused: ") and r.levelno == logging.WARNING
    ]


@BOTH_LOOPS  # uvloop: what controllerd runs
async def test_each_refused_https_handshake_is_logged_once_with_the_address_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="controllerd.tls")
    ca, other = CA(tmp_path / "pki"), CA(tmp_path / "other", "other-ca")
    good, expired, foreign = ca.issue("operator"), ca.issue("old", expired=True), other.issue("operator")
    async with https_server(tmp_path / "n", ca, ca.path) as (server, port):
        counts = server.app.state.gateway.metrics.tls_refusals
        cases = [
            ("expired", tls_client(expired), b"", "certificate has expired"),
            ("bad_certificate", tls_client(foreign), b"", "client certificate refused"),
            ("no_certificate", tls_client(None), b"", "no client certificate"),
            ("plain_on_enforcing", None, b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n", "a plain connection"),
            ("truncated_handshake", None, TRUNCATED_CLIENT_HELLO, "closed during the TLS handshake"),
        ]
        for reason, ctx, data, text in cases:
            me, answer = await asyncio.to_thread(get, port, ctx, data)
            assert not answer.startswith(b"HTTP/"), reason
            await eventually(lambda r=reason: counts[("http", r)] == 1)  # type: ignore[misc]
            lines = refusal_lines(caplog, me)
            assert len(lines) == 1 and text in lines[0], (reason, lines)
        _, metrics = await asyncio.to_thread(get, port, tls_client(good), path="/metrics")
        assert metrics.startswith(b"HTTP/1.1 200")
        for reason, *_ in cases:
            assert re.search(
                rf'controllerd_tls_refused_total{{[^}}]*listener="http"[^}}]*reason="{reason}"}} 1\.0', metrics.decode()
            )
        assert sum(n for (listener, _), n in counts.items() if listener == "http") == len(cases)


@BOTH_LOOPS  # uvloop: what controllerd runs
async def test_a_replaced_ca_bundle_applies_to_the_next_https_connection(tmp_path: Path) -> None:
    old_ca, new_ca = CA(tmp_path / "old"), CA(tmp_path / "new", "new-ca")
    trust = str(tmp_path / "trust.pem")  # tls.server.trustCertPath
    write(trust, old_ca.cert.public_bytes(serialization.Encoding.PEM))
    old_client, new_client = old_ca.issue("operator"), new_ca.issue("operator")
    async with https_server(tmp_path / "n", old_ca, trust) as (server, port):
        counts = server.app.state.gateway.metrics.tls_refusals

        async def answered(pair: Pair) -> bool:
            _, answer = await asyncio.to_thread(get, port, tls_client(pair))
            return answer.startswith(b"HTTP/1.1 200")

        assert await answered(old_client) and not await answered(new_client)
        await eventually(lambda: counts[("http", "bad_certificate")] == 1)
        write(trust, new_ca.cert.public_bytes(serialization.Encoding.PEM))  # the CA rotated: no restart
        assert await answered(new_client) and not await answered(old_client)  # the file's change alone
        server.reload_tls()  # and what SIGHUP does
        assert await answered(new_client) and not await answered(old_client)
        await eventually(lambda: counts[("http", "bad_certificate")] == 3)


async def test_refusals_on_the_raft_port_reach_metrics_as_listener_raft(tmp_path: Path) -> None:
    from cli.config import peer_contexts

    ca = CA(tmp_path / "pki")
    raft, http = free_ports(2)
    me = f"127.0.0.1:{raft}"
    pair = ca.issue(me, file="peer")
    opts = service_options(tmp_path / "n", [raft], 0, GROUP_RAFT)
    opts = replace(opts, node=replace(opts.node, tls=peer_contexts(pair.cert, pair.key, None, ca.path)))
    server = ControllerServer(opts, SETTINGS, ("127.0.0.1", http))
    await server.start()
    try:
        await asyncio.to_thread(get, raft, None, b"plain bytes on the raft port")
        await asyncio.to_thread(get, raft, None, TRUNCATED_CLIENT_HELLO)

        def scrape() -> str:
            return httpx.get(f"http://127.0.0.1:{http}/metrics", timeout=5).text

        def count(text: str, reason: str) -> str | None:
            series = rf'controllerd_tls_refused_total{{[^}}]*listener="raft"[^}}]*reason="{reason}"}} (\S+)'
            m = re.search(series, text)
            return m.group(1) if m else None

        async with asyncio.timeout(5):
            while count(text := await asyncio.to_thread(scrape), "truncated_handshake") is None:
                await asyncio.sleep(0.01)
        assert count(text, "plain_on_enforcing") == "1.0" and count(text, "truncated_handshake") == "1.0"
        assert "controllerd_raft_transport_tls_refused_truncated" not in text  # by reason only in the TLS family
    finally:
        await server.stop()


async def test_half_open_https_handshakes_are_bounded(tmp_path: Path) -> None:
    ca = CA(tmp_path / "pki")
    good = ca.issue("operator")
    async with https_server(tmp_path / "n", ca, ca.path) as (server, port):
        acceptor = server._acceptor
        assert acceptor is not None
        acceptor.handshakes_max, acceptor.handshake_timeout_s = 2, 0.5
        counts = server.app.state.gateway.metrics.tls_refusals
        held = []
        try:
            for _ in range(3):  # each sends the start of a ClientHello and then nothing
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(TRUNCATED_CLIENT_HELLO)
                held.append(writer)
            await eventually(lambda: counts[("http", "too_many_handshakes")] == 1)
            await eventually(lambda: counts[("http", "handshake_timeout")] == 2)
            _, answer = await asyncio.to_thread(get, port, tls_client(good))
            assert answer.startswith(b"HTTP/1.1 200")  # the port keeps serving
        finally:
            for w in held:
                w.close()


async def test_members_call_each_other_over_https_with_their_certificate(tmp_path: Path) -> None:
    """The leader's feature-level and hash requests and a follower's alarm forwarding (api/http/members.py) use
    https:// when controllerHttpTls is on, verify the member against tls.server.trustCertPath and present the
    node's own certificate, which a member requiring client certificates asks for."""
    ca = CA(tmp_path / "pki")
    https = client_auth(ca, ca.issue("controller"))
    settings = replace(SETTINGS, http_tls=True, remoting_tls=https)
    async with serving(tmp_path / "n", https) as port:
        r = await member_request(settings, "GET", f"127.0.0.1:{port}", "/api/v1/raft/features", 5)
        assert r.status_code == 200 and r.json()["body"]["maxLevel"] >= 1, r.text
        anonymous = replace(settings, remoting_tls=replace(https, cert_path="", key_path=""))
        with pytest.raises(httpx.HTTPError):  # no certificate of its own: the member refuses the handshake
            await member_request(anonymous, "GET", f"127.0.0.1:{port}", "/api/v1/raft/features", 5)
        stranger = CA(tmp_path / "other")
        wrong_ca = replace(settings, remoting_tls=replace(https, trust_cert_path=stranger.path))
        with pytest.raises(httpx.HTTPError):  # a member whose certificate another CA signed is not believed
            await member_request(wrong_ca, "GET", f"127.0.0.1:{port}", "/api/v1/raft/features", 5)
