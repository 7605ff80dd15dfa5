"""How a node calls another member's HTTP API (the leader's corruption check and feature level, a follower's
alarm forwarding): with this node's admin token, over HTTPS when `controllerHttpTls` serves HTTPS.

Over HTTPS a node verifies the member's certificate against `tls.server.trustCertPath` (every member serves
the same CA's certificates) and presents its own certificate, which a member that requires client
certificates asks for. In `tls.test.mode.enable` (certificates not checked, as RocketMQ's test mode) it
verifies nothing. The context is built per call, from the files as they are now, so a rotated certificate
or CA applies at once (these calls are rare: one per member every check interval).
"""

from __future__ import annotations

import ssl

import httpx

from api.service.settings import ApiSettings
from statemachine.values import JSONObject


def member_tls(settings: ApiSettings) -> ssl.SSLContext | None:
    """The client context for a member's HTTPS port; None when HTTP is plain."""
    if not settings.http_tls:
        return None
    tls = settings.remoting_tls.effective()
    if tls.test_mode or not tls.trust_cert_path:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx = ssl.create_default_context(cafile=tls.trust_cert_path)
    if tls.cert_path and tls.key_path:
        ctx.load_cert_chain(tls.cert_path, tls.key_path, tls.key_password)
    return ctx


async def member_request(
    settings: ApiSettings, method: str, address: str, path: str, timeout_s: float, body: JSONObject | None = None
) -> httpx.Response:
    """One request to the member at `address` ("host:port" of its HTTP API); httpx.HTTPError when it fails."""
    tokens = settings.admin_tokens()
    headers = {"Authorization": f"Bearer {tokens[0]}"} if tokens else {}
    ctx = member_tls(settings)
    scheme = "https" if ctx is not None else "http"
    async with httpx.AsyncClient(timeout=timeout_s, verify=ctx or True) as client:
        return await client.request(method, f"{scheme}://{address}{path}", json=body, headers=headers)
