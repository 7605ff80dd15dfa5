"""HTTPS on controllerHttpAddr (controllerHttpTls): real uvicorn on loopback with the tls.server.* settings and
client certificates; rmqctl with https://, --cacert, --cert and --key; a replaced certificate served to the next
connection; and hostile input: a plain HTTP request on the HTTPS port, a TLS ClientHello on a plain HTTP port."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result
from cryptography import x509

from api.server import ControllerServer
from api.service.tls import TlsSettings
from cli.rmqctl import main as rmqctl
from raft.testing.cluster import free_ports
from tests.api.harness import GROUP_RAFT, SETTINGS, TOKEN, service_options
from tools.pki import CA

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
    https = TlsSettings(
        mode="disabled",  # HTTPS does not depend on the remoting port's mode
        config_file="",
        test_mode=False,
        need_client_auth="require",
        cert_path=server.cert,
        key_path=server.key,
        auth_client=True,
        trust_cert_path=ca.path,
    )
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
