"""Mutual TLS between peers (jRaftTls*; raft/transport/tcp.py): peers with certificates naming their ids exchange
messages; a peer whose certificate names another id than it speaks as, a server that is not the peer dialled,
and a plain-TCP peer are refused, and nothing they send is delivered. Every refused handshake (expired
certificate, another CA, a plain client, a truncated or too slow handshake), inbound or outbound, is one warning
naming the address and the reason and one count; a replaced CA bundle applies to the next connection."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import uvloop
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from cli.config import PeerFiles, peer_contexts
from raft.options import PeerTls
from raft.transport import TcpTransport
from raft.transport.tcp import format_address
from tests.raft.helpers import eventually
from tests.raft.transport.test_transport import (
    DEADLINE,
    FAST,
    LOCAL,
    SECRET,
    Inbox,
    hb,
)
from tools.pki import CA, write


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


# --- refused handshakes: one warning naming the address and the reason, one count ------------------------------

Runner = Callable[[Coroutine[Any, Any, None]], None]


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Runner:
    """Runs a test's coroutine on the stock loop and on uvloop (what controllerd runs), bounded."""

    def runner(coro: Coroutine[Any, Any, None]) -> None:
        bounded = asyncio.wait_for(coro, DEADLINE * 4)
        uvloop.run(bounded) if request.param == "uvloop" else asyncio.run(bounded)

    return runner


TRUNCATED_CLIENT_HELLO = b"\x16\x03\x01\x00\xc8\x01\x00"  # a ClientHello's first 7 bytes, then nothing


def raw_client(address: tuple[str, int], ctx: ssl.SSLContext | None, data: bytes = b"") -> str:
    """Connect, then either handshake with `ctx` (and read until the server closes) or send `data` and close;
    returns our host:port as the server sees it."""
    with socket.create_connection(address, timeout=5) as raw:
        me = "{}:{}".format(*raw.getsockname()[:2])
        if ctx is None:
            raw.sendall(data)
            return me
        try:
            with ctx.wrap_socket(raw) as s:
                s.recv(1)  # TLS 1.3: the server's refusal of our certificate arrives after our side finished
        except (ssl.SSLError, OSError):
            pass
    return me


def client_ctx(pair: object | None, trust: str | None = None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    if trust is None:
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx.load_verify_locations(cafile=trust)
    if pair is not None:
        ctx.load_cert_chain(pair.cert, pair.key)  # type: ignore[attr-defined]
    return ctx


def refusals(caplog: pytest.LogCaptureFixture, where: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "raft.transport.tcp" and "refused" in r.getMessage() and where in r.getMessage()
    ]


def test_each_refused_inbound_handshake_is_logged_once_with_the_address_and_counted(
    run: Runner, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="raft.transport.tcp")
    ca, other = CA(tmp_path / "ca"), CA(tmp_path / "other", "other-ca")
    expired = ca.issue("a", expired=True, file="expired")
    foreign = other.issue("a")
    tls = tls_for(ca, "b")

    async def main() -> None:
        b = TcpTransport("b", LOCAL, {}, SECRET, Inbox(), FAST, tls)
        await b.start()
        try:
            cases = [
                ("expired", client_ctx(expired), b"", "certificate has expired"),
                ("bad_certificate", client_ctx(foreign), b"", "certificate refused"),
                ("plain_on_enforcing", None, b"GET / HTTP/1.1\r\n\r\n", "a plain connection"),
                ("truncated_handshake", None, TRUNCATED_CLIENT_HELLO, "closed during the TLS handshake"),
            ]
            for reason, ctx, data, text in cases:
                before = b.stats()
                me = await asyncio.to_thread(raw_client, b.address, ctx, data)
                await eventually(lambda r=reason: b.stats().get(f"tls_refused_{r}", 0) == 1)  # type: ignore[misc]
                after = b.stats()
                assert after["tls_refused"] == before["tls_refused"] + 1, reason
                lines = refusals(caplog, me)
                assert len(lines) == 1 and text in lines[0], (reason, lines)
            assert b.stats()["frames_received"] == 0
        finally:
            await b.close()

    run(main())


def test_each_refused_outbound_handshake_is_logged_once_with_the_peer_and_counted(
    run: Runner, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="raft.transport.tcp")
    ca, other = CA(tmp_path / "ca"), CA(tmp_path / "other", "other-ca")
    old = ca.issue("b", expired=True, file="b-expired")
    listeners = {
        "expired": peer_contexts(old.cert, old.key, None, ca.path),
        "bad_certificate": tls_for(other, "b"),
    }

    async def main() -> None:
        a = TcpTransport("a", LOCAL, {}, SECRET, Inbox(), FAST, tls_for(ca, "a"))
        await a.start()
        try:
            for reason, server_tls in [*listeners.items(), ("truncated_handshake", None)]:
                b = TcpTransport("b", LOCAL, {}, SECRET, Inbox(), FAST, server_tls)  # None: a plain peer
                await b.start()
                try:
                    a.update_peers({"b": b.address})
                    a.send([hb("a", "b", 1)])
                    await eventually(lambda r=reason: a.stats().get(f"tls_refused_{r}", 0) == 1)  # type: ignore[misc]
                    lines = refusals(caplog, f"b at {format_address(b.address)}")
                    assert len(lines) == 1 and "outbound" in lines[0], (reason, lines)
                finally:
                    await b.close()
            assert a.stats()["tls_refused"] == 3 and a.stats()["connects"] == 0
        finally:
            await a.close()

    run(main())


def test_a_replaced_ca_bundle_applies_to_the_next_inbound_connection(run: Runner, tmp_path: Path) -> None:
    old_ca, new_ca = CA(tmp_path / "old"), CA(tmp_path / "new", "new-ca")
    trust = str(tmp_path / "trust.pem")  # b's jRaftTlsTrustCertPath
    write(trust, old_ca.cert.public_bytes(serialization.Encoding.PEM))
    both = str(tmp_path / "both.pem")  # the clients trust either CA (b's own certificate stays the old CA's)
    write(both, b"".join(c.cert.public_bytes(serialization.Encoding.PEM) for c in (old_ca, new_ca)))
    b_pair = old_ca.issue("b")
    b_tls = peer_contexts(b_pair.cert, b_pair.key, None, trust)
    old_a, new_a = old_ca.issue("a", file="a-old"), new_ca.issue("a", file="a-new")

    async def main() -> None:
        inbox = Inbox()
        b = TcpTransport("b", LOCAL, {}, SECRET, inbox, FAST, b_tls)
        await b.start()
        clients = {
            name: TcpTransport(
                "a", LOCAL, {"b": b.address}, SECRET, Inbox(), FAST, peer_contexts(p.cert, p.key, None, both)
            )
            for name, p in (("old", old_a), ("new", new_a))
        }
        for c in clients.values():
            await c.start()
        seq = 0

        async def gets_through(name: str) -> bool:
            nonlocal seq
            seq += 1
            refused = b.stats()["tls_refused"]
            clients[name].send([hb("a", "b", seq)])
            await eventually(lambda: b.stats()["tls_refused"] > refused or seq in [m.seq for m in inbox.messages])
            return seq in [m.seq for m in inbox.messages]

        try:
            assert await gets_through("old") and not await gets_through("new")
            write(trust, new_ca.cert.public_bytes(serialization.Encoding.PEM))  # the CA rotated: no restart
            assert b_tls.reload()  # what SIGHUP does (the file's change alone triggers it as well)
            for c in clients.values():  # new connections: drop the established ones, and the back-off
                await c.close()
            clients.update(
                {
                    name: TcpTransport(
                        "a", LOCAL, {"b": b.address}, SECRET, Inbox(), FAST, peer_contexts(p.cert, p.key, None, both)
                    )
                    for name, p in (("old", old_a), ("new", new_a))
                }
            )
            for c in clients.values():
                await c.start()
            assert await gets_through("new") and not await gets_through("old")
            assert b.stats()["tls_refused_bad_certificate"] == 2
        finally:
            for c in clients.values():
                await c.close()
            await b.close()

    run(main())


def test_half_open_handshakes_are_bounded_in_number_and_time(run: Runner, tmp_path: Path) -> None:
    ca = CA(tmp_path)
    tight = replace(FAST, max_unauthenticated_connections=2, auth_timeout_s=0.5)

    async def main() -> None:
        inbox = Inbox()
        b = TcpTransport("b", LOCAL, {}, SECRET, inbox, tight, tls_for(ca, "b"))
        a = TcpTransport("a", LOCAL, {}, SECRET, Inbox(), FAST, tls_for(ca, "a"))
        await b.start()
        await a.start()
        held = []
        try:
            for _ in range(3):  # each sends the start of a ClientHello and then nothing
                _, writer = await asyncio.open_connection(*b.address)
                writer.write(TRUNCATED_CLIENT_HELLO)
                held.append(writer)
            await eventually(lambda: b.stats().get("tls_refused_too_many_handshakes", 0) == 1)
            await eventually(lambda: b.stats().get("tls_refused_handshake_timeout", 0) == 2)
            a.update_peers({"b": b.address})
            a.send([hb("a", "b", 1)])  # a real peer still gets in
            assert [m.seq for m in await inbox.wait(1)] == [1]
        finally:
            for w in held:
                w.close()
            await a.close()
            await b.close()

    run(main())
