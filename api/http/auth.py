"""Bearer-token check of the admin and raft endpoints (controllerAdminToken).

No token configured: no check (the daemon refuses to bind a non-loopback address without one). Otherwise
`Authorization: Bearer <token>` must carry it; the comparison is constant-time. A missing or wrong token
is 401 with a `WWW-Authenticate` challenge (RFC 6750), before the body is even validated.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.service import ApiError

REALM = "controllerd"
bearer = HTTPBearer(auto_error=False, description="controllerAdminToken", scheme_name="adminToken")


def _token(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip()


def check(request: Request) -> ApiError | None:
    """None if the request may pass, else the 401 to answer."""
    expected = request.app.state.gateway.settings.admin_tokens()
    if expected is None:
        return None
    given = _token(request)
    if given is None:
        challenge = f'Bearer realm="{REALM}"'
        return ApiError(
            401,
            "UNAUTHORIZED",
            "an admin bearer token is required (Authorization: Bearer <token>)",
            headers={"WWW-Authenticate": challenge},
        )
    # Constant-time, and every accepted token is compared: the time says nothing about which one is close.
    if not sum(hmac.compare_digest(given.encode("utf-8"), t.encode("utf-8")) for t in expected):
        challenge = f'Bearer realm="{REALM}", error="invalid_token"'
        return ApiError(401, "UNAUTHORIZED", "the bearer token is wrong", headers={"WWW-Authenticate": challenge})
    return None


async def require_admin(
    request: Request, _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> None:
    """Router dependency of /api/v1/admin and /api/v1/raft (documents the scheme in OpenAPI)."""
    denied = check(request)
    if denied is not None:
        raise denied


def protected(request: Request) -> bool:
    route = request.scope.get("route")
    return any(d.dependency is require_admin for d in getattr(route, "dependencies", ()))


def denied(request: Request) -> ApiError | None:
    """For the 422 handler: the 401 to answer instead, when the route is protected and the caller is not
    authorized."""
    return check(request) if protected(request) else None
