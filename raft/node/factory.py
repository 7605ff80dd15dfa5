"""How a Node is built from its options: the core's configuration."""

from __future__ import annotations

from raft.core import CoreConfig
from raft.options import NodeOptions


def core_config(opts: NodeOptions) -> CoreConfig:
    r = opts.raft
    tick = r.tick()
    return CoreConfig(
        id=opts.node_id,
        election_tick=max(2, r.election_timeout_ms // tick),
        heartbeat_tick=max(1, r.heartbeat() // tick),
        pre_vote=r.pre_vote,
        check_quorum=r.check_quorum,
        lease_ratio=r.lease_ratio,
        lease_read=r.lease_read,
        tick_ms=float(tick),
        max_clock_drift=r.max_clock_drift,
        max_inflight=r.max_inflight,
        max_entries_per_msg=r.max_entries_per_msg,
        max_bytes_per_msg=r.max_bytes_per_msg,
        max_uncommitted=r.max_uncommitted,
    )
