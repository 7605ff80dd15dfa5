"""One router per area: controller (brokers), admin, kv, raft, health (with /metrics)."""

from __future__ import annotations

from api.http.models import ErrorBody
from statemachine.values import JSONObject

ERRORS: dict[int | str, JSONObject] = {
    413: {"model": ErrorBody, "description": "the body is larger than the limit (BODY_TOO_LARGE); nothing proposed"},
    422: {"model": ErrorBody, "description": "malformed input (VALIDATION_ERROR) naming the field; nothing proposed"},
    503: {"model": ErrorBody, "description": "not served in time (UNAVAILABLE); a proposal's outcome is unknown"},
}
PROTECTED_ERRORS: dict[int | str, JSONObject] = {
    **ERRORS,
    401: {"model": ErrorBody, "description": "missing or wrong admin bearer token (UNAUTHORIZED)"},
}
