"""The RocketMQ controller state machine (jRaft kind): commands, ReplicasInfoManager tables, broker
liveness, elect policy, KV config, replicated config, snapshot sections. Pure and deterministic; imports
nothing of ours but `snapshot`.

    sm = ControllerStateMachine()                      # what raft's Node applies entries to
    data = commands.heartbeat(now_ms, "c", "b", "10.0.0.1:10911", 1)   # the leader builds commands
    result = sm.apply(data)                            # on_apply(entries) does this per entry
    result.to_envelope()                               # {"code","codeName","remark","header","body"}

Formats (commands and snapshot sections): docs/statemachine.md.
"""

from statemachine import codes, commands
from statemachine.commands import FORMAT_VERSION, Command, CommandError, decode
from statemachine.config import DEFAULTS as CONFIG_DEFAULTS
from statemachine.config import ReplicatedConfig
from statemachine.elect import ElectPolicy
from statemachine.inspection import decode_section, decode_sections, diff_sections, diff_values
from statemachine.kv import KvConfigManager
from statemachine.liveness import BrokerLiveTable, LiveRow
from statemachine.machine import ControllerStateMachine
from statemachine.manager import ReplicasInfoManager
from statemachine.result import Result, RoleChange
from statemachine.sections import (
    SECTION_BROKER_LIVE_TABLE,
    SECTION_CONTROLLER_CONFIG,
    SECTION_KV_CONFIG,
    SECTION_NAMES,
    SECTION_REPLICA_TABLE,
    SECTION_SYNC_STATE_TABLE,
)
from statemachine.tables import BrokerReplicaInfo, ReplicaTable, SyncStateInfo, SyncStateTable

__all__ = [
    "CONFIG_DEFAULTS",
    "FORMAT_VERSION",
    "SECTION_BROKER_LIVE_TABLE",
    "SECTION_CONTROLLER_CONFIG",
    "SECTION_KV_CONFIG",
    "SECTION_NAMES",
    "SECTION_REPLICA_TABLE",
    "SECTION_SYNC_STATE_TABLE",
    "BrokerLiveTable",
    "BrokerReplicaInfo",
    "Command",
    "CommandError",
    "ControllerStateMachine",
    "ElectPolicy",
    "KvConfigManager",
    "LiveRow",
    "ReplicaTable",
    "ReplicasInfoManager",
    "ReplicatedConfig",
    "Result",
    "RoleChange",
    "SyncStateInfo",
    "SyncStateTable",
    "codes",
    "commands",
    "decode",
    "decode_section",
    "decode_sections",
    "diff_sections",
    "diff_values",
]
