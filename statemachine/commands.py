"""Commands: the bytes of one Raft log entry, and their constructors. Format: docs/statemachine.md.

Every command is one msgpack array, positional so that the hot heartbeat stays small and cheap to decode:

    [version, code, timeMillis, field...]

`version` is FORMAT_VERSION, `code` the RocketMQ request code, `timeMillis` the leader's clock when it
proposed the command (RocketMQ's invokeTime / lastUpdateTimestamp / checkTimeMillis; the applier's clock is
never read), then the fields of that code in the order of FIELDS. A code may have optional trailing fields
(OPTIONAL_TRAILING: added after entries without them were written); an entry may leave them out, and the
checked array then has None in their place, so old logs still apply as they did. The constructors below are
what the HTTP layer and the daemon call; they check their arguments (CommandError naming the field, or
TypeError/ValueError for a call that is wrong as a whole) so that bad input never reaches the log. `parse`
is the apply-side check: it never trusts the bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple, cast

import msgpack

from statemachine import codes as C
from statemachine.alarms import ALARMS
from statemachine.values import JSONObject, Unpacked

FORMAT_VERSION = 1
HEADER = ("version", "code", "timeMillis")
HEADER_FIELDS = len(HEADER)

# Field kinds. Checks are `type(v) is ...` so that a bool never passes for an int (and vice versa).
INT, STR, BOOL, OPT_STR, INT_LIST, STR_LIST, OPT_IDENTITY, CONFIG, HEARTBEAT_LIST = range(9)

# Heartbeat defaults for fields a broker leaves out (spec §2.3).
DEFAULT_EPOCH = -1
DEFAULT_MAX_OFFSET = -1
DEFAULT_CONFIRM_OFFSET = -1
DEFAULT_HEARTBEAT_TIMEOUT_MILLIS = 10_000
DEFAULT_ELECTION_PRIORITY = 2**31 - 1  # Integer.MAX_VALUE: the least preferred

# The replicated controller config keys (1009) and their kinds. Node-local keys never enter the log.
CONFIG_KEYS: dict[str, int] = {
    "enableElectUncleanMaster": BOOL,
    "electMasterMaxRetryCount": INT,
    "notifyBrokerRoleChanged": BOOL,
}

# Config values as 1009 carries them (CONFIG_KEYS says which kind each key has).
ConfigValues = dict[str, "int | bool"]  # by key; CONFIG_KEYS has each kind
# A broker identity as 1016 carries it: [clusterName, brokerName, brokerId] (a msgpack array).
WireIdentity = list["str | int"]
# The heartbeats of 1202: one or more arrays, each a 1018's fields after timeMillis (BrokerHeartbeat's order).
HeartbeatList = list[list["str | int"]]


# One typed NamedTuple per code, the one declaration of its fields: the header (version, code, timeMillis),
# then the fields in wire order, named as RocketMQ spells them. A checked array becomes its code's class with
# `tuple.__new__` (no copy, no per-field work), and the state machine's handlers take it typed, so mypy checks
# every `c.brokerName`. FIELDS, the kinds the checks use and the arities all derive from these annotations
# (KIND_OF: an annotation outside that table fails at import).


class AlterSyncStateSet(NamedTuple):
    version: int
    code: int
    timeMillis: int
    brokerName: str
    masterBrokerId: int
    masterEpoch: int
    syncStateSet: list[int]
    syncStateSetEpoch: int


class ElectMaster(NamedTuple):
    version: int
    code: int
    timeMillis: int
    clusterName: str
    brokerName: str
    brokerId: int
    designateElect: bool


class RegisterBroker(NamedTuple):
    version: int
    code: int
    timeMillis: int
    clusterName: str
    brokerName: str
    brokerId: int
    brokerAddress: str


class GetReplicaInfo(NamedTuple):
    version: int
    code: int
    timeMillis: int
    brokerName: str


class GetSyncStateData(NamedTuple):
    version: int
    code: int
    timeMillis: int
    brokerNames: list[str]


class UpdateControllerConfig(NamedTuple):
    version: int
    code: int
    timeMillis: int
    config: ConfigValues


class CleanBrokerData(NamedTuple):
    version: int
    code: int
    timeMillis: int
    clusterName: str | None
    brokerName: str
    brokerControllerIdsToClean: str | None
    isCleanLivingBroker: bool


class GetNextBrokerId(NamedTuple):
    version: int
    code: int
    timeMillis: int
    clusterName: str
    brokerName: str


class ApplyBrokerId(NamedTuple):
    version: int
    code: int
    timeMillis: int
    clusterName: str
    brokerName: str
    appliedBrokerId: int
    registerCheckCode: str


class BrokerCloseChannel(NamedTuple):
    version: int
    code: int
    timeMillis: int
    clusterName: str
    brokerName: str
    brokerId: int


class CheckNotActiveBroker(NamedTuple):
    version: int
    code: int
    timeMillis: int
    # The proposing leader's clock when it took leadership; an optional trailing field (OPTIONAL_TRAILING):
    # None when the entry was written without it.
    aliveSinceMillis: int | None


class GetBrokerLiveInfo(NamedTuple):
    version: int
    code: int
    timeMillis: int
    brokerIdentity: WireIdentity | None


class BrokerHeartbeat(NamedTuple):
    version: int
    code: int
    timeMillis: int
    clusterName: str
    brokerName: str
    brokerAddr: str
    brokerId: int
    epoch: int
    maxOffset: int
    confirmOffset: int
    heartbeatTimeoutMillis: int
    electionPriority: int


class BrokerHeartbeats(NamedTuple):
    version: int
    code: int
    timeMillis: int  # every heartbeat's lastUpdateTimestamp
    heartbeats: HeartbeatList


class KvPut(NamedTuple):
    version: int
    code: int
    timeMillis: int
    namespace: str
    key: str
    value: str


class KvGet(NamedTuple):
    version: int
    code: int
    timeMillis: int
    namespace: str
    key: str


class KvDelete(NamedTuple):
    version: int
    code: int
    timeMillis: int
    namespace: str
    key: str


class KvCas(NamedTuple):
    version: int
    code: int
    timeMillis: int
    namespace: str
    key: str
    expect: str | None
    value: str


class Alarm(NamedTuple):
    version: int
    code: int
    timeMillis: int
    activate: bool
    alarm: str
    memberId: str
    detail: str


class FeatureLevel(NamedTuple):
    version: int
    code: int
    timeMillis: int
    level: int


TypedCommand = (
    AlterSyncStateSet
    | ElectMaster
    | RegisterBroker
    | GetReplicaInfo
    | GetSyncStateData
    | UpdateControllerConfig
    | CleanBrokerData
    | GetNextBrokerId
    | ApplyBrokerId
    | BrokerCloseChannel
    | CheckNotActiveBroker
    | GetBrokerLiveInfo
    | BrokerHeartbeat
    | BrokerHeartbeats
    | KvPut
    | KvGet
    | KvDelete
    | KvCas
    | Alarm
    | FeatureLevel
)
# code -> its command class.
NAMED: dict[int, type[TypedCommand]] = {
    C.ALTER_SYNC_STATE_SET: AlterSyncStateSet,
    C.ELECT_MASTER: ElectMaster,
    C.REGISTER_BROKER: RegisterBroker,
    C.GET_REPLICA_INFO: GetReplicaInfo,
    C.GET_SYNC_STATE_DATA: GetSyncStateData,
    C.UPDATE_CONTROLLER_CONFIG: UpdateControllerConfig,
    C.CLEAN_BROKER_DATA: CleanBrokerData,
    C.GET_NEXT_BROKER_ID: GetNextBrokerId,
    C.APPLY_BROKER_ID: ApplyBrokerId,
    C.BROKER_CLOSE_CHANNEL: BrokerCloseChannel,
    C.CHECK_NOT_ACTIVE_BROKER: CheckNotActiveBroker,
    C.GET_BROKER_LIVE_INFO: GetBrokerLiveInfo,
    C.BROKER_HEARTBEAT: BrokerHeartbeat,
    C.BROKER_HEARTBEATS: BrokerHeartbeats,
    C.KV_PUT: KvPut,
    C.KV_GET: KvGet,
    C.KV_DELETE: KvDelete,
    C.KV_CAS: KvCas,
    C.ALARM: Alarm,
    C.FEATURE_LEVEL: FeatureLevel,
}

# What timeMillis means for each code, for docs and inspection.
TIME_FIELD: dict[int, str] = {
    C.BROKER_HEARTBEAT: "lastUpdateTimestamp",
    C.BROKER_HEARTBEATS: "lastUpdateTimestamp",
    C.CHECK_NOT_ACTIVE_BROKER: "checkTimeMillis",
}

# Trailing fields an entry may leave out, per code: the entries written before those fields existed. A
# checked command always has every field (None for one left out); `decode` omits the ones left out.
OPTIONAL_TRAILING: dict[int, int] = {C.CHECK_NOT_ACTIVE_BROKER: 1}

# The kind each field annotation checks as (an optional trailing field's `| None` is its absence, not a value).
KIND_OF: dict[str, int] = {
    "int": INT,
    "str": STR,
    "bool": BOOL,
    "str | None": OPT_STR,
    "list[int]": INT_LIST,
    "list[str]": STR_LIST,
    "WireIdentity | None": OPT_IDENTITY,
    "ConfigValues": CONFIG,
    "HeartbeatList": HEARTBEAT_LIST,
}


def _fields_of(code: int) -> tuple[tuple[str, int], ...]:
    cls = NAMED[code]
    notes = cls.__annotations__
    names = cls._fields[HEADER_FIELDS:]
    assert cls._fields[:HEADER_FIELDS] == HEADER, cls
    optional = set(names[len(names) - OPTIONAL_TRAILING.get(code, 0) :])
    kinds = []
    for name in names:
        note = str(getattr(notes[name], "__forward_arg__", notes[name]))  # a ForwardRef on some Pythons
        if name in optional:
            note = note.removesuffix(" | None")
        kinds.append((name, KIND_OF[note]))
    return tuple(kinds)


# code -> ((field, kind), ...) in wire order, from the classes above.
FIELDS: dict[int, tuple[tuple[str, int], ...]] = {code: _fields_of(code) for code in NAMED}

_ARITY = {code: HEADER_FIELDS + len(fields) for code, fields in FIELDS.items()}
_MIN_ARITY = {code: n - OPTIONAL_TRAILING.get(code, 0) for code, n in _ARITY.items()}
_KINDS = {code: tuple(kind for _, kind in fields) for code, fields in FIELDS.items()}
HEARTBEAT_ARITY = _ARITY[C.BROKER_HEARTBEAT]
HEARTBEAT_ITEM = HEARTBEAT_ARITY - HEADER_FIELDS  # the fields of one heartbeat in 1202
_unpackb = msgpack.unpackb
_packb = msgpack.packb
_new_tuple = tuple.__new__


class CommandError(ValueError):
    """The bytes are not a valid command, or a constructor refused an argument (the reason says which part).
    `field` names the field at fault (FIELDS spelling), None when the fault is not one field's (the format
    version, the code, the length, timeMillis)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class CommandTypeError(CommandError, TypeError):
    """A constructor got a value of the wrong type for a field (still a TypeError, as Python has it)."""


def _kind_ok(kind: int, v: object) -> bool:
    if kind == INT:
        return type(v) is int
    if kind == STR:
        return type(v) is str
    if kind == BOOL:
        return type(v) is bool
    if kind == OPT_STR:
        return v is None or type(v) is str
    if kind == INT_LIST:
        return type(v) is list and all(type(x) is int for x in v)
    if kind == STR_LIST:
        return type(v) is list and all(type(x) is str for x in v)
    if kind == OPT_IDENTITY:
        return v is None or (
            type(v) is list and len(v) == 3 and type(v[0]) is str and type(v[1]) is str and type(v[2]) is int
        )
    if kind == CONFIG:
        return type(v) is dict and all(k in CONFIG_KEYS and config_value_ok(k, x) for k, x in v.items())
    if kind == HEARTBEAT_LIST:
        return type(v) is list and len(v) > 0 and all(heartbeat_item_ok(h) for h in v)
    return False


def config_value_ok(key: str, v: object) -> bool:
    if not _kind_ok(CONFIG_KEYS[key], v):
        return False
    return key != "electMasterMaxRetryCount" or (type(v) is int and v >= 0)


def heartbeat_ok(c: list) -> bool:
    """The hot path, unrolled, for a list of HEARTBEAT_ARITY items (same rules as the generic check, which
    reads FIELDS; a test holds them equal)."""
    return _heartbeat_fields_ok(c, HEADER_FIELDS)


def heartbeat_item_ok(h: object) -> bool:
    """One heartbeat of 1202: a 1018's fields after timeMillis, the same rules as `heartbeat_ok`."""
    return type(h) is list and len(h) == HEARTBEAT_ITEM and _heartbeat_fields_ok(h, 0)


def _heartbeat_fields_ok(c: list, o: int) -> bool:
    """The kinds of a heartbeat's fields (BrokerHeartbeat's after timeMillis) starting at c[o], unrolled."""
    return (
        type(c[o]) is str
        and type(c[o + 1]) is str
        and type(c[o + 2]) is str
        and type(c[o + 3]) is int
        and type(c[o + 4]) is int
        and type(c[o + 5]) is int
        and type(c[o + 6]) is int
        and type(c[o + 7]) is int
        and type(c[o + 8]) is int
    )


def _unpack(data: bytes) -> Unpacked:
    try:
        return _unpackb(data)
    except Exception as e:  # msgpack raises several types (ValueError, ExtraData, FormatError, ...)
        raise CommandError(f"not msgpack: {type(e).__name__}: {e}") from None


def parse(data: bytes) -> list:
    """Decode and check a command; return the msgpack array (fields from index HEADER_FIELDS on; optional
    trailing fields the entry left out are None). Raises CommandError for anything that is not a
    well-formed command of a known code."""
    return check(_unpack(data))


def named(c: list[Unpacked]) -> TypedCommand:
    """A checked command array as its code's typed tuple (NAMED): `cmd.brokerName`, not `c[4]`."""
    return _new_tuple(NAMED[c[1]], c)  # _make without its length check, which check() made


def _arity_text(code: int) -> str:
    lo, hi = _MIN_ARITY[code], _ARITY[code]
    return str(hi) if lo == hi else " or ".join(map(str, range(lo, hi + 1)))


def check(c: Unpacked) -> list[Unpacked]:
    """`parse` for an already unpacked msgpack object. Returns `c` itself, or, when it leaves optional
    trailing fields out, a copy with None in their place (`c` is then unchanged)."""
    if type(c) is not list or len(c) < HEADER_FIELDS:
        raise CommandError("not a msgpack array [version, code, timeMillis, ...]")
    if c[0] != FORMAT_VERSION or type(c[0]) is not int:
        raise CommandError(f"unsupported command format version {c[0]!r} (this reader knows {FORMAT_VERSION})")
    code = c[1]
    if type(code) is not int or code not in _ARITY:
        raise CommandError(f"Unknown request code: {code!r}")
    n = len(c)
    if not _MIN_ARITY[code] <= n <= _ARITY[code]:
        raise CommandError(f"request code {code}: {n} items, expected {_arity_text(code)}")
    if type(c[2]) is not int:
        raise CommandError(f"request code {code}: timeMillis is not an integer")
    if code == C.BROKER_HEARTBEAT and heartbeat_ok(c):
        return c
    full = n == _ARITY[code]
    for i, kind in enumerate(_KINDS[code] if full else _KINDS[code][: n - HEADER_FIELDS]):
        if not _kind_ok(kind, c[HEADER_FIELDS + i]):
            name = FIELDS[code][i][0]
            raise CommandError(f"request code {code}: field {name!r} has a wrong type or value", name)
    return c if full else [*c, *(None,) * (_ARITY[code] - n)]


@dataclass(frozen=True, slots=True)
class Command:
    """A decoded command, for inspection and offline tools (`rmqctl log`, the audit)."""

    code: int
    time_millis: int
    fields: dict[str, Unpacked]  # by FIELDS name, as the entry holds them

    @property
    def name(self) -> str:
        return C.REQUEST_NAMES[self.code]

    def to_dict(self) -> JSONObject:
        return {
            "code": self.code,
            "name": self.name,
            TIME_FIELD.get(self.code, "invokeTime"): self.time_millis,
            **self.fields,
        }


def decode(data: bytes) -> Command:
    """Decode a command for inspection. Raises CommandError like `parse`. Optional trailing fields the entry
    leaves out are not in `fields` (an old entry reads as it was written)."""
    raw = _unpack(data)
    cmd = named(check(raw))
    present = len(raw) - HEADER_FIELDS
    fields = {name: cmd[HEADER_FIELDS + i] for i, (name, _) in enumerate(FIELDS[cmd.code][:present])}
    return Command(cmd.code, cmd.timeMillis, fields)


_I64 = (-(2**63), 2**63 - 1)


def encode(code: int, time_millis: int, *fields: Unpacked) -> bytes:
    """The bytes of a command; every constructor below ends here. Checks kinds and the Java ranges (long).
    Optional trailing fields (OPTIONAL_TRAILING) may be left out: the entry is then shorter."""
    if code not in FIELDS:
        raise ValueError(f"unknown request code {code}")
    c = [FORMAT_VERSION, code, time_millis, *fields]
    if not _MIN_ARITY[code] <= len(c) <= _ARITY[code]:
        hi = len(FIELDS[code])
        want = f"{hi - OPTIONAL_TRAILING[code]} to {hi}" if code in OPTIONAL_TRAILING else str(hi)
        raise TypeError(f"request code {code} takes {want} fields, got {len(fields)}")
    if type(time_millis) is not int or not _I64[0] <= time_millis <= _I64[1]:
        raise TypeError(f"timeMillis must be a 64-bit integer, got {time_millis!r}")
    for (name, kind), v in zip(FIELDS[code][: len(fields)], fields, strict=True):
        if not _kind_ok(kind, v):
            raise CommandTypeError(f"request code {code}: field {name!r} has a wrong type or value: {v!r}", name)
        ints = (
            v
            if kind == INT_LIST
            else (v,)
            if kind == INT
            else [x for h in v for x in h if type(x) is int]
            if kind == HEARTBEAT_LIST
            else ()
        )
        if any(not _I64[0] <= x <= _I64[1] for x in ints):
            raise CommandError(f"request code {code}: field {name!r} is outside the 64-bit range: {v!r}", name)
    return _packb(c)


# --- constructors: one per request; `now_ms` is the proposing leader's clock ----------------------------


def alter_sync_state_set(
    now_ms: int,
    broker_name: str,
    master_broker_id: int,
    master_epoch: int,
    sync_state_set: Iterable[int],
    sync_state_set_epoch: int,
) -> bytes:
    """1001; `sync_state_set_epoch` is the epoch the requesting master holds (body SyncStateSet)."""
    ids = sorted(set(sync_state_set))
    return encode(
        C.ALTER_SYNC_STATE_SET, now_ms, broker_name, master_broker_id, master_epoch, ids, sync_state_set_epoch
    )


def elect_master(
    now_ms: int,
    broker_name: str,
    *,
    cluster_name: str = "",
    broker_id: int | None = None,
    designate_elect: bool = False,
) -> bytes:
    """1002. Broker trigger: (cluster, name, own id). Controller trigger: name only. Admin trigger:
    (cluster, name, wanted id, designate_elect=True)."""
    return encode(
        C.ELECT_MASTER, now_ms, cluster_name, broker_name, -1 if broker_id is None else broker_id, designate_elect
    )


def register_broker(now_ms: int, cluster_name: str, broker_name: str, broker_id: int, broker_address: str) -> bytes:
    return encode(C.REGISTER_BROKER, now_ms, cluster_name, broker_name, broker_id, broker_address)


def get_replica_info(now_ms: int, broker_name: str) -> bytes:
    return encode(C.GET_REPLICA_INFO, now_ms, broker_name)


def get_sync_state_data(now_ms: int, broker_names: Iterable[str]) -> bytes:
    return encode(C.GET_SYNC_STATE_DATA, now_ms, list(broker_names))


def update_controller_config(now_ms: int, config: Mapping[str, object]) -> bytes:
    """1009 with the replicated (decision-affecting) keys only; see CONFIG_KEYS."""
    unknown = sorted(k for k in config if k not in CONFIG_KEYS)
    if unknown:
        raise ValueError(f"not replicated controller config keys: {unknown}")
    return encode(C.UPDATE_CONTROLLER_CONFIG, now_ms, {k: config[k] for k in sorted(config)})


def clean_broker_data(
    now_ms: int,
    broker_name: str,
    *,
    cluster_name: str | None = None,
    broker_controller_ids_to_clean: str | None = None,
    is_clean_living_broker: bool = False,
) -> bytes:
    """1011; the ids stay the text "1;2;3" the admin sent, so parse errors are answered from the log."""
    return encode(
        C.CLEAN_BROKER_DATA, now_ms, cluster_name, broker_name, broker_controller_ids_to_clean, is_clean_living_broker
    )


def get_next_broker_id(now_ms: int, cluster_name: str, broker_name: str) -> bytes:
    return encode(C.GET_NEXT_BROKER_ID, now_ms, cluster_name, broker_name)


def apply_broker_id(
    now_ms: int, cluster_name: str, broker_name: str, applied_broker_id: int, register_check_code: str
) -> bytes:
    return encode(C.APPLY_BROKER_ID, now_ms, cluster_name, broker_name, applied_broker_id, register_check_code)


def close_channel(now_ms: int, cluster_name: str, broker_name: str, broker_id: int) -> bytes:
    """1014: the leader saw the broker's connection close."""
    return encode(C.BROKER_CLOSE_CHANNEL, now_ms, cluster_name, broker_name, broker_id)


def check_not_active_broker(now_ms: int, alive_since_ms: int | None = None) -> bytes:
    """1015: the leader's periodic inactive-broker scan (with re-elections). `alive_since_ms`: the proposing
    leader's clock when it took leadership (aliveSinceMillis); the scan then judges no broker on heartbeats
    from before it (docs/statemachine.md). None writes the entry without it (the form before the field
    existed: every broker judged on its last heartbeat alone)."""
    if alive_since_ms is None:
        return encode(C.CHECK_NOT_ACTIVE_BROKER, now_ms)
    return encode(C.CHECK_NOT_ACTIVE_BROKER, now_ms, alive_since_ms)


def get_broker_live_info(now_ms: int, identity: tuple[str, str, int] | None = None) -> bytes:
    """1016: one broker's live info, or the whole table when `identity` is None."""
    return encode(C.GET_BROKER_LIVE_INFO, now_ms, None if identity is None else list(identity))


def heartbeat(
    now_ms: int,
    cluster_name: str,
    broker_name: str,
    broker_addr: str,
    broker_id: int,
    *,
    epoch: int | None = None,
    max_offset: int | None = None,
    confirm_offset: int | None = None,
    heartbeat_timeout_millis: int | None = None,
    election_priority: int | None = None,
) -> bytes:
    """1018, the replicated form of a broker's 904 heartbeat; `now_ms` becomes lastUpdateTimestamp.
    Missing optional fields take RocketMQ's defaults here, so the log always holds concrete values."""
    return heartbeat_of(
        now_ms,
        {
            "clusterName": cluster_name,
            "brokerName": broker_name,
            "brokerAddr": broker_addr,
            "brokerId": broker_id,
            "epoch": epoch,
            "maxOffset": max_offset,
            "confirmOffset": confirm_offset,
            "heartbeatTimeoutMillis": heartbeat_timeout_millis,
            "electionPriority": election_priority,
        },
    )


# The values a heartbeat field left out takes (RocketMQ's defaults), by command field name.
HEARTBEAT_DEFAULTS: dict[str, int] = {
    "epoch": DEFAULT_EPOCH,
    "maxOffset": DEFAULT_MAX_OFFSET,
    "confirmOffset": DEFAULT_CONFIRM_OFFSET,
    "heartbeatTimeoutMillis": DEFAULT_HEARTBEAT_TIMEOUT_MILLIS,
    "electionPriority": DEFAULT_ELECTION_PRIORITY,
}
HEARTBEAT_NAMES = BrokerHeartbeat._fields[HEADER_FIELDS:]  # a 1202 item's fields, in order

# The heartbeat fields the live table keeps besides RocketMQ's BrokerLiveInfo ones (liveness.BASE_FIELDS), by
# command field name: each is appended to the broker's row in this order and holds the latest heartbeat's value.
# A kept field needs a HEARTBEAT_DEFAULTS value (what a row from an older snapshot loads with). Keeping one
# widens the live table's snapshot rows (docs/snapshot-format.md): a deliberate format change.
LIVE_KEPT: tuple[str, ...] = ()


def heartbeat_of(now_ms: int, fields: Mapping[str, str | int | bool | None]) -> bytes:
    """`heartbeat` from the fields by their BrokerHeartbeat names (other keys ignored); a field left out or None
    takes its HEARTBEAT_DEFAULTS value (a required one without a default is refused, naming it)."""
    return encode(C.BROKER_HEARTBEAT, now_ms, *heartbeat_values(fields))


def heartbeat_values(fields: Mapping[str, str | int | bool | None]) -> list[str | int | bool | None]:
    """A heartbeat's fields after timeMillis, in BrokerHeartbeat's order, as `heartbeat_of` takes them (left
    out or None: the HEARTBEAT_DEFAULTS value). Unchecked: `heartbeat_item` and `encode` check."""
    values: list[str | int | bool | None] = []
    for name in HEARTBEAT_NAMES:
        v = fields.get(name)
        values.append(HEARTBEAT_DEFAULTS.get(name) if v is None else v)
    return values


def heartbeat_item(fields: Mapping[str, str | int | bool | None]) -> list[str | int]:
    """One heartbeat of 1202 from the fields by their BrokerHeartbeat names (as `heartbeat_of`), checked as
    `heartbeat_of` checks it: CommandError naming the field at fault."""
    values = heartbeat_values(fields)
    for (name, kind), v in zip(FIELDS[C.BROKER_HEARTBEAT], values, strict=True):
        if not _kind_ok(kind, v):
            raise CommandTypeError(
                f"request code {C.BROKER_HEARTBEAT}: field {name!r} has a wrong type or value: {v!r}", name
            )
        if kind == INT and not _I64[0] <= v <= _I64[1]:  # type: ignore[operator]
            raise CommandError(
                f"request code {C.BROKER_HEARTBEAT}: field {name!r} is outside the 64-bit range: {v!r}", name
            )
    return cast("list[str | int]", values)  # each one checked a str or an int above


def heartbeats(now_ms: int, items: list[list[str | int]]) -> bytes:
    """The entry of `heartbeat_item`'s (already checked: not checked again on the leader's hot path) at the
    leader's `now_ms`: one 1018 for one item, else one 1202, applied in order, each as its 1018 would be (1202
    needs feature level 2)."""
    if len(items) == 1:
        return _packb([FORMAT_VERSION, C.BROKER_HEARTBEAT, now_ms, *items[0]])
    return _packb([FORMAT_VERSION, C.BROKER_HEARTBEATS, now_ms, items])


def kv_put(now_ms: int, namespace: str, key: str, value: str) -> bytes:
    return encode(C.KV_PUT, now_ms, namespace, key, value)


def kv_get(now_ms: int, namespace: str, key: str) -> bytes:
    return encode(C.KV_GET, now_ms, namespace, key)


def kv_delete(now_ms: int, namespace: str, key: str) -> bytes:
    return encode(C.KV_DELETE, now_ms, namespace, key)


def kv_cas(now_ms: int, namespace: str, key: str, expect: str | None, value: str) -> bytes:
    """Set `key` to `value` only if its current value is `expect` (None: only if absent)."""
    return encode(C.KV_CAS, now_ms, namespace, key, expect, value)


def alarm(now_ms: int, activate: bool, alarm: str, member_id: str, detail: str = "") -> bytes:
    """Raise `alarm` for `member_id` (activate), or disarm it: every member's ("" member) of that type ("" alarm:
    every type). CommandError naming the field for an alarm that is not known, or a raise without a member."""
    if alarm not in ALARMS and not (alarm == "" and not activate):
        raise CommandError(f"unknown alarm {alarm!r}; one of {', '.join(ALARMS)}", "alarm")
    if activate and not member_id:
        raise CommandError("raising an alarm needs the member that raises it", "memberId")
    return encode(C.ALARM, now_ms, activate, alarm, member_id, detail)


def feature_level(now_ms: int, level: int) -> bytes:
    """Raise the group's feature level to `level` (statemachine/features.py); the leader proposes it only once
    every member reads that level."""
    if type(level) is not int or level < 0:
        raise CommandError(f"feature level must be a non-negative integer, not {level!r}", "level")
    return encode(C.FEATURE_LEVEL, now_ms, level)
