"""The two tables of RocketMQ's ReplicasInfoManager (spec §2.1, §2.2) and their snapshot sections.

A broker-set "exists" only while it is in both tables. Mutations happen through the event methods at the
bottom of `ReplicasInfoManager` (manager.py), which mirror RocketMQ's events (spec §5).
"""

from __future__ import annotations

import msgpack

from statemachine import _body as B
from statemachine.sections import SECTION_REPLICA_TABLE, SECTION_SYNC_STATE_TABLE
from statemachine.values import JSONObject


class BrokerReplicaInfo:
    """One broker-set's registered replicas: brokerId -> (address, registerCheckCode).

    Change it only through the methods: each drops the cached snapshot row, which spares re-encoding the
    thousands of sets a snapshot did not see change."""

    __slots__ = ("cluster_name", "broker_name", "next_assign_broker_id", "brokers", "_row")

    def __init__(self, cluster_name: str, broker_name: str, next_assign_broker_id: int = 1) -> None:
        self.cluster_name = cluster_name
        self.broker_name = broker_name
        # 1 + the number of ids ever added; never "max id + 1" and never decremented (spec §2.1).
        self.next_assign_broker_id = next_assign_broker_id
        self.brokers: dict[int, tuple[str, str]] = {}
        self._row: bytes | None = None

    def address(self, broker_id: int | None) -> str | None:
        entry = self.brokers.get(broker_id) if broker_id is not None else None
        return None if entry is None else entry[0]

    def add(self, broker_id: int, address: str, check_code: str) -> None:
        self.brokers[broker_id] = (address, check_code)
        self.next_assign_broker_id += 1
        self._row = None

    def set_address(self, broker_id: int, address: str) -> None:
        """Event UpdateBrokerAddress: the check code is kept."""
        self.brokers[broker_id] = (address, self.brokers[broker_id][1])
        self._row = None

    def remove(self, broker_id: int) -> None:
        self.brokers.pop(broker_id, None)
        self._row = None

    def row_bytes(self) -> bytes:
        """This set's row of the replicaInfoTable section, msgpack-encoded (cached until the next change)."""
        if self._row is None:
            ids = [[i, *self.brokers[i]] for i in sorted(self.brokers)]
            self._row = msgpack.packb([self.broker_name, self.cluster_name, self.next_assign_broker_id, ids])
        return self._row

    def member_addrs(self) -> dict[str, str]:
        """brokerAddrs of a BrokerMemberGroup: JSON object keys are strings, ids ascending."""
        return {str(i): self.brokers[i][0] for i in sorted(self.brokers)}

    def to_json(self) -> JSONObject:
        return {
            "clusterName": self.cluster_name,
            "brokerName": self.broker_name,
            "nextAssignBrokerId": self.next_assign_broker_id,
            "brokerIdTable": {
                str(i): {"brokerAddress": a, "registerCheckCode": c} for i, (a, c) in sorted(self.brokers.items())
            },
        }


class SyncStateInfo:
    """One broker-set's master and SyncStateSet, with their epochs. Change it only through the methods
    (they keep the epochs right and drop the cached snapshot row)."""

    __slots__ = (
        "cluster_name",
        "broker_name",
        "master_broker_id",
        "master_epoch",
        "sync_state_set",
        "sync_state_set_epoch",
        "_row",
    )

    def __init__(self, cluster_name: str, broker_name: str) -> None:
        self.cluster_name = cluster_name
        self.broker_name = broker_name
        self.master_broker_id: int | None = None
        self.master_epoch = 0  # 0 means "never elected": the next election is the first one
        self.sync_state_set: frozenset[int] = frozenset()
        self.sync_state_set_epoch = 0
        self._row: bytes | None = None

    def change_master(self, new_master: int | None) -> None:
        """Event ElectMaster: elected -> master, masterEpoch + 1, SyncStateSet {master}, its epoch + 1;
        not elected (None) -> no master, masterEpoch + 1, the SyncStateSet and its epoch kept."""
        self.master_epoch += 1
        self.master_broker_id = new_master
        if new_master is not None:
            self.sync_state_set = frozenset((new_master,))
            self.sync_state_set_epoch += 1
        self._row = None

    def replace_sync_state_set(self, members: frozenset[int]) -> None:
        """Event AlterSyncStateSet."""
        self.sync_state_set = members
        self.sync_state_set_epoch += 1
        self._row = None

    def remove_members(self, ids: set[int]) -> None:
        """Part of event CleanBrokerData: no epoch moves."""
        self.sync_state_set = self.sync_state_set - ids
        self._row = None

    def row_bytes(self) -> bytes:
        if self._row is None:
            self._row = msgpack.packb(
                [
                    self.broker_name,
                    self.cluster_name,
                    self.master_broker_id,
                    self.master_epoch,
                    self.sync_state_set_epoch,
                    sorted(self.sync_state_set),
                ]
            )
        return self._row

    def sync_state_set_body(self) -> JSONObject:
        """The SyncStateSet response body."""
        return {"syncStateSet": sorted(self.sync_state_set), "syncStateSetEpoch": self.sync_state_set_epoch}

    def to_json(self) -> JSONObject:
        return {
            "clusterName": self.cluster_name,
            "brokerName": self.broker_name,
            "masterBrokerId": self.master_broker_id,
            "masterEpoch": self.master_epoch,
            "syncStateSet": sorted(self.sync_state_set),
            "syncStateSetEpoch": self.sync_state_set_epoch,
        }


class ReplicaTable:
    """replicaInfoTable: brokerName -> BrokerReplicaInfo. A SnapshotAbleMetadataManager."""

    def __init__(self) -> None:
        self.sets: dict[str, BrokerReplicaInfo] = {}

    def section_type(self) -> int:
        return SECTION_REPLICA_TABLE

    def encode_snapshot(self) -> bytes:
        # Canonical: sets by name, ids ascending, so equal tables give equal bytes whatever the dict order.
        sets = self.sets
        return B.pack_rows([sets[name].row_bytes() for name in sorted(sets)])

    def load_snapshot(self, body: bytes) -> None:
        (rows,) = B.unpack(SECTION_REPLICA_TABLE, body, 1)
        sets: dict[str, BrokerReplicaInfo] = {}
        for name, cluster, next_id, ids in B.rows(rows, 4, "replicaInfoTable"):
            B.check(B.is_str(name) and B.is_str(cluster) and B.is_int(next_id), "replicaInfoTable {!r}: types", name)
            s = BrokerReplicaInfo(cluster, name, next_id)
            for i, addr, code in B.rows(ids, 3, "replicaInfoTable {!r}", name):
                B.check(B.is_int(i) and B.is_str(addr) and B.is_str(code), "replicaInfoTable {!r}: id types", name)
                s.brokers[i] = (addr, code)
            B.ascending([r[0] for r in ids], "replicaInfoTable {!r} ids", name)
            sets[name] = s
        B.ascending([r[0] for r in rows], "replicaInfoTable names")
        self.sets = sets

    def to_json(self) -> JSONObject:
        return {name: self.sets[name].to_json() for name in sorted(self.sets)}


class SyncStateTable:
    """syncStateSetInfoTable: brokerName -> SyncStateInfo. A SnapshotAbleMetadataManager."""

    def __init__(self) -> None:
        self.sets: dict[str, SyncStateInfo] = {}

    def section_type(self) -> int:
        return SECTION_SYNC_STATE_TABLE

    def encode_snapshot(self) -> bytes:
        sets = self.sets
        return B.pack_rows([sets[name].row_bytes() for name in sorted(sets)])

    def load_snapshot(self, body: bytes) -> None:
        (rows,) = B.unpack(SECTION_SYNC_STATE_TABLE, body, 1)
        sets: dict[str, SyncStateInfo] = {}
        for name, cluster, master, m_epoch, s_epoch, members in B.rows(rows, 6, "syncStateSetInfoTable"):
            ok = B.is_str(name) and B.is_str(cluster) and (master is None or B.is_int(master))
            B.check(ok and B.is_int(m_epoch) and B.is_int(s_epoch), "syncStateSetInfoTable {!r}: types", name)
            s = SyncStateInfo(cluster, name)
            s.master_broker_id, s.master_epoch, s.sync_state_set_epoch = master, m_epoch, s_epoch
            s.sync_state_set = frozenset(B.ints(members, "syncStateSetInfoTable {!r} syncStateSet", name))
            sets[name] = s
        B.ascending([r[0] for r in rows], "syncStateSetInfoTable names")
        self.sets = sets

    def to_json(self) -> JSONObject:
        return {name: self.sets[name].to_json() for name in sorted(self.sets)}
