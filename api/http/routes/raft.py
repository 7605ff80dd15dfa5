"""Raft and operations endpoints /api/v1/raft/... (bearer token when one is configured).

Answers use the envelope too (code 0 with the object in `body`), so that one client path handles 2007
for the leader-only operations (transfer-leader, peers). Refusals that depend on the group's state (a
lagging or silent transfer target, a peer already there, a change in progress) are 409 with a JSON error.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Annotated

import httpx
from fastapi import APIRouter, Depends, Path, Response
from fastapi.responses import JSONResponse

from api.http import documents
from api.http import models as M
from api.http.auth import require_admin
from api.http.members import member_request
from api.http.routes import PROTECTED_ERRORS
from api.http.routes.common import GatewayDep
from api.service import ControllerService, invalid
from api.service.settings import ApiSettings
from statemachine import codes as C
from statemachine.result import Result
from statemachine.values import JSON

log = logging.getLogger("controllerd.api")
router = APIRouter(
    prefix="/api/v1/raft",
    tags=["raft"],
    dependencies=[Depends(require_admin)],
    responses={**PROTECTED_ERRORS, 409: {"model": M.ErrorBody, "description": "refused (REFUSED, ...)"}},
)


def ok(body: JSON, remark: str | None = None) -> JSONResponse:
    return JSONResponse(Result(C.SUCCESS, remark, None, body).to_envelope())


def split_address(field: str, text: str) -> tuple[str, int]:
    """host:port (IPv6 in brackets) or a 422 naming `field`."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536 or any(c.isspace() for c in host):
        raise invalid(field, f"must be host:port, got {text!r}")
    return host, int(port)


# ---------------------------------------------------------------------------------------------- routes


@router.get("/status", response_model=M.RaftStatusAnswer)
async def status(gw: GatewayDep) -> Response:
    """This node: role, term, leader, commit/applied/log indexes, snapshot, members."""
    return await gw.local(None, lambda: Result(C.SUCCESS, body=documents.raft_status(gw.service)))


@router.get("/peers", response_model=M.RaftPeersAnswer)
async def peers(gw: GatewayDep) -> Response:
    """Per member: role, match index, lag and last contact (progress is known on the leader only)."""
    return await gw.local(None, lambda: Result(C.SUCCESS, body=documents.raft_peers(gw.service)))


@router.post("/snapshot", response_model=M.SnapshotTakenAnswer)
async def snapshot(gw: GatewayDep) -> Response:
    """Take a snapshot now (any node). When nothing was applied since the latest one, answers that one
    with created=false."""
    gw.require_started()
    taken = await gw.service.admin.take_snapshot()
    if taken.meta is None:
        return ok(
            {"created": False, "index": 0, "term": 0, "bytes": 0, "durationMs": taken.duration_ms},
            "nothing applied yet: there is no snapshot",
        )
    info = documents.snapshot_info(taken.meta)
    body = {
        "created": taken.created,
        "index": info["index"],
        "term": info["term"],
        "bytes": info["bytes"],
        "durationMs": taken.duration_ms,
    }
    return ok(body, None if taken.created else f"nothing applied since snapshot {info['index']}: answering it")


@router.get("/snapshots", response_model=M.SnapshotsAnswer)
async def snapshots(gw: GatewayDep) -> Response:
    """The snapshots on this node's disk, newest first, with their meta."""
    gw.require_started()
    return ok({"snapshots": [documents.snapshot_info(m) for m in gw.service.admin.snapshots()]})


@router.post("/transfer-leader", response_model=M.TransferLeaderAnswer)
async def transfer_leader(req: M.TransferLeaderRequest, gw: GatewayDep) -> Response:
    """Hand leadership to `to`, or to the most caught-up voter; refused (409) when the target lags by more
    than maxLagEntries or has not answered within an election timeout. On the leader only (else 2007)."""
    gw.require_started()
    max_lag = gw.settings.max_transfer_lag_entries if req.maxLagEntries is None else req.maxLagEntries
    t = await gw.service.admin.transfer_leadership(req.to, max_lag, gw.settings.transfer_timeout_s)
    return ok(documents.transfer(t))


@router.post("/peers", response_model=M.MembershipAnswer)
async def add_peer(req: M.AddPeerRequest, gw: GatewayDep) -> Response:
    """Add a server: as a learner until it is within catch-up margin, then as a voter. Leader only."""
    gw.require_started()
    gw.service.require_leader()  # a follower answers 2007 before it judges the addresses
    split_address("id", req.id)
    address = split_address("raftAddress", req.raftAddress or req.id)
    for name in ("httpAddress", "remotingAddress"):
        if getattr(req, name) is not None:
            split_address(name, getattr(req, name))
    timeout = gw.settings.add_peer_timeout_s if req.timeoutMs is None else req.timeoutMs / 1000
    return ok(
        documents.membership(
            await gw.service.admin.add_peer(req.id, address, req.httpAddress, timeout, req.remotingAddress)
        )
    )


@router.delete("/peers/{peer_id}", response_model=M.MembershipAnswer)
async def remove_peer(
    peer_id: Annotated[M.Text, Path(description="raft id host:port (URL-encoded)")], gw: GatewayDep
) -> Response:
    """Remove a voter or learner. Leader only."""
    gw.require_started()
    return ok(documents.membership(await gw.service.admin.remove_peer(peer_id)))


@router.get("/autopilot", response_model=M.AutopilotAnswer)
async def autopilot(gw: GatewayDep) -> Response:
    """This node's autopilot settings, counts and recent decisions (only the leader's autopilot acts)."""
    gw.require_started()
    return ok(gw.service.admin.autopilot())


@router.put("/autopilot", response_model=M.AutopilotAnswer)
async def configure_autopilot(req: M.AutopilotRequest, gw: GatewayDep) -> Response:
    """Change this node's autopilot settings (the fields given). Set every member alike (`rmqctl raft autopilot`
    does): whichever leads acts with its own."""
    gw.require_started()
    stab = None if req.stabilizationSecs is None else float(req.stabilizationSecs)
    dead = None if req.deadServerSecs is None else float(req.deadServerSecs)
    return ok(gw.service.admin.configure_autopilot(req.enabled, stab, dead, req.minQuorum))


@router.get("/features", response_model=M.FeaturesAnswer)
async def feature_level(gw: GatewayDep) -> Response:
    """The group's feature level as this node applied it and the highest level this node reads (the leader
    asks every member this before it raises the level; a release without feature levels answers 404)."""
    gw.require_started()
    return ok(gw.service.feature_status())


@router.post("/features", response_model=M.AlarmChangedAnswer)
async def upgrade_feature_level(req: M.FeatureUpgradeRequest, gw: GatewayDep) -> Response:
    """Raise the group's feature level (default: the highest the leader reads) once every member reads it;
    refused naming the members that do not. Leader only; never lowers the level."""
    gw.require_started()
    gw.service.require_leader()
    return await gw.call("CONTROLLER_FEATURE_LEVEL", lambda: gw.service.raise_feature_level(req.level))


@router.get("/hashes", response_model=M.HashesAnswer)
async def hashes(gw: GatewayDep) -> Response:
    """This node's checkpoint hashes of its applied state (the leader's corruption check compares them)."""
    gw.require_started()
    ring = await gw.service.checkpoint_hashes()
    body = {
        "nodeId": gw.service.id,
        "appliedIndex": gw.service.node_status().applied,
        "checkpoints": [{"index": i, "hash": h} for i, h in ring],
    }
    return ok(body)


def hash_fetcher(
    service: ControllerService, settings: ApiSettings
) -> Callable[[str], Awaitable[list[tuple[int, str]] | None]]:
    """`service.peer_hashes`: GET a member's /api/v1/raft/hashes; None when it does not answer (it is then left
    out of the comparison)."""

    async def fetch(peer: str) -> list[tuple[int, str]] | None:
        address = service.http_address(peer)
        if not address:
            return None
        try:
            r = await member_request(settings, "GET", address, "/api/v1/raft/hashes", service.opts.request_timeout_s)
            env = r.json()
            return [(int(c["index"]), str(c["hash"])) for c in env["body"]["checkpoints"]]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as e:
            log.warning("corruption check: no hashes from %s at %s: %s", peer, address, e)
            return None

    return fetch


def feature_fetcher(service: ControllerService, settings: ApiSettings) -> Callable[[str], Awaitable[int | None]]:
    """`service.peer_features`: the highest feature level a member reads, from its /api/v1/raft/features; 0 when
    it answers 404 (a release without feature levels, v0.3.0); None when it does not answer."""

    async def fetch(peer: str) -> int | None:
        address = service.http_address(peer)
        if not address:
            return None
        try:
            r = await member_request(settings, "GET", address, "/api/v1/raft/features", service.opts.request_timeout_s)
            if r.status_code == 404:
                return 0
            return int(r.json()["body"]["maxLevel"])
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as e:
            log.warning("feature level: no answer from %s at %s: %s", peer, address, e)
            return None

    return fetch
