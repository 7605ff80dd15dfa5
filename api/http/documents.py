"""The JSON documents of /api/v1/raft/* (http-api.md field names), built in one place from the service's
typed answers: the node's status (raft.node.NodeStatus), its members (api.service.Peer) and the admin
operations' results. Routes and the status page call these; nothing else spells the wire names.
"""

from __future__ import annotations

from api.service import ControllerService, Membership, Transfer
from snapshot.format import SnapshotMeta
from statemachine.values import JSONObject


def raft_status(service: ControllerService) -> JSONObject:
    """GET /api/v1/raft/status: this node's role, term, leader, indexes, snapshot and members."""
    st = service.node_status()
    return {
        "nodeId": st.id,
        "group": service.opts.group_id,
        "role": st.role,
        "term": st.term,
        "leaderId": st.leader or None,
        "commitIndex": st.commit,
        "appliedIndex": st.applied,
        "firstLogIndex": st.first_index,
        "lastLogIndex": st.last_index,
        "lastSnapshotIndex": st.snapshot.index,
        "lastSnapshotTerm": st.snapshot.term,
        "peers": [
            {
                "id": p.id,
                "raftAddress": p.raft_address,
                "httpAddress": p.http_address,
                "remotingAddress": p.remoting_address,
                "voter": p.voter,
            }
            for p in service.peers(st)
        ],
    }


def raft_peers(service: ControllerService) -> JSONObject:
    """GET /api/v1/raft/peers: the leader, the last log index and per member its role, match index, lag in
    entries and last contact (the leader's view; on a follower only the membership and roles are known)."""
    st = service.node_status()
    rows = []
    for p in service.peers(st):
        pr = p.progress
        row: JSONObject = {
            "id": p.id,
            "role": p.role,
            "raftAddress": p.raft_address,
            "httpAddress": p.http_address,
            "remotingAddress": p.remoting_address,
            "matchIndex": pr.match if pr else None,
            "lagEntries": pr.lag if pr else None,
            "lastContactMs": p.last_contact_ms,
        }
        if pr is not None:
            row["state"] = pr.state.name.lower()
        rows.append(row)
    return {"leaderId": st.leader or None, "lastLogIndex": st.last_index, "peers": rows}


def snapshot_info(meta: SnapshotMeta) -> JSONObject:
    """A snapshot's meta (GET /api/v1/raft/snapshots)."""
    files = [{"name": f.name, "size": f.size, "crc32c": f.crc32c} for f in meta.files]
    return {
        "index": meta.last_included_index,
        "term": meta.last_included_term,
        "bytes": sum(f.size for f in meta.files),
        "createdAt": meta.created_at,
        "voters": list(meta.voters),
        "learners": list(meta.learners),
        "files": files,
    }


def membership(m: Membership) -> JSONObject:
    """The configuration after a membership change (POST and DELETE /api/v1/raft/peers)."""
    return {"id": m.peer, "voters": m.voters, "learners": m.learners}


def transfer(t: Transfer) -> JSONObject:
    """A leadership transfer that happened (POST /api/v1/raft/transfer-leader)."""
    return {
        "previousLeaderId": t.previous_leader_id,
        "leaderId": t.leader_id,
        "term": t.term,
        "targetLagEntries": t.target_lag_entries,
        "durationMs": t.duration_ms,
    }
