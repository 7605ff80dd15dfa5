"""ControllerStateMachine: what the Raft node applies committed entries to (the StateMachine protocol of
raft/node/statemachine.py, duck-typed: this package never imports raft).

Pure: no clock, no randomness, no IO; every decision comes from (state, command bytes). The same object
runs on the leader, on followers and in offline replay tools. Call every method from one thread (the
node's apply thread); nothing here locks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

import msgpack

from snapshot.rw import SnapshotAbleMetadataManager, SnapshotReader, SnapshotWriter, load_managers
from statemachine import codes as C
from statemachine import commands as K
from statemachine.alarms import AlarmTable
from statemachine.commands import FORMAT_VERSION, HEARTBEAT_ARITY, NAMED, CommandError, check, heartbeat_ok
from statemachine.config import ReplicatedConfig
from statemachine.features import GATED, FeatureLevelError, FeatureTable
from statemachine.heartbeat import BrokerHeartbeatManager
from statemachine.kv import KvConfigManager
from statemachine.liveness import BrokerLiveTable
from statemachine.manager import ReplicasInfoManager
from statemachine.result import Result
from statemachine.sections import OPTIONAL_SECTIONS
from statemachine.tables import ReplicaTable, SyncStateTable
from statemachine.values import Unpacked

log = logging.getLogger("statemachine")

_unpackb = msgpack.unpackb
_new_tuple = tuple.__new__
HEARTBEAT_OK = Result(C.SUCCESS, "Heart beat success")  # shared: a heartbeat answer allocates nothing
# Commands that only read: answered from local state (ReadIndex) outside the log, so they must not move the clock.
READ_ONLY_CODES = frozenset(
    {C.GET_REPLICA_INFO, C.GET_SYNC_STATE_DATA, C.GET_NEXT_BROKER_ID, C.GET_BROKER_LIVE_INFO, C.KV_GET}
)


class AppliedEntry(Protocol):
    index: int
    term: int
    data: bytes


class ControllerStateMachine:
    """The whole controller state: replica and sync-state tables, broker live table, KV config and replicated
    config, each one snapshot section. `apply(bytes) -> Result` is the only way to change it."""

    def __init__(self) -> None:
        self._install(*_fresh())
        self.leader_term = -1  # the term this node leads, -1 when it does not (informational only)
        self.error: BaseException | None = None

    def _install(
        self,
        replicas: ReplicaTable,
        sync: SyncStateTable,
        live: BrokerLiveTable,
        kv: KvConfigManager,
        config: ReplicatedConfig,
        alarms: AlarmTable,
        features: FeatureTable,
    ) -> None:
        self.replicas, self.sync, self.live, self.kv, self.config = replicas, sync, live, kv, config
        self.alarms, self.features = alarms, features
        self.manager = ReplicasInfoManager(replicas, sync, live, config)
        self.heartbeats = BrokerHeartbeatManager(self.manager)
        # The other sections' bodies as section_parts last encoded them, by type. Only commands past the
        # heartbeat path can change those managers, and each clears this; heartbeats change only the live
        # table. With thousands of sets, re-encoding them at every checkpoint and snapshot cost ~2 ms of a
        # loaded core, for tables that steady heartbeats never change.
        self._bodies: dict[int, bytes] = {}
        # code -> handler(the command as its commands.NAMED class: typed fields by their wire names).
        self._handlers: dict[int, Callable[..., Result]] = {  # each takes its code's typed command
            C.ALTER_SYNC_STATE_SET: self._alter_sync_state_set,
            C.ELECT_MASTER: self._elect_master,
            C.REGISTER_BROKER: self._register_broker,
            C.GET_REPLICA_INFO: self._get_replica_info,
            C.GET_SYNC_STATE_DATA: self._get_sync_state_data,
            C.UPDATE_CONTROLLER_CONFIG: self._update_config,
            C.CLEAN_BROKER_DATA: self._clean_broker_data,
            C.GET_NEXT_BROKER_ID: self._get_next_broker_id,
            C.APPLY_BROKER_ID: self._apply_broker_id,
            C.BROKER_CLOSE_CHANNEL: self._close_channel,
            C.CHECK_NOT_ACTIVE_BROKER: self._check_not_active_broker,
            C.GET_BROKER_LIVE_INFO: self._get_broker_live_info,
            C.BROKER_HEARTBEAT: self._heartbeat,
            C.BROKER_HEARTBEATS: self._heartbeats,
            C.KV_PUT: self._kv_put,
            C.KV_GET: self._kv_get,
            C.KV_DELETE: self._kv_delete,
            C.KV_CAS: self._kv_cas,
            C.ALARM: self._alarm,
            C.FEATURE_LEVEL: self._feature_level,
        }
        assert self._handlers.keys() == NAMED.keys()

    def managers(self) -> tuple[SnapshotAbleMetadataManager, ...]:
        """One per snapshot section, in section order."""
        return (self.replicas, self.sync, self.live, self.kv, self.config, self.alarms, self.features)

    # --- applying -------------------------------------------------------------------------------------

    def apply(self, data: bytes) -> Result:
        """Apply one command. Bytes that are not a valid command answer 2015 and change nothing.

        Time never runs backwards: a command applies at max(its timeMillis, the last applied command's), so a
        leader whose clock is behind its predecessor's acts at the predecessor's latest time. Reads
        (READ_ONLY_CODES, answered from local state outside the log) use that time but never move it."""
        try:
            c = _unpackb(data)
        except Exception as e:  # msgpack raises several exception types for bad bytes
            return _malformed(f"not msgpack: {type(e).__name__}: {e}")
        return self.apply_command(c)

    def apply_command(self, c: Unpacked) -> Result:
        """Apply one command already decoded from its bytes: `apply(data)` is `apply_command(msgpack.unpackb(data))`
        for bytes that decode, and both run this one path. For readers that decode many commands at once (a
        msgpack.Unpacker over a buffer of them: the audit's replay). `c` may be changed in place (its time)."""
        live = self.live
        # The hot path: a well-formed heartbeat goes straight to the live table, as the array it is.
        if (
            type(c) is list
            and len(c) == HEARTBEAT_ARITY
            and c[1] == C.BROKER_HEARTBEAT
            and type(c[1]) is int
            and c[0] == FORMAT_VERSION
            and type(c[0]) is int
            and type(c[2]) is int
            and heartbeat_ok(c)
        ):
            if c[2] < live.clock:
                c[2] = live.clock
            else:
                live.clock = c[2]
            live.apply_heartbeat(c)
            return HEARTBEAT_OK
        try:
            c = check(c)
        except CommandError as e:
            return _malformed(str(e))
        code = c[1]
        if code in GATED:  # a format newer than the group's level: what a release without it answers, state untouched
            refused = self.features.gate(code)
            if refused is not None:
                return refused
        read = code in READ_ONLY_CODES
        if c[2] < live.clock:
            c[2] = live.clock
        elif not read:
            live.clock = c[2]
        if not read and code != C.BROKER_HEARTBEATS:
            # a read changes no section, heartbeats only the live table (as 1018 above): the cached bodies stay
            self._bodies.clear()
        return self._handlers[code](_new_tuple(NAMED[code], c))  # commands.named, inlined

    def on_apply(self, entries: Iterable[AppliedEntry]) -> list[Result]:
        apply = self.apply
        return [apply(e.data) for e in entries]

    # --- handlers: one per code, each taking its typed command (commands.NAMED) -------------------------

    def _alter_sync_state_set(self, c: K.AlterSyncStateSet) -> Result:
        return self.manager.alter_sync_state_set(
            c.brokerName, c.masterBrokerId, c.masterEpoch, c.syncStateSet, c.syncStateSetEpoch, c.timeMillis
        )

    def _elect_master(self, c: K.ElectMaster) -> Result:
        return self.manager.elect_master(c.brokerName, c.brokerId, c.designateElect, c.timeMillis)

    def _register_broker(self, c: K.RegisterBroker) -> Result:
        return self.manager.register_broker(c.clusterName, c.brokerName, c.brokerId, c.brokerAddress, c.timeMillis)

    def _get_replica_info(self, c: K.GetReplicaInfo) -> Result:
        return self.manager.get_replica_info(c.brokerName)

    def _get_sync_state_data(self, c: K.GetSyncStateData) -> Result:
        return self.manager.get_sync_state_data(c.brokerNames, c.timeMillis)

    def _update_config(self, c: K.UpdateControllerConfig) -> Result:
        self.config.update(c.config)
        return Result(C.SUCCESS)

    def _clean_broker_data(self, c: K.CleanBrokerData) -> Result:
        return self.manager.clean_broker_data(
            c.clusterName, c.brokerName, c.brokerControllerIdsToClean, c.isCleanLivingBroker, c.timeMillis
        )

    def _get_next_broker_id(self, c: K.GetNextBrokerId) -> Result:
        return self.manager.get_next_broker_id(c.clusterName, c.brokerName)

    def _apply_broker_id(self, c: K.ApplyBrokerId) -> Result:
        return self.manager.apply_broker_id(c.clusterName, c.brokerName, c.appliedBrokerId, c.registerCheckCode)

    def _close_channel(self, c: K.BrokerCloseChannel) -> Result:
        return self.heartbeats.close_channel(c.clusterName, c.brokerName, c.brokerId, c.timeMillis)

    def _check_not_active_broker(self, c: K.CheckNotActiveBroker) -> Result:
        return self.heartbeats.check_not_active_broker(c.timeMillis, c.aliveSinceMillis)

    def _get_broker_live_info(self, c: K.GetBrokerLiveInfo) -> Result:
        return self.heartbeats.get_broker_live_info(c.brokerIdentity)

    def _heartbeat(self, c: K.BrokerHeartbeat) -> Result:
        self.live.apply_heartbeat(list(c))  # unreached while heartbeat_ok and check agree (a test holds them)
        return HEARTBEAT_OK

    def _heartbeats(self, c: K.BrokerHeartbeats) -> Result:
        self.live.apply_heartbeats(c.timeMillis, c.heartbeats)
        return HEARTBEAT_OK

    def _kv_put(self, c: K.KvPut) -> Result:
        return self.kv.put(c.namespace, c.key, c.value)

    def _kv_get(self, c: K.KvGet) -> Result:
        return self.kv.get(c.namespace, c.key)

    def _kv_delete(self, c: K.KvDelete) -> Result:
        return self.kv.delete(c.namespace, c.key)

    def _kv_cas(self, c: K.KvCas) -> Result:
        return self.kv.cas(c.namespace, c.key, c.expect, c.value)

    def _alarm(self, c: K.Alarm) -> Result:
        return self.alarms.apply(c.activate, c.alarm, c.memberId, c.detail, c.timeMillis)

    def _feature_level(self, c: K.FeatureLevel) -> Result:
        return self.features.apply(c.level)  # FeatureLevelError above MAX_LEVEL: the node stops

    # --- for the daemon -------------------------------------------------------------------------------

    def scan_needed(self, now_ms: int, alive_since_ms: int | None = None) -> bool:
        """Whether proposing a scan (commands.check_not_active_broker(now_ms, alive_since_ms)) would do
        anything (at the time it would apply: no earlier than the last applied command's)."""
        return self.heartbeats.scan_needed(max(now_ms, self.live.clock), alive_since_ms)

    @property
    def clock_ms(self) -> int:
        """The time of the last applied command (ms): the earliest time the next one can apply at."""
        return self.live.clock

    def config_values(self) -> dict[str, int | bool]:
        """The replicated controller config in force (for GET config, 1010; a local, non-linearizable read)."""
        return self.config.values()

    # --- snapshots --------------------------------------------------------------------------------------

    def saved_managers(self) -> tuple[SnapshotAbleMetadataManager, ...]:
        """The managers a snapshot holds: every one, but the alarms only while one is raised and the feature
        level only above 0, so that a group at level 0 writes snapshots v0.3.0 still loads."""
        skip = {id(self.alarms)} if not self.alarms.table else set()
        if self.features.level == 0:
            skip.add(id(self.features))
        return tuple(m for m in self.managers() if id(m) not in skip)

    def encode_sections(self) -> dict[int, bytes]:
        """{section type: body}: a point-in-time image, cheap enough for the apply thread."""
        return {m.section_type(): m.encode_snapshot() for m in self.saved_managers()}

    def section_parts(self) -> dict[int, list[bytes]]:
        """encode_sections with each body in parts (`b"".join(parts)` is the body), for the checkpoint hash
        and the snapshot: the live table's rows unjoined (BrokerLiveTable.snapshot_parts), so that the join
        can happen elsewhere (the hashing thread, the snapshot writer's), and the other sections as encoded
        the last time if no command since could change them (`_bodies`)."""
        bodies, out = self._bodies, {}
        for m in self.saved_managers():
            t = m.section_type()
            if m is self.live:
                out[t] = m.snapshot_parts()
                continue
            body = bodies.get(t)
            if body is None:
                body = bodies[t] = m.encode_snapshot()
            out[t] = [body]
        return out

    def load_sections(self, sections: Mapping[int, bytes]) -> None:
        """Replace the whole state with decoded section bodies. All or nothing: on a ValueError (or a missing
        section, KeyError) the current state is untouched."""
        staged = _fresh()
        for m in staged:
            t = m.section_type()
            if t in sections or t not in OPTIONAL_SECTIONS:
                m.load_snapshot(sections[t])
        self._install(*staged)

    def on_snapshot_save(self, writer: SnapshotWriter) -> None:
        """On the apply thread: one section per manager, as `section_parts` takes them (no encoding in steady
        state); the writer's thread joins the parts (`add_section_parts`), then compresses without the GIL."""
        for t, parts in self.section_parts().items():
            writer.add_section_parts(t, parts)

    def on_snapshot_load(self, reader: SnapshotReader) -> None:
        """FeatureLevelError (naming the file) for a snapshot of a feature level above this release's: a valid
        snapshot this node cannot read, refused rather than quarantined."""
        staged = _fresh()
        required = [m for m in staged if m.section_type() not in OPTIONAL_SECTIONS]
        load_managers(reader, required)  # SnapshotFormatError on a body that does not decode
        try:
            load_managers(reader, [m for m in staged if m not in required], allow_missing=True)
        except FeatureLevelError as e:
            raise FeatureLevelError(f"{reader.path}: {e}") from None
        self._install(*staged)

    # --- leadership and errors (informational: results never depend on them) ---------------------------

    def on_leader_start(self, term: int) -> None:
        self.leader_term = term
        log.info("controller state machine: leading term %d", term)

    def on_leader_stop(self, term: int) -> None:
        self.leader_term = -1
        log.info("controller state machine: stopped leading term %d", term)

    def on_error(self, error: BaseException) -> None:
        self.error = error
        log.error("controller state machine: the node stopped: %r", error)


def _fresh() -> tuple[
    ReplicaTable, SyncStateTable, BrokerLiveTable, KvConfigManager, ReplicatedConfig, AlarmTable, FeatureTable
]:
    return (
        ReplicaTable(),
        SyncStateTable(),
        BrokerLiveTable(),
        KvConfigManager(),
        ReplicatedConfig(),
        AlarmTable(),
        FeatureTable(),
    )


def _malformed(reason: str) -> Result:
    return Result(C.CONTROLLER_JRAFT_INTERNAL_ERROR, reason)
