"""TLS on the remoting port (api/service/tls.py, api/remoting/server.py): RocketMQ's modes on one port, client
certificates, each refusal logged and counted, certificates reloaded on a file change, and hostile handshakes.
One started node serves every case (module-scoped); each case starts its own listener on it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from cryptography import x509

from api.remoting import headers as H
from api.remoting.client import RemotingClient
from api.remoting.server import RemotingServer
from api.service.metrics import ControllerMetrics
from api.service.tls import TlsError, TlsSettings
from statemachine import codes as C
from tests.api.harness import SETTINGS, Node, remoting_group, settled, solo
from tools.pki import CA

pytestmark = pytest.mark.anyio


class Pki:
    def __init__(self, root: Path) -> None:
        self.ca = CA(root, "ca")
        self.other = CA(root, "other-ca")
        self.server = self.ca.issue("server")
        self.client = self.ca.issue("broker-a")
        self.expired = self.ca.issue("old-broker", expired=True)
        self.stranger = self.other.issue("stranger")

    def settings(self, mode: str, need: str = "require") -> TlsSettings:
        return TlsSettings(
            mode=mode,
            config_file="",
            test_mode=False,
            need_client_auth=need,
            cert_path=self.server.cert,
            key_path=self.server.key,
            auth_client=True,
            trust_cert_path=self.ca.path,
        )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
async def node(anyio_backend: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Node]:
    async with solo(tmp_path_factory.mktemp("tls")) as n:
        yield n


@contextlib.asynccontextmanager
async def listener(node: Node, tls: TlsSettings) -> AsyncIterator[RemotingServer]:
    metrics = ControllerMetrics(node.service, {})
    server = RemotingServer(node.service, replace(SETTINGS, remoting_tls=tls), ("127.0.0.1", 0), metrics)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def metadata(port: int, tls: ssl.SSLContext | None = None) -> int:
    """The answer code of GET_METADATA_INFO (1005) on a new connection."""
    client = await RemotingClient.connect("127.0.0.1", port, tls=tls)
    try:
        return (await client.request(H.GET_METADATA_INFO, {})).code
    finally:
        client.close()


async def refused(server: RemotingServer, reason: str, before: int) -> None:
    """Until the listener counted one more refusal for `reason` (the refusal is logged and counted after the
    client already saw its connection end)."""
    async with asyncio.timeout(10):
        while server.refusals.get(reason, 0) <= before:
            await asyncio.sleep(0.01)  # a bounded poll of the counter


async def closed_without_answer(port: int, tls: ssl.SSLContext | None) -> None:
    """The connection (or its handshake) fails: no request is served."""
    with pytest.raises((ConnectionError, ssl.SSLError, OSError)):
        await metadata(port, tls)


async def test_permissive_serves_tls_and_plain_on_one_port(node: Node, pki: Pki) -> None:
    async with listener(node, pki.settings("permissive", need="none")) as server:
        assert await metadata(server.port) == C.SUCCESS
        assert await metadata(server.port, pki.ca.client_context()) == C.SUCCESS
        assert server.refusals == {}


async def test_enforcing_refuses_each_bad_client_with_a_log_line_and_a_counter(
    node: Node, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "controllerd.remoting")
    async with listener(node, pki.settings("enforcing")) as server:
        assert await metadata(server.port, pki.ca.client_context(pki.client)) == C.SUCCESS
        cases: list[tuple[str, ssl.SSLContext | None]] = [
            ("plain_on_enforcing", None),
            ("bad_certificate", pki.ca.client_context(pki.stranger)),  # another CA signed it
            ("expired", pki.ca.client_context(pki.expired)),
            ("no_certificate", pki.ca.client_context()),
        ]
        for reason, ctx in cases:
            await closed_without_answer(server.port, ctx)
            await refused(server, reason, 0)

        # a client that does not trust this server's CA aborts the handshake itself, with an alert saying so
        # (a blocking socket: OpenSSL sends the alert before it raises)
        def distrust() -> None:
            with socket.create_connection(("127.0.0.1", server.port)) as raw:
                with pytest.raises(ssl.SSLCertVerificationError):
                    pki.other.client_context(pki.stranger).wrap_socket(raw, server_hostname="127.0.0.1")

        await asyncio.to_thread(distrust)
        await refused(server, "peer_refused_certificate", 0)
        # plain HTTP on the TLS port: refused as any plain client (never redirected as on a plain port)
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await refused(server, "plain_on_enforcing", 1)
        # a truncated handshake: the start of a ClientHello, then the client goes away
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            s.sendall(b"\x16\x03\x01\x00\xc8\x01\x00")
        await refused(server, "truncated_handshake", 0)
        expected = {reason for reason, _ in cases} | {"truncated_handshake", "peer_refused_certificate"}
        assert set(server.refusals) == expected and server.refusals["plain_on_enforcing"] == 2
        lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
        assert len(lines) == sum(server.refusals.values()), lines
        assert all("remoting connection from 127.0.0.1:" in line for line in lines)
        assert any("certificate has expired" in line for line in lines)
        scrape = server.metrics.render().decode() if server.metrics else ""
        for reason, n in server.refusals.items():
            assert f'controllerd_tls_refused_total{{listener="remoting",reason="{reason}"}} {n}.0' in scrape
        assert await metadata(server.port, pki.ca.client_context(pki.client)) == C.SUCCESS  # still serving


async def test_disabled_names_a_tls_client_and_serves_plain(node: Node, pki: Pki) -> None:
    async with listener(node, TlsSettings()) as server:
        await closed_without_answer(server.port, pki.ca.client_context())
        await refused(server, "tls_disabled", 0)
        assert await metadata(server.port) == C.SUCCESS


async def test_a_replaced_certificate_is_served_to_the_next_connection(node: Node, pki: Pki, tmp_path: Path) -> None:
    ca = CA(tmp_path, "rotating-ca")
    first = ca.issue("server")
    tls = replace(pki.settings("enforcing", need="none"), cert_path=first.cert, key_path=first.key)

    async def served_serial(port: int) -> int:
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ca.client_context())
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        writer.close()
        return int(x509.load_der_x509_certificate(der).serial_number)

    async with listener(node, tls) as server:
        before = await served_serial(server.port)
        second = ca.issue("server")  # written over the same files, atomically
        assert second == first
        after = await served_serial(server.port)
        assert after != before
        assert server.tls is not None and server.tls.reloads == 1  # the change
        # a broken replacement keeps the last good certificate in service
        Path(first.key).write_text("not a key\n")
        assert await served_serial(server.port) == after
        assert not server.tls.reload()


async def test_half_open_handshakes_are_bounded_and_the_port_keeps_serving(node: Node, pki: Pki) -> None:
    """10,000 connections that start a TLS handshake and never finish it: at most `handshakes_max` are held
    (the oldest is dropped for a newer one), a broker connected before keeps being answered, and a new client
    completes its handshake at once."""
    async with listener(node, pki.settings("enforcing")) as server:
        server.handshakes_max = 256
        broker = await RemotingClient.connect("127.0.0.1", server.port, tls=pki.ca.client_context(pki.client))
        loop = asyncio.get_running_loop()
        socks: list[socket.socket] = []
        peak = 0
        try:
            for _ in range(10_000 // 500):
                batch = [socket.socket() for _ in range(500)]
                for s in batch:
                    s.setblocking(False)
                await asyncio.gather(*(loop.sock_connect(s, ("127.0.0.1", server.port)) for s in batch))
                for s in batch:
                    s.send(b"\x16\x03\x01\x00\xc8\x01\x00")  # a ClientHello's first bytes, never the rest
                socks += batch
                peak = max(peak, server.handshaking)
                assert (await broker.request(H.GET_METADATA_INFO, {})).code == C.SUCCESS
            assert peak <= server.handshakes_max
            assert await metadata(server.port, pki.ca.client_context(pki.client)) == C.SUCCESS
            assert server.handshaking <= server.handshakes_max
        finally:
            for s in socks:
                s.close()
            broker.close()
        assert server.refusals.get("too_many_handshakes", 0) > 0


def test_settings_refuse_what_rocketmq_would_silently_accept(pki: Pki, tmp_path: Path) -> None:
    good = pki.settings("enforcing")
    with pytest.raises(TlsError, match=r"tls.server.mode=strict \(default\): must be one of"):
        replace(good, mode="strict").effective()
    with pytest.raises(TlsError, match="tls.server.authClient=false .*would not be verified"):
        replace(good, auth_client=False).effective()
    # tls.config.file wins over the keys, and names its file:line when wrong
    conf = tmp_path / "tls.properties"
    conf.write_text(f"tls.server.need.client.auth=none\ntls.server.certPath={pki.server.cert}\n")
    s = replace(good, config_file=str(conf), need_client_auth="require").effective()
    assert s.need_client_auth == "none" and s.where("tls.server.need.client.auth") == f"{conf}:1"
    conf.write_text("tls.server.authClient=yes\n")
    with pytest.raises(TlsError, match=rf"tls.server.authClient=yes \({conf}:1\): must be true or false"):
        replace(good, config_file=str(conf)).effective()


async def test_a_follower_forwards_a_config_update_to_the_leader_over_tls(pki: Pki, tmp_path: Path) -> None:
    """mqadmin updateControllerConfig -a <a follower>: the follower passes the 1009 to the leader's enforcing
    port over TLS, presenting its own certificate (tls.server.certPath) as a client certificate."""
    async with remoting_group(tmp_path, replace(SETTINGS, remoting_tls=pki.settings("enforcing"))) as g:
        nodes, rports, servers = g.nodes, g.rports, g.servers
        leader = await settled(nodes)
        follower = next(i for i, n in enumerate(nodes) if n is not leader)
        client = await RemotingClient.connect("127.0.0.1", rports[follower], tls=pki.ca.client_context(pki.client))
        try:
            r = await client.request(C.UPDATE_CONTROLLER_CONFIG, body=b"electMasterMaxRetryCount=4\n")
        finally:
            client.close()
        assert (r.code, r.remark) == (C.SUCCESS, None), r
        assert leader.service.replicated_config()["electMasterMaxRetryCount"] == 4
        assert all(s.refusals == {} for s in servers)
