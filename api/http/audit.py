"""The HTTP side of the audit log (api/service/audit.py): every state-changing admin request (POST, PUT, DELETE
under /api/v1/admin and /api/v1/raft, but the read POST /api/v1/admin/sync-state-data) that passed the token
check is recorded with its outcome once it is answered."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.service.audit import AuditLog
from api.service.settings import ApiSettings

PREFIXES = ("/api/v1/admin/", "/api/v1/raft/")
READS = frozenset({"/api/v1/admin/sync-state-data"})
MAX_CAPTURE = 64 * 1024  # the answer of an admin write is an envelope of a few hundred bytes


def audited(scope: Scope) -> bool:
    path = scope.get("path", "")
    return (
        scope.get("type") == "http"
        and scope.get("method") in ("POST", "PUT", "DELETE")
        and path.startswith(PREFIXES)
        and path not in READS
    )


class AuditMiddleware:
    def __init__(self, app: ASGIApp, audit: AuditLog, settings: ApiSettings) -> None:
        self.app, self.audit, self.settings = app, audit, settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not audited(scope):
            await self.app(scope, receive, send)
            return
        body = bytearray()
        answer = bytearray()
        status = 0

        async def receive_body() -> Message:
            message = await receive()
            if message["type"] == "http.request" and len(body) < MAX_CAPTURE:
                body.extend(message.get("body", b""))
            return message

        async def send_capture(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and len(answer) < MAX_CAPTURE:
                answer.extend(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive_body, send_capture)
        finally:
            if status and status != 401:  # 401: not authenticated, so not an accepted request
                self._record(scope, bytes(body), bytes(answer), status)

    def _record(self, scope: Scope, body: bytes, answer: bytes, status: int) -> None:
        client = scope.get("client")
        peer = f"{client[0]}:{client[1]}" if client else "?"
        who = "anonymous" if self.settings.admin_tokens() is None else "admin-token"
        fields: dict[str, object] = {"method": scope["method"], "path": scope["path"], "httpStatus": status}
        if body:
            try:
                fields["body"] = json.loads(body)
            except ValueError:
                fields["body"] = body.decode(errors="replace")
        code, remark = status, None
        try:
            envelope = json.loads(answer)
            if isinstance(envelope, dict) and isinstance(envelope.get("code"), int):
                code, remark = envelope["code"], envelope.get("remark")
        except ValueError:
            pass
        self.audit.record("http", who, peer, f"{scope['method']} {scope['path']}", fields, code, remark)
