"""`rmqctl migrate export|import|verify`: adopt a cluster run by RocketMQ's own controller (docs/migration.md).

* `export` reads a running RocketMQ controller (JRaftController or DLedgerController: the same remoting codes)
  over remoting and writes the file of docs/migration.md: the broker sets the NameServer knows (106), their
  sync-state data (1006) and replica info (1004) from the controller leader (found with 1005), and the leader's
  config (1010). 1006 is read before and after the 1004s: an epoch that moved in between fails the export.
* `import` turns the file into the bootstrap snapshot our new group starts from: ids, addresses, masters,
  epochs and SyncStateSets as exported, the replicated config keys, and a live table where every broker the
  old controller saw alive is alive for a grace period (the new leader's takeover time is its floor, so no
  broker is expired before its first heartbeat reaches the new group).
* `verify` reads two controllers (or the file and a controller) the same way and lists every difference.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import click
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from api.remoting.client import RemotingClient
from api.remoting.codec import RemotingCommand, loads_fastjson
from api.service.config_requests import parse_config_value
from api.service.properties import PropertiesError, parse_properties
from cli.rmqctl import BadUsage, CorruptInput, Failed, Unreachable
from cli.rmqctl.logverbs import write_state_snapshot
from cli.rmqctl.output import Block, Out, emit_document, output_options, pass_out
from raft.leaf.durable import atomic_write
from statemachine import ControllerStateMachine
from statemachine import codes as C
from statemachine.commands import CONFIG_KEYS, HEARTBEAT_DEFAULTS, heartbeat_of
from statemachine.config import DEFAULTS, ConfigValue
from statemachine.tables import BrokerReplicaInfo, SyncStateInfo
from statemachine.values import JSON, JSONObject

FORMAT = "rmqctl-migration"
VERSION = 1  # the versions this rmqctl reads: {1}
GET_BROKER_CLUSTER_INFO = 106  # RequestCode.GET_BROKER_CLUSTER_INFO (the NameServer's)
GET_METADATA_INFO = 1005  # CONTROLLER_GET_METADATA_INFO
GET_CONTROLLER_CONFIG = 1010  # GET_CONTROLLER_CONFIG
BOOTSTRAP_INDEX = BOOTSTRAP_TERM = 1  # where the imported snapshot stands: the new group's log continues at 2
DEFAULT_GRACE_MS = 600_000


# --- the file (docs/migration.md, "The export file") ------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class Replica(_Strict):
    brokerId: int = Field(ge=0)
    brokerAddress: str = Field(min_length=1)
    alive: bool


class BrokerSet(_Strict):
    clusterName: str = Field(min_length=1)
    brokerName: str = Field(min_length=1)
    masterBrokerId: int | None
    masterAddress: str | None
    masterEpoch: int = Field(ge=0)
    syncStateSet: list[int]
    syncStateSetEpoch: int = Field(ge=0)
    brokers: list[Replica]


class Source(_Strict):
    controllers: list[str]
    leader: str
    group: str | None
    namesrv: str


class MigrationFile(_Strict):
    format: Literal["rmqctl-migration"]
    version: Literal[1]
    exportedAtMillis: int = Field(ge=0)
    source: Source
    controllerConfig: dict[str, str]
    brokerSets: list[BrokerSet]
    sha256: str


def checksum(doc: Mapping[str, JSON]) -> str:
    """sha256 (hex) of the document without its `sha256` key, as canonical JSON (sorted keys, no spaces, UTF-8)."""
    body = {k: v for k, v in doc.items() if k != "sha256"}
    return hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    ).hexdigest()


def _loc(loc: tuple[int | str, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".") or "(document)"


def load_file(path: str) -> MigrationFile:
    """Read and check an export file. CorruptInput (exit 4) names the file and the byte offset (bad JSON) or
    the field (bad values), an unknown format or version, a checksum that does not match, or a set whose
    master or SyncStateSet names a broker it does not list."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise Failed(f"{path}: {e.strerror or e}") from None
    try:
        doc = json.loads(raw)
    except UnicodeDecodeError as e:
        raise CorruptInput(path, e.start, "not UTF-8 text") from None
    except json.JSONDecodeError as e:
        offset = len(raw.decode(errors="replace")[: e.pos].encode())
        raise CorruptInput(path, offset, f"not JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        got = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise CorruptInput(
            path, 0, f"not an rmqctl migration file (format {got!r}, expected {FORMAT!r})", where="field format"
        )
    if doc.get("version") != VERSION:
        raise CorruptInput(
            path,
            0,
            f"version {doc.get('version')!r} is not one this rmqctl reads (it reads {VERSION}); use the rmqctl "
            "that exported it, or a newer one",
            where="field version",
        )
    try:
        parsed = MigrationFile.model_validate(doc)
    except ValidationError as e:
        first = e.errors()[0]
        more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
        raise CorruptInput(path, 0, f"{first['msg']}{more}", where=f"field {_loc(first['loc'])}") from None
    if checksum(doc) != parsed.sha256:
        raise CorruptInput(path, 0, "the sha256 does not match the content (edited or damaged)", where="field sha256")
    _check_sets(path, parsed.brokerSets)
    return parsed


def _check_sets(path: str, sets: list[BrokerSet]) -> None:
    names: set[str] = set()
    for i, s in enumerate(sets):
        where = f"field brokerSets[{i}]"
        ids = [b.brokerId for b in s.brokers]
        if s.brokerName in names:
            raise CorruptInput(path, 0, f"broker set {s.brokerName!r} appears twice", where=where)
        names.add(s.brokerName)
        if len(set(ids)) != len(ids):
            raise CorruptInput(path, 0, f"{s.brokerName}: a broker id appears twice in {ids}", where=where)
        if s.masterBrokerId is not None and s.masterBrokerId not in ids:
            raise CorruptInput(path, 0, f"{s.brokerName}: master {s.masterBrokerId} is not one of {ids}", where=where)
        if not set(s.syncStateSet) <= set(ids):
            raise CorruptInput(
                path, 0, f"{s.brokerName}: SyncStateSet {s.syncStateSet} is not within {ids}", where=where
            )


# --- reading a controller over remoting -----------------------------------------------------------------


def _split(text: str) -> list[str]:
    addrs = [a.strip() for a in text.replace(",", ";").split(";") if a.strip()]
    for a in addrs:
        host, _, port = a.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise BadUsage(f"bad address {a!r}: expected host:port (e.g. 127.0.0.1:9878)")
    if not addrs:
        raise BadUsage("no address given")
    return addrs


def ask(addr: str, code: int, ext: Mapping[str, object] | None, body: bytes | None, timeout: float) -> RemotingCommand:
    """One remoting request on its own connection; Unreachable (exit 3) naming the address when it cannot."""
    host, _, port = addr.rpartition(":")

    async def go() -> RemotingCommand:
        client = await asyncio.wait_for(RemotingClient.connect(host, int(port)), timeout)
        try:
            return await client.request(code, ext, body, timeout)
        finally:
            client.close()

    try:
        return asyncio.run(go())
    except (OSError, TimeoutError) as e:
        raise Unreachable(f"{addr}: request {code}: {type(e).__name__}: {e or 'no answer'}") from None


def _ok(addr: str, code: int, r: RemotingCommand) -> RemotingCommand:
    if r.code != C.SUCCESS:
        raise Failed(f"{addr}: request {code} answered {r.code} {C.code_name(r.code)}: {r.remark}")
    return r


def _body(addr: str, code: int, r: RemotingCommand) -> JSON:
    try:
        return loads_fastjson(r.body or b"null")
    except (ValueError, UnicodeDecodeError) as e:
        raise Failed(f"{addr}: the body of request {code}'s answer is not JSON: {e}") from None


def find_leader(addrs: list[str], timeout: float) -> tuple[str, str | None]:
    """(the remoting address of the controller leader, the group name) from 1005, asked of each address."""
    said: list[str] = []
    for a in addrs:
        try:
            r = _ok(a, GET_METADATA_INFO, ask(a, GET_METADATA_INFO, None, None, timeout))
        except (Unreachable, Failed) as e:
            said.append(e.message)
            continue
        h = r.ext_fields
        if h.get("isLeader") == "true":
            return a, h.get("group")
        named = h.get("controllerLeaderAddress")
        if named:
            return named, h.get("group")
        said.append(f"{a}: knows no leader")
    raise Unreachable("no controller leader: " + "; ".join(said))


def cluster_of_sets(namesrv: str, timeout: float) -> dict[str, str]:
    """brokerName -> clusterName from the NameServer's cluster info (106's clusterAddrTable)."""
    r = _ok(namesrv, GET_BROKER_CLUSTER_INFO, ask(namesrv, GET_BROKER_CLUSTER_INFO, None, None, timeout))
    table = _body(namesrv, GET_BROKER_CLUSTER_INFO, r)
    clusters = table.get("clusterAddrTable") if isinstance(table, dict) else None
    if not isinstance(clusters, dict):
        raise Failed(f"{namesrv}: the cluster info has no clusterAddrTable")
    return {name: cluster for cluster, names in clusters.items() for name in names or ()}


def read_controller(
    addrs: list[str], namesrv: str, timeout: float, clusters: Mapping[str, str] | None = None
) -> tuple[JSONObject, list[str]]:
    """The whole state of a running controller as an export document (no checksum yet), and the broker sets
    it does not manage (not in controller mode). The sets asked for are the NameServer's (`clusters`
    brokerName -> clusterName read from it when not given)."""
    leader, group = find_leader(addrs, timeout)
    clusters = clusters if clusters is not None else cluster_of_sets(namesrv, timeout)
    names = sorted(clusters)

    def sync_state_data() -> JSONObject:
        r = _ok(
            leader, C.GET_SYNC_STATE_DATA, ask(leader, C.GET_SYNC_STATE_DATA, None, json.dumps(names).encode(), timeout)
        )
        body = _body(leader, C.GET_SYNC_STATE_DATA, r)
        table = body.get("replicasInfoTable") if isinstance(body, dict) else None
        return table if isinstance(table, dict) else {}

    before = sync_state_data()
    sets: list[JSONObject] = []
    for name in names:
        s = before.get(name)
        if not isinstance(s, dict):
            continue
        r = _ok(leader, C.GET_REPLICA_INFO, ask(leader, C.GET_REPLICA_INFO, {"brokerName": name}, None, timeout))
        sync = _body(leader, C.GET_REPLICA_INFO, r) or {}
        brokers = sorted([*s.get("inSyncReplicas", []), *s.get("notInSyncReplicas", [])], key=lambda b: b["brokerId"])
        master = r.ext_fields.get("masterBrokerId")
        sets.append(
            {
                "clusterName": clusters[name],
                "brokerName": name,
                "masterBrokerId": int(master) if master is not None else None,
                "masterAddress": r.ext_fields.get("masterAddress") or None,
                "masterEpoch": int(r.ext_fields.get("masterEpoch") or s.get("masterEpoch") or 0),
                "syncStateSet": sorted(sync.get("syncStateSet") or []),
                "syncStateSetEpoch": int(sync.get("syncStateSetEpoch", 0)),
                "brokers": [
                    {"brokerId": b["brokerId"], "brokerAddress": b["brokerAddress"], "alive": bool(b.get("alive"))}
                    for b in brokers
                ],
            }
        )
    after = sync_state_data()
    for s in sets:
        then, now = before[s["brokerName"]], after.get(s["brokerName"]) or {}
        for key in ("masterEpoch", "syncStateSetEpoch"):
            if then.get(key) != now.get(key) or s[key] != now.get(key):
                raise Failed(
                    f"{s['brokerName']}: {key} moved during the export ({then.get(key)} -> {now.get(key)}, 1004 said "
                    f"{s[key]}): the controller is electing; export again"
                )
    config = _ok(leader, GET_CONTROLLER_CONFIG, ask(leader, GET_CONTROLLER_CONFIG, None, None, timeout)).body or b""
    try:
        properties = parse_properties(config.decode(errors="replace"), f"{leader} 1010")
    except PropertiesError as e:
        raise Failed(f"the controller config (1010) is not properties text: {e}") from None
    doc: JSONObject = {
        "format": FORMAT,
        "version": VERSION,
        "exportedAtMillis": int(time.time() * 1000),
        "source": {"controllers": addrs, "leader": leader, "group": group, "namesrv": namesrv},
        "controllerConfig": {p.key: p.value for p in properties},
        "brokerSets": sets,
    }
    return doc, sorted(set(names) - {s["brokerName"] for s in sets})


# --- the verbs ------------------------------------------------------------------------------------------

SET_COLUMNS = ["clusterName", "brokerName", "brokers", "master", "masterEpoch", "syncStateSet", "syncStateSetEpoch"]


def _set_rows(sets: list[BrokerSet]) -> list[JSONObject]:
    return [
        {
            "clusterName": s.clusterName,
            "brokerName": s.brokerName,
            "brokers": " ".join(f"{b.brokerId}={b.brokerAddress}{'' if b.alive else '(dead)'}" for b in s.brokers),
            "master": s.masterBrokerId,
            "masterEpoch": s.masterEpoch,
            "syncStateSet": ",".join(map(str, s.syncStateSet)),
            "syncStateSetEpoch": s.syncStateSetEpoch,
        }
        for s in sets
    ]


timeout_option = click.option(
    "--timeout", type=click.FloatRange(min=0, min_open=True), default=10.0, show_default=True, help="Per request (s)."
)


@click.group("migrate")
def migrate() -> None:
    """Adopt a cluster run by RocketMQ's own controller (docs/migration.md)."""


@migrate.command("export")
@click.option(
    "--from", "sources", required=True, metavar="ADDR[;ADDR...]", help="The old controllers' remoting addresses."
)
@click.option(
    "--namesrv", envvar="NAMESRV_ADDR", required=True, metavar="ADDR", help="A NameServer (env NAMESRV_ADDR)."
)
@click.option(
    "-f", "--file", "path", required=True, type=click.Path(dir_okay=False, path_type=Path), help="Write here."
)
@timeout_option
@output_options
@pass_out
def export(out: Out, sources: str, namesrv: str, path: Path, timeout: float) -> None:
    """Read a running RocketMQ controller's whole state and write it to FILE (atomically, fsynced)."""
    doc, unmanaged = read_controller(_split(sources), _split(namesrv)[0], timeout)
    doc["sha256"] = checksum(doc)
    try:  # what the controller answered holds the file's rules, or nothing is written
        parsed = MigrationFile.model_validate(doc)
        _check_sets(doc["source"]["leader"], parsed.brokerSets)
    except ValidationError as e:
        raise Failed(f"{doc['source']['leader']}: an answer does not fit the export file: {e.errors()[0]}") from None
    except CorruptInput as e:
        raise Failed(e.message) from None
    path = path.absolute()
    atomic_write(path.parent, path.name, (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode())
    for name in unmanaged:
        click.echo(f"rmqctl: warning: broker set {name} is not managed by the controller (not exported)", err=True)
    summary = {
        "file": str(path),
        "leader": doc["source"]["leader"],
        "brokerSets": len(parsed.brokerSets),
        "unmanaged": unmanaged,
    }
    emit_document(out, summary, [Block("sets", _set_rows(parsed.brokerSets), SET_COLUMNS)], title="exported")


def state_of(f: MigrationFile, grace_ms: int, now_ms: int) -> ControllerStateMachine:
    """The controller state the new group starts from (docs/migration.md, "What import builds")."""
    sm = ControllerStateMachine()
    for s in f.brokerSets:
        info = BrokerReplicaInfo(s.clusterName, s.brokerName, max((b.brokerId for b in s.brokers), default=0) + 1)
        # The check code only matters to a broker that crashed between 1002-apply and saving its id; one that
        # runs has its id on disk. RocketMQ's is "address;time": the export's time stands in.
        info.brokers = {b.brokerId: (b.brokerAddress, f"{b.brokerAddress};{f.exportedAtMillis}") for b in s.brokers}
        state = SyncStateInfo(s.clusterName, s.brokerName)
        state.master_broker_id, state.master_epoch = s.masterBrokerId, s.masterEpoch
        state.sync_state_set, state.sync_state_set_epoch = frozenset(s.syncStateSet), s.syncStateSetEpoch
        sm.replicas.sets[s.brokerName], sm.sync.sets[s.brokerName] = info, state
        for b in s.brokers:
            if b.alive:  # a broker the old controller saw dead stays unknown until it heartbeats
                fields: dict[str, str | int] = {
                    **HEARTBEAT_DEFAULTS,
                    "clusterName": s.clusterName,
                    "brokerName": s.brokerName,
                    "brokerId": b.brokerId,
                    "brokerAddr": b.brokerAddress,
                    "heartbeatTimeoutMillis": grace_ms,
                }
                sm.apply(heartbeat_of(now_ms, fields))
    sm.config.update(replicated_config(f.controllerConfig))
    return sm


def replicated_config(config: Mapping[str, str]) -> dict[str, ConfigValue]:
    """The replicated keys (statemachine/config.py) of a 1010 answer, typed; a key it leaves out has RocketMQ's
    default. Failed naming the key when a value is not one of its type."""
    values: dict[str, ConfigValue] = dict(DEFAULTS)
    for key, kind in CONFIG_KEYS.items():
        if key in config:
            value = parse_config_value(kind, config[key])
            if value is None:
                raise Failed(f"controllerConfig.{key}: {config[key]!r} is not a value of this key")
            values[key] = value
    return values


@migrate.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--voter", "voters", multiple=True, required=True, help="A voter of the new group (repeatable).")
@click.option(
    "--write-snapshot",
    "root",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The snapshot root to write snapshot_1 into (copy it to each new node's snapshot/).",
)
@click.option(
    "--grace-ms",
    type=click.IntRange(min=1000),
    default=DEFAULT_GRACE_MS,
    show_default=True,
    help="How long after the new leader takes over a broker that has not heartbeated yet stays alive.",
)
@output_options
@pass_out
def import_(out: Out, file: str, voters: tuple[str, ...], root: Path, grace_ms: int) -> None:
    """Build the bootstrap snapshot of the new group from an export FILE."""
    f = load_file(file)
    sm = state_of(f, grace_ms, int(time.time() * 1000))
    doc = {
        "path": file,
        "toIndex": BOOTSTRAP_INDEX,
        "toTerm": BOOTSTRAP_TERM,
        "brokerSets": len(f.brokerSets),
        "graceMillis": grace_ms,
        "replicatedConfig": sm.config.values(),
    }
    meta = {"writtenBy": "rmqctl migrate import", "source": file, "exportedFrom": f.source.leader, "sha256": f.sha256}
    write_state_snapshot(out, sm, root.absolute(), doc, voters, (), meta)


def differences(old: MigrationFile, new: MigrationFile) -> list[JSONObject]:
    """Every difference between two views: a set on one side only, a set's field, a broker's address or
    liveness, a replicated config key."""
    rows: list[JSONObject] = []
    olds, news = {s.brokerName: s for s in old.brokerSets}, {s.brokerName: s for s in new.brokerSets}
    for name in sorted(olds.keys() | news.keys()):
        a, b = olds.get(name), news.get(name)
        if a is None or b is None:
            rows.append({"brokerName": name, "field": "(broker set)", "old": a is not None, "new": b is not None})
            continue
        for key in (
            "clusterName",
            "masterBrokerId",
            "masterAddress",
            "masterEpoch",
            "syncStateSet",
            "syncStateSetEpoch",
        ):
            if getattr(a, key) != getattr(b, key):
                rows.append({"brokerName": name, "field": key, "old": getattr(a, key), "new": getattr(b, key)})
        ab, bb = {x.brokerId: x for x in a.brokers}, {x.brokerId: x for x in b.brokers}
        for i in sorted(ab.keys() | bb.keys()):
            x, y = ab.get(i), bb.get(i)
            for key in ("brokerAddress", "alive"):
                xv, yv = getattr(x, key, None), getattr(y, key, None)
                if xv != yv:
                    rows.append({"brokerName": name, "field": f"broker {i} {key}", "old": xv, "new": yv})
    xs, ys = replicated_config(old.controllerConfig), replicated_config(new.controllerConfig)
    for key in sorted(CONFIG_KEYS):
        xv, yv = xs.get(key), ys.get(key)
        if xv != yv:
            rows.append({"brokerName": "", "field": f"controllerConfig {key}", "old": xv, "new": yv})
    return rows


@migrate.command("verify")
@click.option("--from", "sources", metavar="ADDR[;ADDR...]", help="The old controllers' remoting addresses.")
@click.option("--file", "path", type=click.Path(dir_okay=False), help="Or the export file as the old view.")
@click.option("--to", "targets", required=True, metavar="ADDR[;ADDR...]", help="The new group's remoting addresses.")
@click.option(
    "--namesrv",
    envvar="NAMESRV_ADDR",
    metavar="ADDR",
    help="A NameServer (env NAMESRV_ADDR): the broker sets to compare. With --file and no --namesrv, the file's.",
)
@timeout_option
@output_options
@pass_out
def verify(out: Out, sources: str | None, path: str | None, targets: str, namesrv: str | None, timeout: float) -> None:
    """Compare the old controller's view (--from, or --file) with the new group's (--to); exit 1 listing every
    difference, 0 when they agree."""
    if (sources is None) == (path is None):
        raise BadUsage("pass exactly one of --from ADDR (the running old controller) or --file FILE (its export)")
    if namesrv is None and path is None:
        raise BadUsage("--from needs --namesrv ADDR (or NAMESRV_ADDR): the NameServer names the broker sets")
    ns = _split(namesrv)[0] if namesrv is not None else ""
    clusters = cluster_of_sets(ns, timeout) if ns else None
    if path is not None:
        old = load_file(path)
        if clusters is None:
            clusters = {s.brokerName: s.clusterName for s in old.brokerSets}
    else:
        doc, _ = read_controller(_split(sources or ""), ns, timeout, clusters)
        old = MigrationFile.model_validate({**doc, "sha256": ""})
    doc, _ = read_controller(_split(targets), ns, timeout, clusters)
    new = MigrationFile.model_validate({**doc, "sha256": ""})
    rows = differences(old, new)
    summary = {
        "old": path or old.source.leader,
        "new": new.source.leader,
        "brokerSets": len(new.brokerSets),
        "differences": len(rows),
    }
    emit_document(out, summary, [Block("differences", rows, ["brokerName", "field", "old", "new"])], title="verify")
    if rows:
        raise Failed(f"{len(rows)} difference(s) between the old and the new controller")
