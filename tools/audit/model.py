"""What the audit reports and how it partitions: the findings schema, the check catalogue, the exit codes,
and the routing of commands and state entities to replay partitions ("buckets").

Buckets: broker-sets are hashed into `sets` buckets, KV keys into `kv` buckets, and the replicated config
has one bucket of its own. A broker-set's whole state (replica, SyncStateSet and live rows, pending
re-elections) is keyed by its brokerName, so commands for different sets commute; the commands that touch
every set (the inactive-broker scan, config updates) go to every set bucket, in log order.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import asdict, dataclass, fields
from typing import Any

import msgpack

from statemachine import codes as C
from statemachine.commands import CommandError, check

SCHEMA_VERSION = 1

# check id -> (what it means, the exit class it raises: 3 corrupt input, 1 divergence)
CHECKS: dict[str, tuple[str, int]] = {
    "identity.missing": ("a data dir has no IDENTITY file (an old copy): labelled by its directory name", 0),
    "identity.readable": ("a data dir's IDENTITY file is damaged", 3),
    "identity.conflict": ("a node's IDENTITY names another group than the nodes it shares configurations with", 3),
    "group.unplaced": ("a node no configuration or group id places in a group: its log is compared with none", 1),
    "wal.crc": ("a segment has bytes that are not a valid log (CRC, frame, header): corruption", 3),
    "wal.continuity": ("entries are missing or overlap between batches/segments", 3),
    "wal.torn_tail": ("the last segment ends in an uncommitted (torn) batch; a node start cuts it", 0),
    "log.matching": ("two nodes hold different entries at the same (index, term), or different terms", 1),
    "snapshot.readable": ("a snapshot fails its CRCs or does not decode", 3),
    "snapshot.meta": ("snapshot meta disagrees with the log (last included term, voters, learners)", 3),
    "snapshot.replay": ("a snapshot value differs from the replay of the log up to its index", 1),
    "snapshot.digest": ("nodes hold different section bytes in snapshots of the same index", 1),
    "invariant.epoch_monotonic": ("masterEpoch or syncStateSetEpoch went backwards for a broker-set", 1),
    "invariant.one_master_per_epoch": ("two masters for one (broker-set, masterEpoch)", 1),
    "invariant.master_in_sync_state_set": ("the master is outside the SyncStateSet, unclean election off", 1),
    "invariant.unique_broker_ids": ("one broker (registerCheckCode) holds two ids in a broker-set", 1),
    "broker.epoch": ("a broker's epoch file names an epoch the controller did not make it master at", 1),
    "broker.epoch_file": ("a broker's epoch file is malformed, or whose it is cannot be told", 3),
}
SEVERITIES = ("info", "warning", "error")
EXIT_OK, EXIT_DIVERGENCE, EXIT_USAGE, EXIT_CORRUPT, EXIT_INTERNAL = 0, 1, 2, 3, 4


@dataclass
class Finding:
    """One row of findings/ (docs/audit.md). Values are JSON text so that any type fits one column."""

    group: str
    node: str
    check: str
    severity: str = "error"
    path: str | None = None  # the file the finding is about
    snapshot_index: int | None = None
    snapshot_term: int | None = None
    log_index: int | None = None  # where in the log (the damaged entry, the replayed index)
    section: str | None = None
    entity: str | None = None  # broker-set, broker identity, KV namespace/key, config key
    field: str | None = None
    snapshot_value: str | None = None
    replayed_value: str | None = None
    first_divergent_index: int | None = None
    offset: int | None = None  # byte offset in `path`
    detail: str = ""

    def row(self) -> dict[str, Any]:
        return asdict(self)


FINDING_FIELDS = [f.name for f in fields(Finding)]


def js(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


# --- routing -----------------------------------------------------------------------------------------------

# Commands that read state and change nothing: the replay skips them (a test holds them read-only).
READ_ONLY = frozenset(
    {C.GET_REPLICA_INFO, C.GET_SYNC_STATE_DATA, C.GET_NEXT_BROKER_ID, C.GET_BROKER_LIVE_INFO, C.KV_GET}
)
EVERY_SET = frozenset({C.CHECK_NOT_ACTIVE_BROKER, C.UPDATE_CONTROLLER_CONFIG})
KV_CODES = frozenset({C.KV_PUT, C.KV_DELETE, C.KV_CAS})
# Position of brokerName in the command array, per set command.
NAME_AT = {
    C.ALTER_SYNC_STATE_SET: 3,
    C.ELECT_MASTER: 4,
    C.REGISTER_BROKER: 4,
    C.CLEAN_BROKER_DATA: 4,
    C.APPLY_BROKER_ID: 4,
    C.BROKER_CLOSE_CHANNEL: 4,
    C.BROKER_HEARTBEAT: 4,
}


@dataclass(frozen=True)
class Buckets:
    sets: int
    kv: int

    @property
    def config(self) -> int:
        return self.sets + self.kv

    @property
    def count(self) -> int:
        return self.sets + self.kv + 1

    def of_set(self, name: str) -> int:
        return zlib.crc32(name.encode()) % self.sets

    def of_kv(self, namespace: str, key: str) -> int:
        return self.sets + zlib.crc32(f"{namespace}\x00{key}".encode()) % self.kv

    def kind(self, b: int) -> str:
        return "set" if b < self.sets else "kv" if b < self.config else "config"

    def route(self, c: list) -> tuple[int, ...] | int | None:
        """The bucket(s) of a decoded command; None for a command the replay skips."""
        code = c[1]
        at = NAME_AT.get(code)
        if at is not None:
            return self.of_set(c[at])
        if code in KV_CODES:
            return self.of_kv(c[3], c[4])
        if code == C.ALARM:  # the alarms (not compared)
            return self.config
        if code == C.FEATURE_LEVEL:  # the level gates ALARM (config) and BROKER_HEARTBEATS (every set's)
            return (*range(self.sets), self.config)
        if code in EVERY_SET:
            return (*range(self.sets), self.config) if code == C.UPDATE_CONTROLLER_CONFIG else tuple(range(self.sets))
        return None

    def split_heartbeats(self, c: list) -> dict[int, bytes]:
        """A decoded BROKER_HEARTBEATS (1202) as {bucket: the bytes of a 1202 of that bucket's heartbeats, at the
        entry's time}: what each bucket's replay applies, as it would the 1018s of its own sets. Empty for an
        entry the state machine refuses as malformed (it changes nothing, so no bucket applies any of it)."""
        try:
            check(c)
        except CommandError:
            return {}
        groups: dict[int, list[list[Any]]] = {}
        for h in c[3]:
            groups.setdefault(self.of_set(h[1]), []).append(h)
        return {b: msgpack.packb([c[0], c[1], c[2], items]) for b, items in groups.items()}


def split_state(tables: dict[str, Any], buckets: Buckets) -> dict[int, dict[tuple[str, str], Any]]:
    """Decoded sections (statemachine.inspection shape) as {bucket: {(section, entity): value}}. Sections
    this version cannot split are left out (the summary lists them as not replay-audited)."""
    out: dict[int, dict[tuple[str, str], Any]] = {}

    def put(b: int, section: str, entity: str, value: Any) -> None:
        out.setdefault(b, {})[(section, entity)] = value

    for name in ("replicaInfoTable", "syncStateSetInfoTable"):
        for set_name, value in (tables.get(name) or {}).items():
            put(buckets.of_set(set_name), name, set_name, value)
    live = tables.get("brokerLiveTable") or {}
    for row in live.get("brokers", ()):
        entity = f"{row['clusterName']}/{row['brokerName']}/{row['brokerId']}"
        put(buckets.of_set(row["brokerName"]), "brokerLiveTable", entity, row)
    for set_name, left in (live.get("pendingReelections") or {}).items():
        put(buckets.of_set(set_name), "brokerLiveTable.pendingReelections", set_name, left)
    for ns, keys in (tables.get("kvConfig") or {}).items():
        for k, v in keys.items():
            put(buckets.of_kv(ns, k), "kvConfig", f"{ns}/{k}", v)
    config = tables.get("controllerConfig") or {}
    explicit = config.get("explicit", {})
    for k, v in (config.get("effective") or {}).items():
        put(buckets.config, "controllerConfig", k, {"effective": v, "explicit": explicit.get(k)})
    if "featureLevel" in tables:  # written from level 1 on
        put(buckets.config, "featureLevel", "level", tables["featureLevel"]["level"])
    return out


SPLIT_SECTIONS = frozenset(
    {"replicaInfoTable", "syncStateSetInfoTable", "brokerLiveTable", "kvConfig", "controllerConfig", "featureLevel"}
)
