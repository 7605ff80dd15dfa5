"""Raft and operations endpoints /api/v1/raft/... (bearer token when one is configured).

Answers use the envelope too (code 0 with the object in `body`), so that one client path handles 2007
for the leader-only operations (transfer-leader, peers). Refusals that depend on the group's state (a
lagging or silent transfer target, a peer already there, a change in progress) are 409 with a JSON error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Response
from fastapi.responses import JSONResponse

from api import models as M
from api.auth import require_admin
from api.errors import ApiError, conflict, from_raft, invalid
from api.routes import PROTECTED_ERRORS
from api.routes.common import Gateway, GatewayDep
from api.service import ControllerService, NotLeaderError, UnavailableError, most_caught_up
from raft.core.confchange import ConfChangeError
from raft.status import RaftException
from statemachine import codes as C
from statemachine.result import Result

log = logging.getLogger("controllerd.api")

router = APIRouter(prefix="/api/v1/raft", tags=["raft"], dependencies=[Depends(require_admin)],
                   responses={**PROTECTED_ERRORS, 409: {"model": M.ErrorBody, "description": "refused (REFUSED, ...)"}})  # fmt: skip


def ok(body: Any, remark: str | None = None) -> JSONResponse:
    return JSONResponse(Result(C.SUCCESS, remark, None, body).to_envelope())


def split_address(field: str, text: str) -> tuple[str, int]:
    """host:port (IPv6 in brackets) or a 422 naming `field`."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536 or any(c.isspace() for c in host):
        raise invalid(field, f"must be host:port, got {text!r}")
    return host, int(port)


def _require_leader(service: ControllerService) -> None:
    if not service.node.is_leader():
        raise NotLeaderError(*service.leader())


# ------------------------------------------------------------------------------------------- snapshots


def snapshot_info(meta: Any) -> dict[str, Any]:
    """A snapshot's meta (snapshot.format.SnapshotMeta) as JSON."""
    files = [{"name": f.name, "size": f.size, "crc32c": f.crc32c} for f in meta.files]
    return {"index": meta.last_included_index, "term": meta.last_included_term, "bytes": sum(f.size for f in meta.files),
            "createdAt": meta.created_at, "voters": list(meta.voters), "learners": list(meta.learners),
            "files": files}  # fmt: skip


async def take_snapshot(service: ControllerService) -> JSONResponse:
    t0 = time.perf_counter()
    try:
        meta = await service.node.snapshot()
    except RaftException as e:
        raise from_raft(e, service.http_addresses()) from None
    except Exception as e:  # noqa: BLE001 - a failed save (disk full, I/O error) is reported, not a 500
        log.exception("on-demand snapshot failed")
        raise UnavailableError(f"the snapshot failed: {type(e).__name__}: {e}") from None
    duration_ms = round((time.perf_counter() - t0) * 1000, 3)
    if meta is not None:
        info = snapshot_info(meta)
        return ok({"created": True, "index": info["index"], "term": info["term"], "bytes": info["bytes"],
                   "durationMs": duration_ms})  # fmt: skip
    newest = service.node.snapshots()
    if not newest:
        return ok({"created": False, "index": 0, "term": 0, "bytes": 0, "durationMs": duration_ms},
                  "nothing applied yet: there is no snapshot")  # fmt: skip
    info = snapshot_info(newest[0])
    return ok({"created": False, "index": info["index"], "term": info["term"], "bytes": info["bytes"],
               "durationMs": duration_ms},
              f"nothing applied since snapshot {info['index']}: answering it")  # fmt: skip


# ---------------------------------------------------------------------------------- leadership transfer


def choose_transferee(
    st: Mapping[str, Any], to: str | None, max_lag: int, silent_after_ticks: float
) -> tuple[str, int]:
    """(target, its lag in entries) for a transfer from the leader whose node status is `st`; 409 when no
    voter qualifies. The named voter (or, without `to`, the most caught-up one) must be another voter, have
    answered within `silent_after_ticks` (an election timeout) and lag at most `max_lag` entries: a lagging
    target would leave the group unwritable while it catches up."""
    me, last, progress = st["id"], st["last_index"], st["peers"]
    if to == me:
        raise conflict("REFUSED", f"{me} already leads")
    if to is not None and to not in st["voters"]:
        raise conflict("REFUSED", f"{to} is not a voter of this group (voters: {', '.join(st['voters'])})")
    candidates = [to] if to is not None else [p for p in st["voters"] if p != me]
    if not candidates:
        raise conflict("REFUSED", "there is no other voter to hand leadership to")

    target = most_caught_up(st, candidates, silent_after_ticks)
    if target is None:
        who = to if to is not None else "any other voter"
        raise conflict("REFUSED", f"{who} has not answered within an election timeout; not transferring")
    lag = last - progress[target]["match"]
    if lag > max_lag:
        raise conflict(
            "REFUSED", f"{target} lags by {lag} entries (more than maxLagEntries={max_lag}); not transferring"
        )
    return target, lag


async def transfer(gw: Gateway, req: M.TransferLeaderRequest) -> JSONResponse:
    service = gw.service
    _require_leader(service)
    max_lag = gw.settings.max_transfer_lag_entries if req.maxLagEntries is None else req.maxLagEntries
    target, lag = choose_transferee(service.node.status(), req.to, max_lag, service.election_ticks())
    t0 = time.perf_counter()
    try:
        await service.node.transfer_leadership(target, gw.settings.transfer_timeout_s)
    except TimeoutError:
        raise UnavailableError(f"leadership did not move to {target} in time") from None
    except RaftException as e:
        raise from_raft(e, service.http_addresses()) from None
    st = service.node.status()
    return ok({"previousLeaderId": st["id"], "leaderId": st["leader"], "term": st["term"], "targetLagEntries": lag,
               "durationMs": round((time.perf_counter() - t0) * 1000, 3)})  # fmt: skip


# ----------------------------------------------------------------------------------------- membership


def _membership(service: ControllerService, peer: str) -> dict[str, Any]:
    st = service.node.status()
    return {"id": peer, "voters": list(st["voters"]), "learners": list(st["learners"])}


async def add_member(gw: Gateway, req: M.AddPeerRequest) -> JSONResponse:
    service = gw.service
    _require_leader(service)
    split_address("id", req.id)
    address = split_address("raftAddress", req.raftAddress or req.id)
    if req.httpAddress is not None:
        split_address("httpAddress", req.httpAddress)
    if req.id in service.node.status()["voters"]:
        raise conflict("PEER_EXISTS", f"{req.id} is already a voter")
    timeout = gw.settings.add_peer_timeout_s if req.timeoutMs is None else req.timeoutMs / 1000
    try:
        # Both addresses go into the CONF entry: every member learns them from the log (docs/raft.md).
        await service.node.add_peer(req.id, address, timeout, req.httpAddress or "")
    except TimeoutError:
        raise UnavailableError(f"{req.id} did not catch up within {timeout:g}s; it stays a learner") from None
    except RaftException as e:
        raise from_raft(e, service.http_addresses()) from None
    return ok(_membership(service, req.id))


async def remove_member(gw: Gateway, peer: str) -> JSONResponse:
    service = gw.service
    _require_leader(service)
    st = service.node.status()
    if peer not in st["voters"] and peer not in st["learners"]:
        raise ApiError(404, "PEER_NOT_FOUND", f"{peer} is not a member (voters: {', '.join(st['voters'])})")
    try:
        await service.node.remove_peer(peer)
    except ConfChangeError as e:
        raise conflict("REFUSED", str(e)) from None
    except RaftException as e:
        raise from_raft(e, service.http_addresses()) from None
    return ok(_membership(service, peer))


# ---------------------------------------------------------------------------------------------- routes


@router.get("/status", response_model=M.RaftStatusAnswer)
async def status(gw: GatewayDep) -> Response:
    """This node: role, term, leader, commit/applied/log indexes, snapshot, members."""
    return await gw.local(None, lambda: Result(C.SUCCESS, body=gw.service.raft_status()))


@router.get("/peers", response_model=M.RaftPeersAnswer)
async def peers(gw: GatewayDep) -> Response:
    """Per member: role, match index, lag and last contact (progress is known on the leader only)."""

    def answer() -> Result:
        st = gw.service.node.status()
        body = {"leaderId": st["leader"] or None, "lastLogIndex": st["last_index"], "peers": gw.service.raft_peers()}
        return Result(C.SUCCESS, body=body)

    return await gw.local(None, answer)


@router.post("/snapshot", response_model=M.SnapshotTakenAnswer)
async def snapshot(gw: GatewayDep) -> Response:
    """Take a snapshot now (any node). When nothing was applied since the latest one, answers that one
    with created=false."""
    gw.require_started()
    return await take_snapshot(gw.service)


@router.get("/snapshots", response_model=M.SnapshotsAnswer)
async def snapshots(gw: GatewayDep) -> Response:
    """The snapshots on this node's disk, newest first, with their meta."""
    gw.require_started()
    return ok({"snapshots": [snapshot_info(m) for m in gw.service.node.snapshots()]})


@router.post("/transfer-leader", response_model=M.TransferLeaderAnswer)
async def transfer_leader(req: M.TransferLeaderRequest, gw: GatewayDep) -> Response:
    """Hand leadership to `to`, or to the most caught-up voter; refused (409) when the target lags by more
    than maxLagEntries or has not answered within an election timeout. On the leader only (else 2007)."""
    gw.require_started()
    return await transfer(gw, req)


@router.post("/peers", response_model=M.MembershipAnswer)
async def add_peer(req: M.AddPeerRequest, gw: GatewayDep) -> Response:
    """Add a server: as a learner until it is within catch-up margin, then as a voter. Leader only."""
    gw.require_started()
    return await add_member(gw, req)


@router.delete("/peers/{peer_id}", response_model=M.MembershipAnswer)
async def remove_peer(peer_id: Annotated[M.Text, Path(description="raft id host:port (URL-encoded)")],
                      gw: GatewayDep) -> Response:  # fmt: skip
    """Remove a voter or learner. Leader only."""
    gw.require_started()
    return await remove_member(gw, peer_id)
