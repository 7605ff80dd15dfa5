"""/livez, /readyz (alias /healthz) with etcd's conventions, and /metrics.

`?verbose` lists every check as `[+]name ok` / `[-]name failed: detail`; `?exclude=name` (repeatable)
skips a check; `/readyz/<name>` runs one. A failure answers 503 and always lists the checks. With
`Accept: application/json` the answer is a HealthReport instead of text.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from api.http import models as M
from api.http.errors import error_response
from api.http.routes.common import Gateway, GatewayDep
from api.service.metrics import CONTENT_TYPE

router = APIRouter(tags=["health"])

Check = tuple[str, bool, str]
Verbose = Annotated[str | None, Query(description="present (any value but 0/false): list every check")]
Exclude = Annotated[list[str], Query(description="skip this check (repeatable)")]
_TEXT = {"description": "text: ok, or one [+]/[-] line per check", "content": {"text/plain": {}}}
_RESPONSES: dict[int | str, dict[str, object]] = {
    200: {"model": M.HealthReport, **_TEXT},
    503: {"model": M.HealthReport, "description": "a check failed (same formats)"},
}
_ONE_CHECK = {**_RESPONSES, 404: {"model": M.ErrorBody, "description": "no check of that name (NOT_FOUND)"}}


def liveness() -> list[Check]:
    return [("ping", True, "the event loop answers")]


def report(kind: str, checks: list[Check], request: Request, verbose: str | None, exclude: list[str]) -> Response:
    skipped = set(exclude)
    passed = all(ok for name, ok, _ in checks if name not in skipped)
    status = 200 if passed else 503
    if "application/json" in request.headers.get("accept", ""):
        rows = [{"name": n, "ok": ok, "detail": d, "excluded": n in skipped} for n, ok, d in checks]
        return JSONResponse({"status": "ok" if passed else "failed", "checks": rows}, status_code=status)
    if passed and (verbose is None or verbose.lower() in ("0", "false")):
        return PlainTextResponse("ok", status_code=status)
    lines = []
    for name, ok, detail in checks:
        if name in skipped:
            lines.append(f"[+]{name} excluded: ok")
        else:
            lines.append(f"[+]{name} ok" if ok else f"[-]{name} failed: {detail}")
    lines.append(f"{kind} check {'passed' if passed else 'failed'}")
    return PlainTextResponse("\n".join(lines) + "\n", status_code=status)


def single(kind: str, checks: list[Check], name: str, request: Request) -> Response:
    found = [c for c in checks if c[0] == name]
    if not found:
        known = ", ".join(c[0] for c in checks)
        return error_response(404, "NOT_FOUND", f"no {kind} check named {name!r} (checks: {known})")
    return report(kind, found, request, "1", [])


def _readiness_of(gw: Gateway, name: str) -> list[Check]:
    checks = gw.service.readiness()
    if not gw.service.started and all(c[0] != name for c in checks):
        return [(name, False, "the node has not started")]  # the other checks exist once it runs
    return checks


@router.get("/livez", responses=_RESPONSES)
async def livez(request: Request, verbose: Verbose = None, exclude: Exclude = []) -> Response:  # noqa: B006
    """The process and its event loop answer."""
    return report("livez", liveness(), request, verbose, exclude)


@router.get("/livez/{check}", responses=_ONE_CHECK)
async def livez_check(request: Request, check: Annotated[str, Path()]) -> Response:
    return single("livez", liveness(), check, request)


@router.get("/readyz", responses=_RESPONSES)
async def readyz(request: Request, gw: GatewayDep, verbose: Verbose = None, exclude: Exclude = []) -> Response:  # noqa: B006
    """200 only when the node started, loaded its snapshot, replayed its log, knows a leader, applies
    close behind the commit index and has no fatal error; else 503."""
    return report("readyz", gw.service.readiness(), request, verbose, exclude)


@router.get("/readyz/{check}", responses=_ONE_CHECK)
async def readyz_check(request: Request, check: Annotated[str, Path()], gw: GatewayDep) -> Response:
    """One readiness check (404 for an unknown name)."""
    return single("readyz", _readiness_of(gw, check), check, request)


@router.get("/healthz", responses=_RESPONSES)
async def healthz(request: Request, gw: GatewayDep, verbose: Verbose = None, exclude: Exclude = []) -> Response:  # noqa: B006
    """Alias of /readyz."""
    return report("readyz", gw.service.readiness(), request, verbose, exclude)


@router.get("/healthz/{check}", responses=_ONE_CHECK)
async def healthz_check(request: Request, check: Annotated[str, Path()], gw: GatewayDep) -> Response:
    """Alias of /readyz/{check}."""
    return single("readyz", _readiness_of(gw, check), check, request)


@router.get(
    "/metrics",
    tags=["metrics"],
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE: {}}, "description": "Prometheus text format"}},
)
async def metrics(
    request: Request, gw: GatewayDep, names: Annotated[list[str] | None, Query(alias="name[]")] = None
) -> Response:
    """Prometheus text format: RocketMQ's controller series and controllerd_raft_*; with `name[]` (repeated),
    only the families or samples so named. Gzipped when Accept-Encoding takes gzip."""
    body, headers = await gw.metrics.exposition(names or (), accept_encoding=request.headers.get("accept-encoding", ""))
    return Response(body, headers=headers)
