"""The FastAPI application of one controller node: `create_app(service, settings)`.

The lead's api/server.py runs it under uvicorn in the node's event loop; every route is `async` and
touches the service on that loop only. docs/http.md is the reference.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from api.http.audit import AuditMiddleware
from api.http.errors import BodyLimitMiddleware, install_handlers
from api.http.models import LONG_MAX, LONG_MIN
from api.http.routes import admin, alarms, controller, health, kv, raft
from api.http.routes.common import Gateway
from api.http.ui import make_router as ui_router
from api.service import ControllerService
from api.service.audit import AuditLog
from api.service.metrics import ControllerMetrics
from api.service.settings import ApiSettings
from statemachine.values import JSON, JSONObject

__all__ = ["ApiSettings", "create_app", "metric_labels"]

DOCS_ASSETS = "/docs-assets"

TAGS = [
    {"name": "controller", "description": "Broker requests (RocketMQ controller request codes)."},
    {"name": "admin", "description": "mqadmin's controller verbs. Bearer token when one is configured."},
    {"name": "kv", "description": "Replicated namespaced key/value config."},
    {"name": "raft", "description": "Raft status and operations. Bearer token when one is configured."},
    {"name": "health", "description": "Liveness and readiness (etcd conventions)."},
    {"name": "alarms", "description": "Raised alarms (NOSPACE); disarm. Bearer token when one is configured."},
    {"name": "metrics", "description": "Prometheus metrics."},
]
DESCRIPTION = """A RocketMQ controller of the jRaft kind. Every /api/v1 operation answers HTTP 200 with the
envelope `{code, codeName, remark, header, body}` (RocketMQ response codes; 2007 CONTROLLER_NOT_LEADER names
the leader in `header.controllerLeaderId` / `header.controllerLeaderAddress`). Malformed input is 422,
a body over the limit 413, a missing or wrong admin token 401, a request not served in time 503
(its outcome is then unknown), all with a JSON error naming the field or limit."""


def metric_labels(service: ControllerService, settings: ApiSettings) -> dict[str, str]:
    """The constant labels of every series: address, group, peer_id, then the metricsLabel pairs."""
    labels = {
        "address": settings.address if settings.address is not None else service.id,
        "group": settings.group if settings.group is not None else service.opts.group_id,
        "peer_id": settings.peer_id if settings.peer_id is not None else service.id,
    }
    for k, v in settings.metrics_labels.items():
        labels.setdefault(k, v)
    return labels


def create_app(service: ControllerService, settings: ApiSettings | None = None) -> FastAPI:
    """The HTTP API of `service`. Subscribes the metrics to the service's results (one app per service)."""
    settings = settings if settings is not None else ApiSettings()
    metrics = ControllerMetrics(service, metric_labels(service, settings))
    service.listeners.append(metrics.on_result)
    # FastAPI's native OpenTelemetry hooks would ask the global providers on every request; we export
    # Prometheus metrics instead, so they are off (measured: about 6% of the leader's CPU).
    # FastAPIOffline: /docs and /redoc load Swagger UI and ReDoc from the pinned fastapi-offline package
    # (under /docs-assets), not from a CDN, so they work on an air-gapped network.
    app = FastAPIOffline(
        title="controllerd",
        version="1",
        description=DESCRIPTION,
        openapi_tags=TAGS,
        static_url=DOCS_ASSETS,
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.gateway = Gateway(service, settings, metrics)
    service.alarm_forwarder = alarms.forwarder(service, settings)
    service.peer_hashes = raft.hash_fetcher(service, settings)
    service.peer_features = raft.feature_fetcher(service, settings)
    install_handlers(app)
    app.add_middleware(
        BodyLimitMiddleware, max_bytes=settings.max_body_bytes, on_reject=lambda: metrics.rejected("body_too_large")
    )
    if settings.audit_log:
        app.add_middleware(AuditMiddleware, audit=AuditLog.open(settings.audit_log), settings=settings)
    for module in (controller, admin, kv, raft, alarms, health):
        app.include_router(module.router)
    app.include_router(ui_router(service))  # the status page at /ui/ (docs/ui.md)
    _exact_longs(app)
    return app


def _exact_longs(app: FastAPI) -> None:
    """FastAPI's OpenAPI model holds `minimum`/`maximum` as floats, which turns Java's long bounds into
    ±9.223372036854776e18 (outside the range by one); put the exact integers back."""
    exact = {float(LONG_MAX): LONG_MAX, float(LONG_MIN): LONG_MIN}
    build = app.openapi

    def fix(node: JSON) -> None:
        if isinstance(node, dict):
            for k in ("minimum", "maximum"):
                v = node.get(k)
                if isinstance(v, float) and v in exact:
                    node[k] = exact[v]
            for v in node.values():
                fix(v)
        elif isinstance(node, list):
            for v in node:
                fix(v)

    def openapi() -> JSONObject:
        if app.openapi_schema is None:
            fix(build())
        assert app.openapi_schema is not None
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
