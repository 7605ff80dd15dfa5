"""RocketMQ's controller requests, typed: one frozen dataclass per request, the one place its fields are declared.

Each class names its fields as RocketMQ's header class spells them, with their Python types and, for the fields
that travel in a remoting request's `extFields`, the Java type and whether the header class requires them
(`header(...)` metadata; fields without it come from the request's body). From a class derive:

* the remoting header schema (`api.remoting.headers.REQUEST`, `schema`) and its defaults (`DEFAULTS`);
* the command it proposes or reads (`command(now)`, through statemachine.commands);
* whether it is a read (`READ`), its request type in the metrics (`REQUEST_TYPE`) and whether it is a broker
  heartbeat (`HEARTBEAT`: the leader's scan guard starts on the first one).

Both front ends build one of these from what they received (the HTTP models' fields, the decoded extFields)
and hand it to `ControllerService.submit`, which stamps the leader's time and does the heartbeat bookkeeping.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, TypeVar, cast

from statemachine import codes as C
from statemachine import commands
from statemachine.result import Result
from statemachine.values import DataclassField

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

STRING, LONG, INTEGER, BOOLEAN = "String", "Long", "Integer", "Boolean"  # Java types of header fields
LIST_LONG, LIST_STRING = "List<Long>", "List<String>"  # Java types of body fields

T = TypeVar("T")
Schema = tuple[tuple[str, str, bool], ...]  # (field, Java type, required)
HeaderValue = str | int | bool | None  # a header field's value, as decoded from extFields


def header(
    java: str,
    *,
    required: bool = False,
    default: HeaderValue = None,
    doc: str | None = None,
    http_required: bool = False,
    http: bool = True,
    http_default: object = dataclasses.MISSING,
    command: str | None = None,
) -> DataclassField:
    """A field of the request header: its Java type, and whether it is required (@CFNotNull, or required here
    where RocketMQ would fail later on a null). A required field has no default. For the HTTP model generated
    from the class (api.http.models.http_model): `doc`, the field's description there, and `http_required`, a
    field the HTTP API requires though the remoting header may leave it out; `http=False`, a field the HTTP model
    leaves out; `http_default`, the HTTP model's default where the header requires a value (None: nullable there).
    `command`: the command field's name where it differs from this one (statemachine.commands spelling)."""
    meta = {
        "java": java,
        "required": required,
        "doc": doc,
        "http_required": http_required,
        "http": http,
        "command": command,
    }
    if http_default is not dataclasses.MISSING:
        meta["http_default"] = http_default
    return field(metadata=meta) if required else field(default=default, metadata=meta)


def body(java: str, *, doc: str | None = None, min_items: int | None = None) -> DataclassField:
    """A field of the request's body (not of its header): its Java type, and for the HTTP model its description
    `doc` and, for a list, the fewest items it takes. Always required."""
    return field(metadata={"body": java, "doc": doc, "min_items": min_items})


def command_fields(request: Request) -> dict[str, HeaderValue]:
    """The header fields of `request` by their command names (the `command` metadata, else the same name)."""
    return {command: getattr(request, name) for name, command in command_names(type(request))}


def command_names(cls: type[Request]) -> tuple[tuple[str, str], ...]:
    """(field, command name) of each header field of `cls`: read once per class (a heartbeat's hot path)."""
    names = _COMMAND_NAMES.get(cls)
    if names is None:
        fields = dataclasses.fields(cast("type[DataclassInstance]", cls))
        names = tuple((f.name, f.metadata.get("command") or f.name) for f in fields if "java" in f.metadata)
        _COMMAND_NAMES[cls] = names
    return names


_COMMAND_NAMES: dict[type, tuple[tuple[str, str], ...]] = {}


def nullable(value: T | None) -> T:
    """A header field the Java class lets be null, passed on to its command as it came: the command's encoder
    refuses a None naming the field (a CommandArgumentError, nothing proposed)."""
    return cast(T, value)


class Request:
    """What every typed request has. Subclasses are frozen, keyword-only dataclasses."""

    __slots__ = ()
    CODE: ClassVar[int]  # the RocketMQ request code
    REQUEST_TYPE: ClassVar[str]  # its name in request_total
    READ: ClassVar[bool] = False  # a linearizable read (ReadIndex), not a proposal
    HEARTBEAT: ClassVar[bool] = False
    # The HTTP model generated from the class (api.http.models.http_model): its description, the fields it
    # lists first, and (key, model name) when the body fields nest in a model of their own under that key.
    HTTP_DOC: ClassVar[str | None] = None
    HTTP_ORDER: ClassVar[tuple[str, ...]] = ()
    HTTP_NESTED: ClassVar[tuple[str, str] | None] = None

    def command(self, now_ms: int) -> bytes:
        """The command, stamped with the leader's `now_ms`."""
        raise NotImplementedError

    def refusal(self) -> Result | None:
        """An answer without consensus when the request cannot be served as it is (None: serve it)."""
        return None


def schema(cls: type[Request]) -> Schema:
    """The request header's fields in declaration order: (name, Java type, required)."""
    return tuple(
        (f.name, f.metadata["java"], f.metadata["required"])
        for f in dataclasses.fields(cast("type[DataclassInstance]", cls))
        if "java" in f.metadata
    )


def defaults(cls: type[Request]) -> dict[str, HeaderValue]:
    """The header fields whose value, when left out, is not null (a Java field's initializer)."""
    return {
        f.name: f.default
        for f in dataclasses.fields(cast("type[DataclassInstance]", cls))
        if "java" in f.metadata and f.default is not None and f.default is not dataclasses.MISSING
    }


def of(cls: type[T], values: Mapping[str, object]) -> T:
    """`cls` from a mapping holding its fields (a model's, the parsed header's) and perhaps others."""
    names = _field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})


def _field_names(cls: type) -> frozenset[str]:
    """The field names of dataclass `cls`, read once per class."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return names


_FIELD_NAMES: dict[type, frozenset[str]] = {}


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerHeartbeat(Request):
    """904 BROKER_HEARTBEAT (BrokerHeartbeatRequestHeader), proposed as 1018 with the leader's receive time as
    lastUpdateTimestamp. Left-out optional fields take RocketMQ's defaults (statemachine.commands.heartbeat)."""

    CODE: ClassVar[int] = 904  # RequestCode.BROKER_HEARTBEAT
    REQUEST_TYPE: ClassVar[str] = "CONTROLLER_BROKER_HEARTBEAT"
    HEARTBEAT: ClassVar[bool] = True

    clusterName: str = header(STRING, required=True)
    brokerAddr: str = header(STRING, required=True)
    brokerName: str = header(STRING, required=True)
    brokerId: int | None = header(LONG, http_required=True)
    epoch: int | None = header(INTEGER, doc="default -1")
    maxOffset: int | None = header(LONG, doc="default -1")
    confirmOffset: int | None = header(LONG, doc="default -1")
    heartbeatTimeoutMills: int | None = header(
        LONG, doc="RocketMQ's spelling; default 10000 ms", command="heartbeatTimeoutMillis"
    )
    electionPriority: int | None = header(INTEGER, doc="lower wins; default Integer.MAX_VALUE")

    # The HTTP model's description and field order (api.http.models.HeartbeatRequest, generated from this class).
    HTTP_DOC: ClassVar[str | None] = (
        "904 BROKER_HEARTBEAT (proposed as 1018). Left-out optional fields take RocketMQ's defaults."
    )
    HTTP_ORDER: ClassVar[tuple[str, ...]] = ("clusterName", "brokerName", "brokerAddr")

    def refusal(self) -> Result | None:
        if self.brokerId is None:  # RocketMQ's answer (the HTTP model requires brokerId)
            return Result(C.CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId")
        return None

    def command(self, now_ms: int) -> bytes:
        """Every header field by its command name (statemachine.commands.BrokerHeartbeat): a new field is
        declared here and there, nowhere else."""
        return commands.heartbeat_of(now_ms, command_fields(self))


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterSyncStateSet(Request):
    """1001 (AlterSyncStateSetRequestHeader, and the SyncStateSet body the master sends: the epoch it holds)."""

    CODE: ClassVar[int] = C.ALTER_SYNC_STATE_SET
    REQUEST_TYPE: ClassVar[str] = "CONTROLLER_ALTER_SYNC_STATE_SET"

    brokerName: str | None = header(STRING, http_required=True)
    masterBrokerId: int | None = header(LONG, http_required=True)
    masterEpoch: int | None = header(INTEGER, http_required=True)
    invokeTime: int | None = header(LONG, http=False)
    syncStateSet: tuple[int, ...] = body(LIST_LONG)
    syncStateSetEpoch: int = body(INTEGER, doc="the SyncStateSet epoch the requesting master holds")

    HTTP_DOC: ClassVar[str | None] = "1001 CONTROLLER_ALTER_SYNC_STATE_SET."
    HTTP_NESTED: ClassVar[tuple[str, str] | None] = ("syncStateSet", "SyncStateSetModel")

    def command(self, now_ms: int) -> bytes:
        return commands.alter_sync_state_set(
            now_ms,
            nullable(self.brokerName),
            nullable(self.masterBrokerId),
            nullable(self.masterEpoch),
            self.syncStateSet,
            self.syncStateSetEpoch,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectMaster(Request):
    """1002 (ElectMasterRequestHeader) from a broker (its own id), the controller (no id: -1 or None) or an
    admin (designateElect)."""

    CODE: ClassVar[int] = C.ELECT_MASTER
    REQUEST_TYPE: ClassVar[str] = "CONTROLLER_ELECT_MASTER"

    clusterName: str = header(STRING, required=True, http_default="")
    brokerName: str = header(STRING, required=True)
    brokerId: int | None = header(LONG, required=True, http_default=None)
    designateElect: bool = header(BOOLEAN, required=True, http_default=False)
    invokeTime: int | None = header(LONG, http=False)

    HTTP_DOC: ClassVar[str | None] = (
        "1002 CONTROLLER_ELECT_MASTER. A broker sends its own id; without brokerId (or with -1) it is the\n"
        "controller trigger."
    )
    # The admin's model (api.http.models.AdminElectMasterRequest): these fields, all required; designateElect true.
    HTTP_ADMIN_FIELDS: ClassVar[tuple[str, ...]] = ("clusterName", "brokerName", "brokerId")
    HTTP_ADMIN_DOC: ClassVar[str] = (
        "1002 with designateElect=true: make brokerId the master if it is alive and in the SyncStateSet (or\n"
        "eligible as an unclean master)."
    )

    def command(self, now_ms: int) -> bytes:
        return commands.elect_master(
            now_ms,
            self.brokerName,
            cluster_name=self.clusterName,
            broker_id=None if self.brokerId == -1 else self.brokerId,
            designate_elect=self.designateElect,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBroker(Request):
    """1003 (RegisterBrokerToControllerRequestHeader)."""

    CODE: ClassVar[int] = C.REGISTER_BROKER
    REQUEST_TYPE: ClassVar[str] = "CONTROLLER_REGISTER_BROKER"

    clusterName: str | None = header(STRING, http_required=True)
    brokerName: str | None = header(STRING, http_required=True)
    brokerId: int | None = header(LONG, http_required=True)
    brokerAddress: str | None = header(STRING, http_required=True)
    invokeTime: int | None = header(LONG, http=False)

    HTTP_DOC: ClassVar[str | None] = "1003 CONTROLLER_REGISTER_BROKER."

    def command(self, now_ms: int) -> bytes:
        return commands.register_broker(
            now_ms,
            nullable(self.clusterName),
            nullable(self.brokerName),
            nullable(self.brokerId),
            nullable(self.brokerAddress),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class GetReplicaInfo(Request):
    """1004 (GetReplicaInfoRequestHeader), a linearizable read."""

    CODE: ClassVar[int] = C.GET_REPLICA_INFO
    REQUEST_TYPE: ClassVar[str] = "CONTROLLER_GET_REPLICA_INFO"
    READ: ClassVar[bool] = True

    brokerName: str | None = header(STRING, http_required=True)

    HTTP_DOC: ClassVar[str | None] = "1004 CONTROLLER_GET_REPLICA_INFO (a linearizable read)."

    def command(self, now_ms: int) -> bytes:
        return commands.get_replica_info(now_ms, nullable(self.brokerName))


@dataclass(frozen=True, slots=True, kw_only=True)
class GetSyncStateData(Request):
    """1006: the body is the broker names; a linearizable read."""

    CODE: ClassVar[int] = C.GET_SYNC_STATE_DATA
    REQUEST_TYPE: ClassVar[str] = "CONTROLLER_GET_SYNC_STATE_DATA"
    READ: ClassVar[bool] = True

    brokerNames: tuple[str, ...] = body(LIST_STRING, min_items=1)

    HTTP_DOC: ClassVar[str | None] = "1006 CONTROLLER_GET_SYNC_STATE_DATA (a linearizable read)."

    def command(self, now_ms: int) -> bytes:
        return commands.get_sync_state_data(now_ms, self.brokerNames)


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateControllerConfig(Request):
    """1009 with the replicated keys `api.service.config_requests.plan_config_update` accepted (typed values)."""

    CODE: ClassVar[int] = C.UPDATE_CONTROLLER_CONFIG
    REQUEST_TYPE: ClassVar[str] = "CONTROLLER_UPDATE_CONTROLLER_CONFIG"

    changes: Mapping[
        str, int | bool
    ]  # not the HTTP body: that is the keys as sent (api.http.models.ConfigUpdateRequest)

    HTTP_DOC: ClassVar[str | None] = (
        '1009 UPDATE_CONTROLLER_CONFIG: {"key": "value", ...}. Values are properties text ("true", "3"); JSON\n'
        "booleans and integers of the key's type are accepted too (checked per key by the route)."
    )

    def command(self, now_ms: int) -> bytes:
        return commands.update_controller_config(now_ms, self.changes)


@dataclass(frozen=True, slots=True, kw_only=True)
class CleanBrokerData(Request):
    """1011 (CleanControllerBrokerDataRequestHeader)."""

    CODE: ClassVar[int] = C.CLEAN_BROKER_DATA
    REQUEST_TYPE: ClassVar[str] = "CONTROLLER_CLEAN_BROKER_DATA"

    clusterName: str | None = header(STRING)
    brokerName: str = header(STRING, required=True)
    brokerControllerIdsToClean: str | None = header(STRING, doc='broker ids as "1;2;3"; none: the whole set')
    isCleanLivingBroker: bool = header(BOOLEAN, default=False)
    invokeTime: int | None = header(LONG, http=False)

    HTTP_DOC: ClassVar[str | None] = "1011 CLEAN_BROKER_DATA."

    def command(self, now_ms: int) -> bytes:
        return commands.clean_broker_data(
            now_ms,
            self.brokerName,
            cluster_name=self.clusterName,
            broker_controller_ids_to_clean=self.brokerControllerIdsToClean,
            is_clean_living_broker=self.isCleanLivingBroker,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class GetNextBrokerId(Request):
    """1012 (GetNextBrokerIdRequestHeader), a linearizable read. Both fields required here (STRICTER)."""

    CODE: ClassVar[int] = C.GET_NEXT_BROKER_ID
    REQUEST_TYPE: ClassVar[str] = "CONTROLLER_GET_NEXT_BROKER_ID"
    READ: ClassVar[bool] = True

    clusterName: str = header(STRING, required=True)
    brokerName: str = header(STRING, required=True)

    HTTP_DOC: ClassVar[str | None] = "1012 CONTROLLER_GET_NEXT_BROKER_ID (a linearizable read)."

    def command(self, now_ms: int) -> bytes:
        return commands.get_next_broker_id(now_ms, self.clusterName, self.brokerName)


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyBrokerId(Request):
    """1013 (ApplyBrokerIdRequestHeader). Every field required here (STRICTER)."""

    CODE: ClassVar[int] = C.APPLY_BROKER_ID
    REQUEST_TYPE: ClassVar[str] = "CONTROLLER_APPLY_BROKER_ID"

    clusterName: str = header(STRING, required=True)
    brokerName: str = header(STRING, required=True)
    appliedBrokerId: int = header(LONG, required=True)
    registerCheckCode: str = header(STRING, required=True, doc='"<brokerAddress>;<timestamp>" as brokers send it')

    HTTP_DOC: ClassVar[str | None] = "1013 CONTROLLER_APPLY_BROKER_ID."

    def command(self, now_ms: int) -> bytes:
        return commands.apply_broker_id(
            now_ms, self.clusterName, self.brokerName, self.appliedBrokerId, self.registerCheckCode
        )


REQUESTS: tuple[type[Request], ...] = (
    BrokerHeartbeat,
    AlterSyncStateSet,
    ElectMaster,
    RegisterBroker,
    GetReplicaInfo,
    GetSyncStateData,
    UpdateControllerConfig,
    CleanBrokerData,
    GetNextBrokerId,
    ApplyBrokerId,
)
BY_CODE: dict[int, type[Request]] = {r.CODE: r for r in REQUESTS}
