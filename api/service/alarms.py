"""The node's side of the alarms (statemachine/alarms.py holds the replicated list): NOSPACE detection, the gate
that refuses writes while NOSPACE is raised, and the numbers both need.

Every node checks its own store every controllerAlarmCheckIntervalMs: the bytes of the files under
controllerStorePath (RocketMQ's dledger_disk_usage: the apparent size, so a preallocated WAL segment counts in
full) against controllerStoreQuotaBytes, and the file system's free space against controllerAlarmFreeDiskMB.
Past either, it raises NOSPACE for itself: the leader proposes the ALARM command, a follower asks the leader to
(`ControllerService.alarm_forwarder`, installed by the HTTP front end). While NOSPACE is raised the leader refuses,
before proposing, every write that grows the state, with one Result naming the alarm; it lets through what
keeps the group working or frees space (ALLOWED_WHILE_NOSPACE), heartbeats of brokers already in the live table,
and every read (reads are never proposed). An operator frees space and disarms (`rmqctl alarm disarm`); a node
whose store is still past its limit raises the alarm again at its next check, as etcd's do.
"""

from __future__ import annotations

import os

from statemachine import codes as C
from statemachine import commands
from statemachine.alarms import CORRUPT, NOSPACE
from statemachine.machine import ControllerStateMachine
from statemachine.result import Result

# Writes that go through while NOSPACE is raised: alarms themselves, the feature level (it adds no state, and an
# upgrade must be able to finish), the inactive-broker scan and channel closes (they shrink the live table and
# keep failover working), and the deletions (they free space).
ALLOWED_WHILE_NOSPACE = frozenset(
    {C.ALARM, C.FEATURE_LEVEL, C.CHECK_NOT_ACTIVE_BROKER, C.BROKER_CLOSE_CHANNEL, C.CLEAN_BROKER_DATA, C.KV_DELETE}
)
_MIB = 1 << 20
__all__ = ["CORRUPT", "NOSPACE", "dir_bytes", "free_bytes", "nospace_reason", "refusal"]


def dir_bytes(path: str) -> int:
    """Bytes of the files under `path` (as RocketMQ's UtilAll.calculateFileSizeInPath); files that vanish while
    walking (a log segment dropped, a snapshot pruned) are skipped."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                continue
    return total


def free_bytes(path: str) -> int:
    fs = os.statvfs(path)
    return fs.f_bavail * fs.f_frsize


def nospace_reason(path: str, quota_bytes: int, floor_bytes: int) -> str | None:
    """Why the store at `path` is out of space (None: it is not): over the quota, or less free space than the
    floor (0 turns either check off)."""
    if not os.path.isdir(path):
        return None
    if quota_bytes:
        used = dir_bytes(path)
        if used > quota_bytes:
            return f"store {used} bytes > controllerStoreQuotaBytes {quota_bytes}"
    if floor_bytes:
        free = free_bytes(path)
        if free < floor_bytes:
            return f"free space {free // _MIB} MiB < controllerAlarmFreeDiskMB {floor_bytes // _MIB}"
    return None


def refusal(sm: ControllerStateMachine, data: bytes) -> Result | None:
    """The answer to a write while an alarm forbids it (None: go ahead). Call only when `sm.alarms.table` is not
    empty (the hot path pays nothing otherwise)."""
    raised = sm.alarms.raised(NOSPACE)
    if not raised:
        return None
    c = commands.named(commands.parse(data))
    if c.code in ALLOWED_WHILE_NOSPACE:
        return None
    if isinstance(c, commands.BrokerHeartbeat) and (c.clusterName, c.brokerName, c.brokerId) in sm.live.table:
        return None
    members = ", ".join(f"{m} ({detail})" if detail else m for m, _at, detail in raised)
    return Result(
        C.SYSTEM_ERROR,
        f"alarm NOSPACE raised by {members}: {C.REQUEST_NAMES[c.code]} refused; writes that grow the controller's "
        "state wait until an operator frees space and disarms the alarm (rmqctl alarm disarm)",
    )
