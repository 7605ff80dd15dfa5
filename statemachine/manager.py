"""ReplicasInfoManager: RocketMQ's controller operations over the replica and sync-state tables (spec §4).

Each operation checks in the spec's order, builds the RocketMQ response, then applies its events (spec §5,
the `_on_*` methods). `t` is the time carried by the command: every liveness question is asked at `t`.
Deliberate departures from RocketMQ's quirks (spec §12) are marked DEVIATION and listed in
docs/statemachine.md.
"""

from __future__ import annotations

import re

from statemachine import codes as C
from statemachine.config import ReplicatedConfig
from statemachine.elect import ElectPolicy
from statemachine.liveness import BrokerLiveTable
from statemachine.result import Result, RoleChange
from statemachine.tables import BrokerReplicaInfo, ReplicaTable, SyncStateInfo, SyncStateTable
from statemachine.values import JSONObject

_JAVA_LONG = re.compile(r"[+-]?\d+")  # \d: any Unicode decimal digit, as Character.digit
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def parse_broker_ids(text: str) -> list[int]:
    """Java's `Long.valueOf` over `text.split(";")` (trailing empty pieces dropped, as Java's split does).
    Raises ValueError carrying Java's exception text."""
    pieces = text.split(";")
    while pieces and pieces[-1] == "":
        pieces.pop()
    ids = []
    for p in pieces:
        if not _JAVA_LONG.fullmatch(p) or not _LONG_MIN <= int(p) <= _LONG_MAX:
            raise ValueError(f'java.lang.NumberFormatException: For input string: "{p}"')
        ids.append(int(p))
    return ids


def _blank(text: str | None) -> bool:
    return text is None or not text.strip()


class ReplicasInfoManager:
    def __init__(
        self, replicas: ReplicaTable, sync: SyncStateTable, live: BrokerLiveTable, config: ReplicatedConfig
    ) -> None:
        self.replicas = replicas
        self.sync = sync
        self.live = live
        self.config = config

    def contains(self, name: str) -> bool:
        """A broker-set exists only while it is in both tables (spec §2.2)."""
        return name in self.replicas.sets and name in self.sync.sets

    def policy(self, info: BrokerReplicaInfo, t: int, since: int | None = None) -> ElectPolicy:
        """Who may be elected at `t`. `since`: the aliveSinceMillis of the scan entry (1015) that elects,
        None for every other command.
        DEVIATION: RocketMQ's JRaftController judges every broker on its last heartbeat alone, so its new
        leader can expire a live broker that has not reached it yet and re-elect a healthy master. A scan
        here carries its leader's takeover time, and no broker's last heartbeat counts as earlier than that
        in the scan (expiry, election, notification targets; heartbeat.py, KAFKA-18138)."""
        live, cluster, name = self.live, info.cluster_name, info.broker_name
        return ElectPolicy(lambda b: live.alive_row(cluster, name, b, t, since))

    # --- 4.1 / 4.2 registration ------------------------------------------------------------------------

    def get_next_broker_id(self, cluster: str, name: str) -> Result:
        info = self.replicas.sets.get(name)
        if info is None:
            next_id = 1
        else:
            # DEVIATION: skip ids already taken. RocketMQ answers nextAssignBrokerId even when an
            # out-of-sequence apply took it, and the broker then loops on 2014 (spec §12).
            next_id = info.next_assign_broker_id
            while next_id in info.brokers:
                next_id += 1
        return Result(C.SUCCESS, header={"clusterName": cluster, "brokerName": name, "nextBrokerId": next_id})

    def apply_broker_id(self, cluster: str, name: str, broker_id: int, check_code: str) -> Result:
        header = {"clusterName": cluster, "brokerName": name}
        info = self.replicas.sets.get(name)
        if info is None:
            if broker_id != 1:
                remark = f"Broker-set: {name} hasn't been registered in controller, but broker try to apply brokerId: {broker_id}"
                return Result(C.CONTROLLER_BROKER_ID_INVALID, remark, header)
        else:
            used = info.brokers.get(broker_id)
            if used is not None and used[1] != check_code:
                remark = f"Fail to apply brokerId: {broker_id} in broker-set: {name}"
                return Result(C.CONTROLLER_BROKER_ID_INVALID, remark, header)
        self._on_apply_broker_id(cluster, name, check_code.split(";", 1)[0], broker_id, check_code)
        return Result(C.SUCCESS, None, header)

    def register_broker(self, cluster: str, name: str, broker_id: int, address: str, t: int) -> Result:
        header: JSONObject = {
            "clusterName": cluster,
            "brokerName": name,
            "masterBrokerId": None,
            "masterAddress": None,
            "masterEpoch": None,
            "syncStateSetEpoch": None,
        }
        if not self.contains(name):
            remark = f"Broker-set: {name} hasn't been registered in controller"
            return Result(C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, remark, header)
        info, state = self.replicas.sets[name], self.sync.sets[name]
        if broker_id not in info.brokers:
            remark = f"BrokerId: {broker_id} hasn't been registered in broker-set: {name}"
            return Result(C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, remark, header)
        master = state.master_broker_id
        if master is not None and self.live.is_alive(cluster, name, master, t):
            header["masterBrokerId"] = master
            header["masterAddress"] = info.address(master)
            header["masterEpoch"] = state.master_epoch
            header["syncStateSetEpoch"] = state.sync_state_set_epoch
        body = state.sync_state_set_body()
        if info.brokers[broker_id][0] != address:
            info.set_address(broker_id, address)  # event UpdateBrokerAddress
        return Result(C.SUCCESS, None, header, body)

    # --- 4.6 / 4.7 reads -------------------------------------------------------------------------------

    def get_replica_info(self, name: str) -> Result:
        if not self.contains(name):
            header: JSONObject = {"masterBrokerId": None, "masterAddress": None, "masterEpoch": None}
            return Result(C.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed", header)
        info, state = self.replicas.sets[name], self.sync.sets[name]
        master = state.master_broker_id
        header = {"masterBrokerId": master, "masterAddress": info.address(master), "masterEpoch": state.master_epoch}
        return Result(C.SUCCESS, None, header, state.sync_state_set_body())

    def get_sync_state_data(self, names: list[str], t: int) -> Result:
        if not names:  # RocketMQ's processor never reaches the controller with an empty list
            return Result(C.SYSTEM_ERROR, "not set any response code")
        return Result(C.SUCCESS, body={"replicasInfoTable": self._sync_state_table(names, t)})

    def broker_sets(self, cluster_name: str | None, t: int) -> Result:
        """1006's answer for every broker set of `cluster_name` (of every cluster when None), by name: what
        mqadmin's `getSyncStateSet -c` asks for after resolving the cluster's broker names. Not a command:
        the HTTP layer calls it on the applied state after a ReadIndex barrier."""
        names = sorted(
            n for n, info in self.replicas.sets.items() if cluster_name is None or info.cluster_name == cluster_name
        )
        return Result(C.SUCCESS, body={"replicasInfoTable": self._sync_state_table(names, t)})

    def _sync_state_table(self, names: list[str], t: int) -> JSONObject:
        table: JSONObject = {}
        for name in names:
            if not self.contains(name):
                continue
            info, state = self.replicas.sets[name], self.sync.sets[name]
            in_sync: list[JSONObject] = []
            not_in_sync: list[JSONObject] = []
            for b in sorted(info.brokers):
                alive = self.live.is_alive(info.cluster_name, name, b, t)
                replica = {"brokerName": name, "brokerId": b, "brokerAddress": info.brokers[b][0], "alive": alive}
                (in_sync if b in state.sync_state_set else not_in_sync).append(replica)
            master = state.master_broker_id
            table[name] = {
                "masterBrokerId": master,
                "masterAddress": info.address(master),
                "masterEpoch": state.master_epoch,
                "syncStateSetEpoch": state.sync_state_set_epoch,
                "inSyncReplicas": in_sync,
                "notInSyncReplicas": not_in_sync,
            }
        return table

    # --- 4.5 alterSyncStateSet --------------------------------------------------------------------------

    def alter_sync_state_set(
        self, name: str, master_id: int, master_epoch: int, new_set_ids: list[int], held_epoch: int, t: int
    ) -> Result:
        header: JSONObject = {"newSyncStateSetEpoch": None}
        failed = C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
        if not self.contains(name):
            return Result(failed, "Broker metadata is not existed", header)
        info, state = self.replicas.sets[name], self.sync.sets[name]
        new_set = frozenset(new_set_ids)
        if new_set == state.sync_state_set:
            remark = "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet"
            return Result(failed, remark, header)
        current = state.master_broker_id
        if current is None or current != master_id:
            remark = f"Rejecting alter syncStateSet request because the current leader is:{{{_java(current)}}}, not {{{master_id}}}"
            return Result(C.CONTROLLER_INVALID_MASTER, remark, header)
        if master_epoch != state.master_epoch:
            remark = f"Rejecting alter syncStateSet request because the current master epoch is:{{{state.master_epoch}}}, not {{{master_epoch}}}"
            return Result(C.CONTROLLER_FENCED_MASTER_EPOCH, remark, header)
        if held_epoch != state.sync_state_set_epoch:
            remark = f"Rejecting alter syncStateSet request because the current syncStateSet epoch is:{{{state.sync_state_set_epoch}}}, not {{{held_epoch}}}"
            return Result(C.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH, remark, header)
        for b in sorted(new_set):
            if b not in info.brokers:
                remark = f"Rejecting alter syncStateSet request because the replicas {{{b}}} don't exist"
                return Result(C.CONTROLLER_INVALID_REPLICAS, remark, header)
            if not self.live.is_alive(info.cluster_name, name, b, t):
                remark = f"Rejecting alter syncStateSet request because the replicas {{{b}}} don't alive"
                return Result(C.CONTROLLER_BROKER_NOT_ALIVE, remark, header)
        if current not in new_set:
            remark = f"Rejecting alter syncStateSet request because the newSyncStateSet don't contains origin leader {{{current}}}"
            return Result(failed, remark, header)
        epoch = state.sync_state_set_epoch + 1
        state.replace_sync_state_set(new_set)  # event AlterSyncStateSet
        body = {"syncStateSet": sorted(new_set), "syncStateSetEpoch": epoch}
        return Result(C.SUCCESS, None, {"newSyncStateSetEpoch": epoch}, body)

    # --- 4.4 electMaster --------------------------------------------------------------------------------

    def elect_master(self, name: str, broker_id: int, designate: bool, t: int, since: int | None = None) -> Result:
        """Broker trigger (own id), admin trigger (wanted id, designate) or controller trigger (id -1).
        `since`: the liveness floor of the scan entry that triggers it (heartbeat.py), else None."""
        header: JSONObject = {
            "masterBrokerId": None,
            "masterAddress": None,
            "masterEpoch": None,
            "syncStateSetEpoch": None,
        }
        if not self.contains(name):
            return Result(C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered", header)
        info, state = self.replicas.sets[name], self.sync.sets[name]
        old = state.master_broker_id
        new: int | None = None
        if state.master_epoch == 0 and broker_id != -1:
            # The first election: the first requester wins, without a liveness check (spec §4.4.2).
            if broker_id not in info.brokers:
                # DEVIATION: RocketMQ would make an unregistered id master, with no address (spec §12).
                remark = f"BrokerId: {broker_id} hasn't been registered in broker-set: {name}"
                return Result(C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, remark, header)
            new = broker_id
        if new is None:
            unclean = sorted(info.brokers) if self.config.enable_elect_unclean_master else None
            preferred = broker_id if designate else None
            new = self.policy(info, t, since).elect(state.sync_state_set, unclean, old, preferred)
        if new is not None and new == old:
            header.update(
                masterBrokerId=old,
                masterAddress=info.address(old),
                masterEpoch=state.master_epoch,
                syncStateSetEpoch=state.sync_state_set_epoch,
            )
            remark = f"The old master {old} is still alive, not need to elect new master for broker {name}"
            return Result(
                C.CONTROLLER_MASTER_STILL_EXIST, remark, header, {"syncStateSet": sorted(state.sync_state_set)}
            )
        if new is not None:
            state.change_master(new)  # event ElectMaster (elected)
            header.update(
                masterBrokerId=new,
                masterAddress=info.address(new),
                masterEpoch=state.master_epoch,
                syncStateSetEpoch=state.sync_state_set_epoch,
            )
            group = {"cluster": info.cluster_name, "brokerName": name, "brokerAddrs": info.member_addrs()}
            body = {"brokerMemberGroup": group, "syncStateSet": [new]}
            return Result(C.SUCCESS, None, header, body, self._role_change(info, state, t, since))
        if broker_id == -1:  # controller trigger: record that the master is gone
            if old is not None or state.master_epoch == 0:
                # DEVIATION: RocketMQ applies this event on every failed controller-triggered attempt, so each
                # retry of an abandoned set bumps masterEpoch again. Here it is applied only when there is a
                # master to clear (or the set never had one, as RocketMQ): once cleared, a retry that finds
                # nobody to elect changes nothing, and masterEpoch stays put.
                state.change_master(None)  # event ElectMaster (not elected)
            remark = "Old master has down and failed to elect a new broker master"
            return Result(C.CONTROLLER_MASTER_NOT_AVAILABLE, remark, header)
        return Result(C.CONTROLLER_ELECT_MASTER_FAILED, "Failed to elect a new master", header)

    def _role_change(
        self, info: BrokerReplicaInfo, state: SyncStateInfo, t: int, since: int | None = None
    ) -> tuple[RoleChange, ...]:
        if not self.config.notify_broker_role_changed:
            return ()
        cluster, name = info.cluster_name, info.broker_name
        targets = tuple(
            (b, info.brokers[b][0]) for b in sorted(info.brokers) if self.live.is_alive(cluster, name, b, t, since)
        )
        master = state.master_broker_id
        assert master is not None
        change = RoleChange(
            cluster,
            name,
            master,
            info.address(master),
            state.master_epoch,
            state.sync_state_set_epoch,
            tuple(sorted(state.sync_state_set)),
            targets,
        )
        return (change,)

    # --- 4.8 cleanBrokerData ----------------------------------------------------------------------------

    def clean_broker_data(self, cluster: str | None, name: str, ids_text: str | None, living: bool, t: int) -> Result:
        failed = C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
        ids: list[int] | None = None
        if not _blank(ids_text):
            assert ids_text is not None
            try:
                ids = parse_broker_ids(ids_text) or None  # DEVIATION: ";" (no ids) counts as blank
            except ValueError as e:
                remark = f"Please set the option <brokerControllerIdsToClean> according to the format, exception: {e}"
                return Result(failed, remark)
        # DEVIATION: with isCleanLivingBroker RocketMQ ignores the id list and drops the whole set (spec §12);
        # here the listed ids are honoured, and only a blank list means the whole set.
        if not living:
            state = self.sync.sets.get(name)
            if ids is None and state is not None and state.master_broker_id is not None:
                return Result(failed, f"Broker {name} is still alive, clean up failure")
            if ids is not None:
                # A null cluster cannot match a live-table key in RocketMQ, so every id would look dead;
                # here it falls back to the set's own cluster (refusing to clean a living broker).
                info = self.replicas.sets.get(name)
                live_cluster = cluster or (info.cluster_name if info is not None else None)
                for b in sorted(set(ids)):
                    if self.live.is_alive(live_cluster, name, b, t):
                        return Result(failed, f"Broker [{name},  {b}] is still alive, clean up failure")
        if not self.contains(name):
            return Result(failed, f"Broker {name} is not existed,clean broker data failure.")
        self._on_clean_broker_data(name, None if ids is None else set(ids))
        return Result(C.SUCCESS)

    # --- events (spec §5) -------------------------------------------------------------------------------

    def _on_apply_broker_id(self, cluster: str, name: str, address: str, broker_id: int, check_code: str) -> None:
        if self.contains(name):
            info = self.replicas.sets[name]
            if broker_id not in info.brokers:  # an idempotent retry must not bump nextAssignBrokerId
                info.add(broker_id, address, check_code)
            return
        info = BrokerReplicaInfo(cluster, name)
        info.add(broker_id, address, check_code)
        self.replicas.sets[name] = info
        self.sync.sets[name] = SyncStateInfo(cluster, name)

    def _on_clean_broker_data(self, name: str, ids: set[int] | None) -> None:
        if not ids:
            self.replicas.sets.pop(name, None)
            self.sync.sets.pop(name, None)
            return
        info, state = self.replicas.sets[name], self.sync.sets[name]
        for b in ids:
            info.remove(b)
        state.remove_members(ids)
        if state.master_broker_id in ids:
            # DEVIATION: RocketMQ leaves masterBrokerId pointing at the removed id (spec §12). Here the master
            # is cleared as a "not elected" ElectMaster event would, so the master is always a member.
            state.change_master(None)
        if not info.brokers:
            del self.replicas.sets[name]
        if not state.sync_state_set:
            del self.sync.sets[name]


def _java(v: object) -> str:
    """How Java's String.format prints a nullable Long."""
    return "null" if v is None else str(v)
