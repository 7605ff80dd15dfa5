"""Snapshot section types of the controller state machine: one per metadata manager (RIP-59).

Section types are u16s owned by the state machine (docs/snapshot-format.md): they never change meaning and
are never reused. Pass SECTION_NAMES as `known_types` to SnapshotWriter/SnapshotReader so that a file with
a section this version does not know is refused rather than silently dropped. Body layouts:
docs/statemachine.md.
"""

from __future__ import annotations

SECTION_REPLICA_TABLE = 1  # ReplicasInfoManager.replicaInfoTable
SECTION_SYNC_STATE_TABLE = 2  # ReplicasInfoManager.syncStateSetInfoTable
SECTION_BROKER_LIVE_TABLE = 3  # RaftReplicasInfoManager.brokerLiveTable (+ pending re-election retries)
SECTION_KV_CONFIG = 4  # KvConfigManager
SECTION_CONTROLLER_CONFIG = 5  # replicated (decision-affecting) controller config
SECTION_ALARMS = 6  # raised alarms (ours; etcd's alarm list)
SECTION_FEATURES = 7  # the group's feature level (ours; KRaft's metadata.version)

SECTION_NAMES: dict[int, str] = {
    SECTION_REPLICA_TABLE: "replicaInfoTable",
    SECTION_SYNC_STATE_TABLE: "syncStateSetInfoTable",
    SECTION_BROKER_LIVE_TABLE: "brokerLiveTable",
    SECTION_KV_CONFIG: "kvConfig",
    SECTION_CONTROLLER_CONFIG: "controllerConfig",
    SECTION_ALARMS: "alarms",
    SECTION_FEATURES: "featureLevel",
}

# Every section body is a msgpack array whose first item is the body's own layout version.
SECTION_VERSION = 1
# Sections a snapshot may lack (written only when not empty; a snapshot of an earlier version has none): the
# manager then starts empty. Every other section is required to load.
OPTIONAL_SECTIONS = frozenset({SECTION_ALARMS, SECTION_FEATURES})
