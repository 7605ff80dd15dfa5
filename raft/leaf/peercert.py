"""Who is at the other end of a TLS connection: the subject CN of the certificate it presented and we verified.
Shared by the raft transport (a peer's certificate must name its raft id) and the remoting front end (the audit
log names a client by its certificate). A leaf module (raft/leaf/__init__.py): standard library only.
And the first-byte peek every TLS listener does before its handshake (`peek_first_byte`).
"""

from __future__ import annotations

import asyncio
import socket


def common_name(cert: object) -> str | None:
    """The subject CN of `ssl.SSLObject.getpeercert()`'s dict (a transport's "peercert"); None without one."""
    if not isinstance(cert, dict):
        return None
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


HANDSHAKE_RECORD = 0x16  # the first byte of a TLS connection: a handshake record


# The event loop's own TLS handshake timer (`ssl_handshake_timeout`) is set this much later than our deadline, an
# `asyncio.timeout` around the handshake: our timer is the one that refuses a slow handshake (counted
# `handshake_timeout`), and the loop's, which aborts with a ConnectionAbortedError (counted `truncated_handshake`),
# only backs it up. With both at the same instant, either could fire first (seen under uvloop).
HANDSHAKE_BACKSTOP_S = 1.0


def refusal_reason(exc: BaseException, timeout_s: float, *, their: str = "client") -> tuple[str, str]:
    """(counter label, log text) of a failed TLS handshake; `their` names the other end's role ("client" on a
    listener, "server" when we dialled). Shared by every TLS listener (remoting, HTTP, raft peers)."""
    import ssl

    if isinstance(exc, ssl.SSLCertVerificationError):
        message = exc.verify_message or str(exc)
        label = "expired" if "expired" in message else "bad_certificate"
        return label, f"{their} certificate refused: {message}"
    if isinstance(exc, ssl.SSLError):
        text = exc.reason or str(exc)
        if "PEER_DID_NOT_RETURN_A_CERTIFICATE" in text:
            return "no_certificate", "no client certificate (one is required)"
        if "UNKNOWN_CA" in text or "CERTIFICATE_UNKNOWN" in text or "BAD_CERTIFICATE" in text or "EXPIRED" in text:
            mine = "server" if their == "client" else "client"
            return "peer_refused_certificate", f"the {their} refused this {mine}'s certificate ({text})"
        return "handshake_failed", f"TLS handshake failed: {text}"
    if isinstance(exc, TimeoutError):
        return "handshake_timeout", f"TLS handshake not finished within {timeout_s:g} s"
    return "truncated_handshake", f"connection closed during the TLS handshake ({type(exc).__name__}: {exc})"


async def peek_first_byte(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> bytes:
    """The first byte a client sent on an accepted non-blocking socket, left in the socket for the transport
    (b"" when it closed first): how a TLS listener tells a handshake (HANDSHAKE_RECORD) from plain bytes."""
    while True:
        try:
            return sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            pass
        readable = loop.create_future()
        loop.add_reader(sock.fileno(), _wake, readable)
        try:
            await readable
        finally:
            loop.remove_reader(sock.fileno())


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
