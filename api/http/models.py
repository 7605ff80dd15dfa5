"""Typed request and response models of the HTTP API (docs/http.md; field names fixed by http-api.md).

Requests are strict: an unknown field, a wrong JSON type (the string "1" is not an integer, 1 is not a
boolean), a missing required field, an integer outside Java's long range or a string that is not valid
UTF-8 is a 422 naming the field, before anything is proposed. Responses are documentation and contract-test
models: the routes answer `Result.to_envelope()` as is, and the tests validate answers against these.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated, Generic, Literal, TypeVar, cast

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, RootModel, create_model

from api.service import requests as Q
from statemachine.values import JSON, JSONObject, TypeForm

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


def _utf8(s: str) -> str:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid UTF-8 text (no lone surrogate escapes)") from None
    return s


Long = Annotated[int, Field(ge=LONG_MIN, le=LONG_MAX)]
"""A Java long."""
Text = Annotated[str, AfterValidator(_utf8)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


# --------------------------------------------------------------------------------------------- requests


def http_model(
    cls: type[Q.Request],
    name: str,
    *,
    only: tuple[str, ...] | None = None,
    required: bool = False,
    doc: str | None = None,
) -> type[Strict]:
    """The strict HTTP request model of a typed request (api/service/requests.py). Its header fields: a Java
    String as Text, a Long or Integer as Long, a Boolean as bool; required where the header requires them (unless
    the field gives an `http_default`) or `http_required`; an optional one takes the field's default (None:
    nullable), all described by their `doc`; a field declared `http=False` is left out. Its body fields: a list as
    a list (at least `min_items`), always required, nested in a model of their own when the class names one
    (HTTP_NESTED). The model's description is the class's HTTP_DOC, its field order HTTP_ORDER's names first, then
    the rest as the class declares them. `only`, `required`, `doc`: a second model of the same request (these
    fields only, every one required, this description)."""
    specs: dict[str, TypeForm] = {}  # pydantic field definitions: (annotation, FieldInfo or ...)
    body: dict[str, TypeForm] = {}
    for f in dataclasses.fields(cast("type[DataclassInstance]", cls)):
        meta = f.metadata
        if only is not None and f.name not in only:
            continue
        if "body" in meta:
            kind: TypeForm = _HTTP_TYPE[meta["body"]]
            constraints = {} if meta["min_items"] is None else {"min_length": meta["min_items"]}
            body[f.name] = (kind, Field(description=meta["doc"], **constraints) if meta["doc"] or constraints else ...)
            continue
        if "java" not in meta or not meta["http"]:
            continue
        base: TypeForm = _HTTP_TYPE[meta["java"]]
        if required or ((meta["required"] and "http_default" not in meta) or meta["http_required"]):
            specs[f.name] = (base, Field(description=meta["doc"]) if meta["doc"] else ...)
        else:
            default = meta.get("http_default", f.default)
            specs[f.name] = (base if default is not None else base | None, Field(default, description=meta["doc"]))
    if cls.HTTP_NESTED is not None and body:
        key, model_name = cls.HTTP_NESTED
        nested = create_model(model_name, __base__=Strict, __module__=__name__, **body)
        specs[key], body = (nested, ...), {}
    specs.update(body)
    order = cls.HTTP_ORDER
    fields = {name: specs[name] for name in (*order, *(n for n in specs if n not in order))}
    model = create_model(name, __base__=Strict, __doc__=doc or cls.HTTP_DOC, __module__=__name__, **fields)
    return model


def http_values(model: BaseModel) -> JSONObject:
    """The fields of a model http_model made, flat (a nested body model's fields at the top) and with lists as
    tuples: what `requests.of` takes to build the typed request."""
    out: JSONObject = {}
    for k, v in vars(model).items():
        if isinstance(v, BaseModel):
            out.update(http_values(v))
        else:
            out[k] = tuple(v) if isinstance(v, list) else v
    return out


_HTTP_TYPE: dict[str, TypeForm] = {
    Q.STRING: Text,
    Q.LONG: Long,
    Q.INTEGER: Long,
    Q.BOOLEAN: bool,
    Q.LIST_LONG: list[Long],
    Q.LIST_STRING: list[Text],
}


class _ConfigKeys(RootModel[dict[Text, JSON]]):
    """1009's body: the keys as sent, each value properties text or a JSON boolean or integer; the route checks
    each key (api.service.config_requests.plan_config_update), whose accepted changes make the typed request."""

    model_config = ConfigDict(strict=True)


# Generated from the typed requests of api.service.requests (their fields declared there only): 904
# BROKER_HEARTBEAT, 1001, 1002 (and its admin form), 1003, 1004, 1006, 1011, 1012, 1013; 1009, whose body is the
# keys as sent, takes only its description from there.
if TYPE_CHECKING:  # to mypy, Strict models (their fields are the typed requests', which mypy checks)
    HeartbeatRequest = Strict
    NextBrokerIdRequest = Strict
    ApplyBrokerIdRequest = Strict
    ReplicaInfoRequest = Strict
    RegisterBrokerRequest = Strict
    CleanBrokerMetadataRequest = Strict
    ElectMasterRequest = Strict
    AdminElectMasterRequest = Strict
    AlterSyncStateSetRequest = Strict
    SyncStateDataRequest = Strict
    ConfigUpdateRequest = _ConfigKeys
else:
    HeartbeatRequest = http_model(Q.BrokerHeartbeat, "HeartbeatRequest")
    NextBrokerIdRequest = http_model(Q.GetNextBrokerId, "NextBrokerIdRequest")
    ApplyBrokerIdRequest = http_model(Q.ApplyBrokerId, "ApplyBrokerIdRequest")
    ReplicaInfoRequest = http_model(Q.GetReplicaInfo, "ReplicaInfoRequest")
    RegisterBrokerRequest = http_model(Q.RegisterBroker, "RegisterBrokerRequest")
    CleanBrokerMetadataRequest = http_model(Q.CleanBrokerData, "CleanBrokerMetadataRequest")
    ElectMasterRequest = http_model(Q.ElectMaster, "ElectMasterRequest")
    AdminElectMasterRequest = http_model(
        Q.ElectMaster,
        "AdminElectMasterRequest",
        only=Q.ElectMaster.HTTP_ADMIN_FIELDS,
        required=True,
        doc=Q.ElectMaster.HTTP_ADMIN_DOC,
    )
    AlterSyncStateSetRequest = http_model(Q.AlterSyncStateSet, "AlterSyncStateSetRequest")
    SyncStateDataRequest = http_model(Q.GetSyncStateData, "SyncStateDataRequest")
    ConfigUpdateRequest = create_model(
        "ConfigUpdateRequest", __base__=_ConfigKeys, __doc__=Q.UpdateControllerConfig.HTTP_DOC, __module__=__name__
    )


class KvPutRequest(Strict):
    value: Text


class KvCasRequest(Strict):
    expect: Text | None = Field(description='the value expected now; null means "only if absent"')
    value: Text


class TransferLeaderRequest(Strict):
    to: Text | None = Field(None, description="raft id (host:port) of the target voter; none: the most caught-up")
    maxLagEntries: int | None = Field(None, ge=0, description="refuse a target further behind; default from settings")


class AddPeerRequest(Strict):
    id: Text = Field(description="the new peer's raft id, its raft address host:port")
    raftAddress: Text | None = Field(None, description="host:port to dial; default: the id")
    httpAddress: Text | None = Field(None, description="host:port of its HTTP API, for 2007 redirects")
    remotingAddress: Text | None = Field(
        None,
        description="host:port of its RocketMQ remoting listener (its "
        "jRaftControllerRPCAddr entry), for 1005 and brokers' 2007",
    )
    timeoutMs: int | None = Field(None, ge=1, le=3_600_000, description="catch-up wait before promotion")


# -------------------------------------------------------------------------------------------- responses


class NotLeaderHeader(BaseModel):
    """The header of a 2007 CONTROLLER_NOT_LEADER answer."""

    controllerLeaderId: str | None
    controllerLeaderAddress: str | None = Field(description="the leader's HTTP address (host:port)")


H = TypeVar("H")
B = TypeVar("B")


class Envelope(BaseModel, Generic[H, B]):
    """Every /api/v1 answer with HTTP 200: the RocketMQ response code, header and body."""

    code: int = Field(description="RocketMQ response code: 0 SUCCESS, 2007 CONTROLLER_NOT_LEADER, ...")
    codeName: str
    remark: str | None
    header: H | NotLeaderHeader | None
    body: B | None


class NextBrokerIdHeader(BaseModel):
    clusterName: str
    brokerName: str
    nextBrokerId: int


class ApplyBrokerIdHeader(BaseModel):
    clusterName: str
    brokerName: str


class RegisterBrokerHeader(BaseModel):
    clusterName: str
    brokerName: str
    masterBrokerId: int | None
    masterAddress: str | None
    masterEpoch: int | None
    syncStateSetEpoch: int | None


class ElectMasterHeader(BaseModel):
    masterBrokerId: int | None
    masterAddress: str | None
    masterEpoch: int | None
    syncStateSetEpoch: int | None


class AlterSyncStateSetHeader(BaseModel):
    newSyncStateSetEpoch: int | None


class ReplicaInfoHeader(BaseModel):
    masterBrokerId: int | None
    masterAddress: str | None
    masterEpoch: int | None


class MetadataHeader(BaseModel):
    group: str
    controllerLeaderId: str | None
    controllerLeaderAddress: str | None
    isLeader: bool
    peers: str = Field(description='HTTP address of every voter, each followed by ";"')


class SyncStateSetBody(BaseModel):
    syncStateSet: list[int]
    syncStateSetEpoch: int


class BrokerMemberGroup(BaseModel):
    cluster: str
    brokerName: str
    brokerAddrs: dict[str, str] = Field(description="broker id (as text) -> address")


class ElectMasterBody(BaseModel):
    brokerMemberGroup: BrokerMemberGroup | None = Field(None, description="on SUCCESS")
    syncStateSet: list[int]


class ReplicaIdentity(BaseModel):
    brokerName: str
    brokerId: int
    brokerAddress: str
    alive: bool


class BrokerReplicasInfo(BaseModel):
    masterBrokerId: int | None
    masterAddress: str | None
    masterEpoch: int
    syncStateSetEpoch: int
    inSyncReplicas: list[ReplicaIdentity]
    notInSyncReplicas: list[ReplicaIdentity]


class SyncStateDataBody(BaseModel):
    replicasInfoTable: dict[str, BrokerReplicasInfo]


class KvValueBody(BaseModel):
    value: str


class KvDeleteBody(BaseModel):
    deleted: bool


class KvCasBody(BaseModel):
    succeeded: bool
    value: str | None = Field(description="the value after the operation (null: absent)")


class RaftPeerRef(BaseModel):
    id: str
    raftAddress: str
    httpAddress: str | None
    remotingAddress: str | None = Field(None, description="host:port of its RocketMQ remoting listener")
    voter: bool


class RaftStatusBody(BaseModel):
    nodeId: str
    group: str
    role: str = Field(description="leader, follower, candidate or pre_candidate")
    term: int
    leaderId: str | None
    commitIndex: int
    appliedIndex: int
    firstLogIndex: int
    lastLogIndex: int
    lastSnapshotIndex: int
    lastSnapshotTerm: int
    peers: list[RaftPeerRef]


class RaftPeerRow(BaseModel):
    id: str
    role: str = Field(description="leader, follower or learner")
    raftAddress: str | None = Field(None, description="host:port its peers dial (from the log, else the config)")
    httpAddress: str | None
    remotingAddress: str | None = Field(None, description="host:port of its RocketMQ remoting listener")
    matchIndex: int | None = Field(description="null on a follower (only the leader tracks progress)")
    lagEntries: int | None
    lastContactMs: int | None
    state: str | None = Field(None, description="replication state on the leader: probe, replicate, snapshot")


class RaftPeersBody(BaseModel):
    leaderId: str | None
    lastLogIndex: int
    peers: list[RaftPeerRow]


class SnapshotFile(BaseModel):
    name: str
    size: int
    crc32c: int


class SnapshotInfo(BaseModel):
    index: int
    term: int
    bytes: int
    createdAt: float = Field(description="Unix time in seconds")
    voters: list[str]
    learners: list[str]
    files: list[SnapshotFile]


class SnapshotTakenBody(BaseModel):
    created: bool = Field(description="false: nothing was applied since the latest snapshot, which is answered")
    index: int
    term: int
    bytes: int
    durationMs: float


class SnapshotsBody(BaseModel):
    snapshots: list[SnapshotInfo] = Field(description="newest first")


class TransferLeaderBody(BaseModel):
    previousLeaderId: str
    leaderId: str
    term: int
    targetLagEntries: int
    durationMs: float


class MembershipBody(BaseModel):
    id: str
    voters: list[str]
    learners: list[str]


class HeartbeatAnswer(Envelope[None, None]):
    pass


class NextBrokerIdAnswer(Envelope[NextBrokerIdHeader, None]):
    pass


class ApplyBrokerIdAnswer(Envelope[ApplyBrokerIdHeader, None]):
    pass


class RegisterBrokerAnswer(Envelope[RegisterBrokerHeader, SyncStateSetBody]):
    pass


class ElectMasterAnswer(Envelope[ElectMasterHeader, ElectMasterBody]):
    pass


class AlterSyncStateSetAnswer(Envelope[AlterSyncStateSetHeader, SyncStateSetBody]):
    pass


class ReplicaInfoAnswer(Envelope[ReplicaInfoHeader, SyncStateSetBody]):
    pass


class MetadataAnswer(Envelope[MetadataHeader, None]):
    pass


class SyncStateDataAnswer(Envelope[None, SyncStateDataBody]):
    pass


class EmptyAnswer(Envelope[None, None]):
    pass


class ConfigAnswer(Envelope[None, dict[str, str]]):
    pass


class KvValueAnswer(Envelope[None, KvValueBody]):
    pass


class KvDeleteAnswer(Envelope[None, KvDeleteBody]):
    pass


class KvCasAnswer(Envelope[None, KvCasBody]):
    pass


class RaftStatusAnswer(Envelope[None, RaftStatusBody]):
    pass


class RaftPeersAnswer(Envelope[None, RaftPeersBody]):
    pass


class SnapshotTakenAnswer(Envelope[None, SnapshotTakenBody]):
    pass


class SnapshotsAnswer(Envelope[None, SnapshotsBody]):
    pass


class TransferLeaderAnswer(Envelope[None, TransferLeaderBody]):
    pass


class MembershipAnswer(Envelope[None, MembershipBody]):
    pass


class AutopilotRequest(Strict):
    enabled: bool | None = Field(None, description="turn autopilot on or off on this node")
    stabilizationSecs: int | None = Field(
        None, ge=0, le=86_400, description="a learner's healthy time before promotion"
    )
    deadServerSecs: int | None = Field(None, ge=1, le=86_400 * 30, description="a voter's silent time before removal")
    minQuorum: int | None = Field(None, ge=1, le=1000, description="never remove a voter below this many voters")


class AutopilotAnswer(Envelope[None, dict[str, JSON]]):
    pass


class Checkpoint(BaseModel):
    index: int
    hash: str = Field(description="first 16 hex digits of SHA-256 over the applied state's sections after `index`")


class HashesBody(BaseModel):
    nodeId: str
    appliedIndex: int
    checkpoints: list[Checkpoint]


class HashesAnswer(Envelope[None, HashesBody]):
    pass


class FeaturesBody(BaseModel):
    nodeId: str
    level: int = Field(description="the group's feature level, as this node has applied it")
    maxLevel: int = Field(description="the highest feature level this node's release reads")
    levels: dict[str, str] = Field(description="what each level this release knows adds")


class FeaturesAnswer(Envelope[None, FeaturesBody]):
    pass


class FeatureUpgradeRequest(Strict):
    level: int | None = Field(
        None, ge=1, le=1000, description="the level to raise to; default: the highest the leader's release reads"
    )


# ---------------------------------------------------------------------------------------------- alarms

AlarmName = Literal["NOSPACE", "CORRUPT"]


class AlarmRaiseRequest(Strict):
    alarm: AlarmName = Field(description="the alarm to raise")
    memberId: Text = Field(min_length=1, description="raft id (host:port) of the member it is raised for")
    detail: Text = Field("", max_length=1024, description="why, shown in the list")


class AlarmDisarmRequest(Strict):
    alarm: AlarmName | None = Field(None, description="the alarm to disarm on every member; none: every alarm")


class AlarmRow(BaseModel):
    alarm: str
    memberId: str
    raisedAtMillis: int = Field(description="the leader's clock when the alarm entry was proposed")
    detail: str


class AlarmsBody(BaseModel):
    alarms: list[AlarmRow]


class AlarmsAnswer(Envelope[None, AlarmsBody]):
    pass


class AlarmChangedAnswer(Envelope[None, dict[str, JSON]]):
    pass


# ---------------------------------------------------------------------------------------------- errors


class FieldError(BaseModel):
    field: str = Field(
        description='the offending field, dotted ("syncStateSet.syncStateSet.0"); "body" for the whole body'
    )
    location: str = Field(description="body, path, query or header")
    message: str
    type: str = Field(description="pydantic error type, e.g. int_type, missing, extra_forbidden, json_invalid")


class ErrorBody(BaseModel):
    """Every non-200 answer of /api/v1 (401, 404, 405, 409, 413, 422, 503)."""

    error: str = Field(description="VALIDATION_ERROR, BODY_TOO_LARGE, UNAUTHORIZED, UNAVAILABLE, ...")
    message: str
    errors: list[FieldError] | None = None
    limit: int | None = Field(None, description="413: the limit in bytes")


class HealthCheck(BaseModel):
    name: str
    ok: bool
    detail: str
    excluded: bool = False


class HealthReport(BaseModel):
    status: str = Field(description="ok or failed")
    checks: list[HealthCheck]
