"""Who is at the other end of a TLS connection: the subject CN of the certificate it presented and we verified.
Shared by the raft transport (a peer's certificate must name its raft id) and the remoting front end (the audit
log names a client by its certificate). A leaf module (raft/leaf/__init__.py): standard library only."""

from __future__ import annotations


def common_name(cert: object) -> str | None:
    """The subject CN of `ssl.SSLObject.getpeercert()`'s dict (a transport's "peercert"); None without one."""
    if not isinstance(cert, dict):
        return None
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None
