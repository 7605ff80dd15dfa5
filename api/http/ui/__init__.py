"""The read-only status page at /ui/ (docs/ui.md): static files shipped in the package, and two JSON reads.

- `GET /ui/api/node`: this node's name (n1, ... by its place in jRaftInitConf, as `controllerd local-cluster`
  names it), its own raft summary (role, term, commit/applied, snapshot, health) and its event history;
- `GET /ui/api/state`: the page's data. On the leader: every node (its own summary, the others' fetched
  from their /ui/api/node, with the leader's lag and last-contact view), every broker set after a ReadIndex
  barrier (master, epochs, replicas with in-sync, alive and last-heartbeat marks) and the recent events of
  every node that answered (`merge_events`: a former leader's elections survive a change of leader).
  On a follower: the leader's answer, fetched from it; when the leader cannot be reached, this node's own
  applied state, marked as a follower's view that may lag.

Both need the admin token only when one is configured (controllerAdminToken), as /api/v1/raft does; the
static files never do (they hold no data). Events come from each node's history (api/service/history.py):
every node records every election it applied and every leader and membership change it saw, whether or not
a page is open, and keeps the newest ones across its restarts.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response

from api.http.auth import require_admin
from api.service import ControllerService, NotLeaderError, UnavailableError
from raft.core import Role
from statemachine import codes as C
from statemachine.result import Result
from statemachine.values import JSONObject

STATIC = Path(__file__).parent / "static"
FILES = {
    "index.html": "text/html; charset=utf-8",
    "ui.js": "text/javascript; charset=utf-8",
    "ui.css": "text/css; charset=utf-8",
}
SAME_CHANGE_S = 10.0  # a membership change several nodes recorded within this is listed once
PEER_TIMEOUT_S = 0.8


def merge_events(rings: list[list[JSONObject]]) -> list[JSONObject]:
    """The events of several nodes' histories, newest first. Every node records every election (keyed by
    its log entry) and every leader change it saw (keyed by its term): an event with a key is listed once,
    as first recorded. A membership change has no key: listed once unless the same change comes again more
    than SAME_CHANGE_S later."""
    keys: set[str] = set()
    last: dict[tuple[str, str], float] = {}
    out = []
    for e in sorted((e for ring in rings for e in ring), key=lambda e: e["t"]):
        key = e.get("key")
        if key is not None:
            if key in keys:
                continue
            keys.add(key)
        else:
            k = (e["kind"], e["text"])
            if k in last and e["t"] - last[k] <= SAME_CHANGE_S:
                continue
            last[k] = e["t"]
        out.append(e)
    return out[::-1]


def node_summary(service: ControllerService) -> JSONObject:
    st = service.node_status()
    checks = service.readiness()
    failed = [f"{name}: {detail}" for name, ok, detail in checks if not ok]
    snaps = service.admin.snapshots()
    created = snaps[0].created_at if snaps else None
    return {
        "id": st.id,
        "name": service.node_name(st.id),
        "role": st.role,
        "term": st.term,
        "leaderId": st.leader or None,
        "commitIndex": st.commit,
        "appliedIndex": st.applied,
        "applyLag": st.commit - st.applied,
        "lastLogIndex": st.last_index,
        "snapshotIndex": st.snapshot.index,
        "snapshotAgeS": round(time.time() - created, 1) if created else None,
        "health": "ready" if not failed else "not ready",
        "failedChecks": failed,
        "events": list(service.history.events),
    }


def broker_sets(service: ControllerService, now: int) -> list[JSONObject]:
    """Every broker set of the applied state at `now`: 1006's table plus each replica's heartbeat row."""
    table = service.broker_set_table(now)
    live = {(row[1], row[2]): row for row in service.heartbeat_rows()}
    out = []
    for name, s in table.items():
        replicas = []
        for in_sync, rows in ((True, s["inSyncReplicas"]), (False, s["notInSyncReplicas"])):
            for r in rows:
                row = live.get((name, r["brokerId"]))
                replicas.append(
                    {
                        "brokerId": r["brokerId"],
                        "brokerAddress": r["brokerAddress"],
                        "alive": r["alive"],
                        "inSync": in_sync,
                        "master": r["brokerId"] == s["masterBrokerId"],
                        "lastHeartbeatMsAgo": now - row[4] if row else None,
                        "epoch": row[6] if row else None,
                        "maxOffset": row[7] if row else None,
                    }
                )
        replicas.sort(key=lambda r: r["brokerId"])
        cluster = service.cluster_of(name)
        out.append(
            {
                "brokerName": name,
                "clusterName": cluster,
                "masterBrokerId": s["masterBrokerId"],
                "masterAddress": s["masterAddress"],
                "masterEpoch": s["masterEpoch"],
                "syncStateSetEpoch": s["syncStateSetEpoch"],
                "replicas": replicas,
            }
        )
    return out


def _auth_headers(request: Request) -> dict[str, str]:
    token = request.app.state.gateway.settings.admin_token
    return {"Authorization": f"Bearer {token}"} if token else {}


async def _fetch(client: httpx.AsyncClient, url: str, headers: dict[str, str]) -> JSONObject | None:
    try:
        r = await client.get(url, headers=headers, timeout=PEER_TIMEOUT_S)
        return r.json() if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def make_router(service: ControllerService) -> APIRouter:
    """The /ui routes of one node."""
    router = APIRouter(prefix="/ui", include_in_schema=False)

    @router.get("/api/node", dependencies=[Depends(require_admin)])
    async def node() -> JSONResponse:
        if not service.started:
            return JSONResponse({"error": "the node has not started"}, status_code=503)
        return JSONResponse(node_summary(service))

    @router.get("/api/state", dependencies=[Depends(require_admin)])
    async def state(request: Request) -> JSONResponse:
        if not service.started:
            return JSONResponse({"error": "the node has not started"}, status_code=503)
        headers = _auth_headers(request)
        mine = node_summary(service)
        async with httpx.AsyncClient() as client:
            try:
                result = await service.read_state(lambda now: Result(C.SUCCESS, body=broker_sets(service, now)))
            except NotLeaderError as e:
                if e.leader_address:
                    theirs = await _fetch(client, f"http://{e.leader_address}/ui/api/state", headers)
                    if theirs is not None and theirs.get("view") == "leader":
                        return JSONResponse({**theirs, "servedBy": service.id})
                return JSONResponse(_follower_view(service, mine, e.leader_id))
            except UnavailableError as e:
                return JSONResponse(_follower_view(service, mine, None, str(e)))
            nodes, rings = await _nodes(service, mine, headers, client)
        return JSONResponse(
            {
                "view": "leader",
                "servedBy": service.id,
                "leaderId": service.id,
                "names": service.node_names(),
                "generatedAt": time.time(),
                "nodes": nodes,
                "brokerSets": result.body,
                "alarms": service.alarm_list()["alarms"],
                "events": merge_events(rings),
            }
        )

    @router.get("")
    async def bare() -> Response:
        return RedirectResponse("/ui/")

    @router.get("/")
    async def index() -> Response:
        return FileResponse(
            STATIC / "index.html", media_type=FILES["index.html"], headers={"Cache-Control": "no-cache"}
        )

    @router.get("/{name}")
    async def static(name: str) -> Response:
        if name not in FILES:
            return JSONResponse({"error": f"no such file: {name}"}, status_code=404)
        return FileResponse(STATIC / name, media_type=FILES[name], headers={"Cache-Control": "no-cache"})

    return router


def _follower_view(
    service: ControllerService, mine: JSONObject, leader: str | None, why: str | None = None
) -> JSONObject:
    """This node's own applied state, said to be a follower's view (the leader could not be asked)."""
    reason = why or (f"the leader {service.display_name(leader)} did not answer" if leader else "no leader is known")
    return {
        "view": "follower",
        "servedBy": service.id,
        "leaderId": leader,
        "names": service.node_names(),
        "generatedAt": time.time(),
        "note": f"{reason}: this is {service.display_name(service.id)}'s own applied state "
        f"(applied index {mine['appliedIndex']}), "
        "which may lag the leader's",
        "nodes": [{**mine, "httpAddress": service.http_address(service.id), "reachable": True}],
        "brokerSets": broker_sets(service, service.applied_clock_ms()),
        "alarms": service.alarm_list()["alarms"],
        "events": merge_events([mine["events"]]),
    }


async def _nodes(
    service: ControllerService, mine: JSONObject, headers: dict[str, str], client: httpx.AsyncClient
) -> tuple[list[JSONObject], list[list[JSONObject]]]:
    """Every member: its own summary (fetched from it) and the leader's view of it (lag, last contact); and
    the event rings of those that answered."""
    peers = service.peers()
    others = [p for p in peers if p.id != service.id]
    answers = await asyncio.gather(
        *(
            _fetch(client, f"http://{p.http_address}/ui/api/node", headers) if p.http_address else asyncio.sleep(0)
            for p in others
        )
    )
    fetched = {p.id: a for p, a in zip(others, answers, strict=True)}
    rows: list[JSONObject] = []
    rings = [mine["events"]] + [a.get("events") or [] for a in fetched.values() if a is not None]
    for p in peers:
        own = mine if p.id == service.id else fetched.get(p.id)
        row = {
            "id": p.id,
            "name": service.node_name(p.id),
            "httpAddress": p.http_address,
            "role": p.role,
            "reachable": own is not None,
            "lagEntries": p.progress.lag if p.progress else None,
            "lastContactMs": p.last_contact_ms,
        }
        if own is not None:
            row.update({k: v for k, v in own.items() if k not in ("events", "name")})
            row["role"] = own["role"] if p.id != service.id else Role.LEADER
        else:
            row["health"] = "unreachable"
        rows.append(row)
    configured = {p: i for i, p in enumerate(service.configured_peers())}
    rows.sort(key=lambda r: (configured.get(r["id"], len(configured)), r["id"]))  # n1, n2, ... then the others
    return rows, rings
