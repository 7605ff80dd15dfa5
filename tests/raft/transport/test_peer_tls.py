"""Mutual TLS between peers (jRaftTls*; raft/transport/tcp.py): peers with certificates naming their ids exchange
messages; a peer whose certificate names another id than it speaks as, a server that is not the peer dialled,
and a plain-TCP peer are refused, and nothing they send is delivered."""

from __future__ import annotations

import asyncio
import socket
import ssl
from pathlib import Path

import pytest
from cryptography import x509

from cli.config import PeerFiles, peer_contexts
from raft.options import PeerTls
from raft.transport import TcpTransport
from tests.raft.transport.test_transport import DEADLINE, FAST, LOCAL, SECRET, Inbox, eventually, hb
from tools.pki import CA


def tls_for(ca: CA, name: str) -> PeerTls:
    pair = ca.issue(name, file=f"peer-{name}")
    return peer_contexts(pair.cert, pair.key, None, ca.path)


def test_peers_need_a_certificate_that_names_them(tmp_path: Path) -> None:
    ca = CA(tmp_path)
    tls = {name: tls_for(ca, name) for name in ("a", "b", "c")}

    async def main() -> None:
        inbox = {i: Inbox() for i in ("a", "b", "mallory", "plain")}
        b = TcpTransport("b", LOCAL, {}, SECRET, inbox["b"], FAST, tls["b"])
        a = TcpTransport("a", LOCAL, {}, SECRET, inbox["a"], FAST, tls["a"])
        # knows the secret and speaks as "a", but holds c's certificate
        mallory = TcpTransport("a", LOCAL, {}, SECRET, inbox["mallory"], FAST, tls["c"])
        plain = TcpTransport("a", LOCAL, {}, SECRET, inbox["plain"], FAST)  # no TLS at all
        everyone = (b, a, mallory, plain)
        for t in everyone:
            await t.start()
        try:
            a.update_peers({"b": b.address})
            a.send([hb("a", "b", 1)])
            assert [m.seq for m in await inbox["b"].wait(1)] == [1]

            for impostor in (mallory, plain):
                impostor.update_peers({"b": b.address})
                impostor.send([hb("a", "b", 2)])
            await eventually(lambda: b.stats()["identity_mismatch"] >= 1)
            # a dials "b" at c's listener (mallory's): the certificate there names c, so a refuses it
            c_listener = TcpTransport("c", LOCAL, {}, SECRET, Inbox(), FAST, tls["c"])
            await c_listener.start()
            try:
                a.update_peers({"b": c_listener.address})
                a.send([hb("a", "b", 3)])
                await eventually(lambda: a.stats()["identity_mismatch"] >= 1)
            finally:
                await c_listener.close()
            assert [m.seq for m in inbox["b"].messages] == [1]  # nothing from an impostor got through
        finally:
            for t in everyone:
                await t.close()

    asyncio.run(asyncio.wait_for(main(), DEADLINE * 4))


def test_check_config_refuses_a_certificate_for_another_node(tmp_path: Path) -> None:
    from cli.config import ConfigError, parse_config
    from tests.cli.test_config import LOOPBACK

    ca = CA(tmp_path)
    mine = ca.issue("127.0.0.1:9881", file="n1")
    other = ca.issue("127.0.0.1:9882", file="n2")

    def conf(pair_cert: str, pair_key: str) -> str:
        return LOOPBACK + (
            f"jRaftTlsCertPath={pair_cert}\njRaftTlsKeyPath={pair_key}\njRaftTlsTrustCertPath={ca.path}\n"
        )

    cfg, _ = parse_config(conf(mine.cert, mine.key), "n.conf")
    assert cfg.peer_tls_cert_path == mine.cert
    with pytest.raises(ConfigError, match=r"jRaftTlsCertPath=.*: the certificate names '127.0.0.1:9882', not this"):
        parse_config(conf(other.cert, other.key), "n.conf")
    with pytest.raises(
        ConfigError, match=r"jRaftTlsTrustCertPath= \(default; not set in the file\): peer TLS needs jRaftTlsCertPath"
    ):
        parse_config(LOOPBACK + f"jRaftTlsCertPath={mine.cert}\njRaftTlsKeyPath={mine.key}\n", "n.conf")


def test_a_rotated_peer_certificate_is_served_and_used_without_a_restart(tmp_path: Path) -> None:
    ca = CA(tmp_path)
    pairs = {name: ca.issue(name, file=f"peer-{name}") for name in ("a", "b")}
    tls = {name: peer_contexts(p.cert, p.key, None, ca.path) for name, p in pairs.items()}

    def served_serial(address: tuple[str, int]) -> int:
        ctx = ssl.create_default_context(cafile=ca.path)
        ctx.check_hostname = False
        ctx.load_cert_chain(pairs["a"].cert, pairs["a"].key)
        with socket.create_connection(address, timeout=5) as raw, ctx.wrap_socket(raw) as s:
            der = s.getpeercert(binary_form=True)
        assert der is not None
        return int(x509.load_der_x509_certificate(der).serial_number)

    async def main() -> None:
        inbox = Inbox()
        b = TcpTransport("b", LOCAL, {}, SECRET, inbox, FAST, tls["b"])
        a = TcpTransport("a", LOCAL, {}, SECRET, Inbox(), FAST, tls["a"])
        await b.start()
        await a.start()
        try:
            before = await asyncio.to_thread(served_serial, b.address)
            ca.issue("b", file="peer-b")  # b's files replaced (atomic rename): no restart
            assert await asyncio.to_thread(served_serial, b.address) != before
            ca.issue("a", file="peer-a")  # a's client certificate too: its next connection presents the new one
            a.update_peers({"b": b.address})
            a.send([hb("a", "b", 7)])
            assert [m.seq for m in await inbox.wait(1)] == [7]
            assert isinstance(tls["a"], PeerFiles) and tls["a"].files.reloads == 1
        finally:
            await a.close()
            await b.close()

    asyncio.run(asyncio.wait_for(main(), DEADLINE * 4))
