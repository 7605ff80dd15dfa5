"""Online verbs: rmqctl against running controllers over HTTP (docs/rmqctl-online.md).

* mqadmin parity, same names and short options: `getControllerMetaData`, `getSyncStateSet`, `electMaster`,
  `cleanBrokerMetadata`, `getControllerConfig`, `updateControllerConfig` (aliases: `controller metadata`,
  `controller config get|set`, `sync-state-set`, `elect-master`, `clean-broker-metadata`);
* `raft status|peers|snapshot|snapshots|autopilot|features|transfer-leader|add-peer|remove-peer`;
* `kv get|put|delete|cas`;
* `alarm list|disarm`.

Every verb takes `-a/--address` (one or several `host:port`, `;` or `,` separated; RMQCTL_ADDRESS),
`--token` (RMQCTL_TOKEN), `--timeout` (RMQCTL_TIMEOUT) and `-v/--verbose`, and renders in the group's
`-o` mode: `text` is mqadmin's output for the mqadmin verbs and `key<TAB>value` lines for raft/kv, `json`
is the server's envelope, `table` is Rich tables. A non-zero RocketMQ code exits 1 with code,
codeName and remark on stderr (in json mode the envelope is still printed on stdout). The json never says
SUCCESS when the exit code is not 0: a verb that fails on an answer the server gave as SUCCESS (an unknown
broker set, a cas that did not succeed) prints it with its failure code (Out.flush_json), and a per-node map
names the nodes that could not be asked (UNREACHABLE_CODE).
"""

from __future__ import annotations

import copy
import functools
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import count as counter
from urllib.parse import quote

import click

from cli.rmqctl import BadUsage, Failed, Unreachable
from cli.rmqctl.client import (
    DEFAULT_TIMEOUT_S,
    ENV_ADDRESS,
    ENV_TIMEOUT,
    ENV_TOKEN,
    ControllerClient,
    Reply,
    parse_addresses,
)
from cli.rmqctl.output import Block, Out, emit_document, emit_rows, fmt, iso_seconds, output_options, pass_out
from raft.core import Role
from statemachine.values import JSON, JSONObject

QUERY_NOT_FOUND = 22
BROKER_METADATA_NOT_EXIST = 2008  # CONTROLLER_BROKER_METADATA_NOT_EXIST
UNREACHABLE_CODE = -1
"""In `-o json` per-node maps (getControllerConfig, raft snapshot --all), the code of a node that could not be
asked: rmqctl's own, negative so that no RocketMQ code can be mistaken for it."""
UNREACHABLE_NAME = "RMQCTL_UNREACHABLE"
_LONG_MAX = 2**63 - 1

# --- connection options ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Conn:
    """The connection options of one invocation."""

    address: str | None
    token: str | None
    timeout: float | None
    verbose: bool

    def client(self, default_timeout: float = DEFAULT_TIMEOUT_S) -> ControllerClient:
        timeout = self.timeout if self.timeout is not None else default_timeout
        return ControllerClient(parse_addresses(self.address), self.token or None, timeout, self.verbose)


def connection_options(*, short_verbose: bool = True) -> Callable[[Callable[..., object]], Callable[..., object]]:
    """-a/--address, --token, --timeout, -v/--verbose (only --verbose where -v is mqadmin's value option),
    plus the leaf -o/--no-color. The verb receives them as one `conn: Conn` argument."""

    def decorate(f: Callable[..., object]) -> Callable[..., object]:
        @functools.wraps(f)
        def verb(
            *args: object,
            address: str | None,
            token: str | None,
            timeout: float | None,
            verbose: bool,
            **kwargs: object,
        ) -> object:
            return f(*args, conn=Conn(address, token, timeout, verbose), **kwargs)

        verbose_names = ("-v", "--verbose") if short_verbose else ("--verbose",)
        verb = click.option(
            *verbose_names,
            "verbose",
            is_flag=True,
            help="Say on stderr which node each request went to and which node answered.",
        )(verb)
        verb = click.option(
            "--timeout",
            type=click.FloatRange(min=0, min_open=True),
            envvar=ENV_TIMEOUT,
            metavar="SECONDS",
            help=f"Overall deadline, retries and leader following included "
            f"(default {DEFAULT_TIMEOUT_S:g}; env {ENV_TIMEOUT}).",
        )(verb)
        verb = click.option(
            "--token",
            envvar=ENV_TOKEN,
            metavar="TOKEN",
            help=f"Bearer token for admin and raft endpoints (env {ENV_TOKEN}).",
        )(verb)
        verb = click.option(
            "-a",
            "--address",
            "--controllerAddress",
            "address",
            envvar=ENV_ADDRESS,
            metavar="HOST:PORT[;HOST:PORT...]",
            help=f"Controller HTTP address(es), ';' or ',' separated; the leader is found and "
            f"followed (env {ENV_ADDRESS}).",
        )(verb)
        return output_options(verb)

    return decorate


# --- rendering --------------------------------------------------------------------------------------------


def _write(lines: Iterable[str]) -> None:
    sys.stdout.write("".join(f"{line}\n" for line in lines))


def _json(out: Out, envelope: Mapping[str, JSON]) -> None:
    emit_document(out, {}, json_doc=envelope)


def _check(out: Out, reply: Reply, what: str | None = None) -> None:
    """A non-zero code: exit 1 with code, codeName and remark on stderr; json mode still shows the envelope."""
    if not reply.ok:
        if out.mode == "json":
            _json(out, reply.envelope)
        raise reply.failure(what)


def _show_kv(
    out: Out, reply: Reply, doc: Mapping[str, JSON], blocks: Sequence[Block] = (), *, title: str | None = None
) -> None:
    """raft/kv documents: the envelope (json), `key<TAB>value` lines (text), a key/value table (table)."""
    if out.mode == "json":
        _json(out, reply.envelope)
    elif out.mode == "text":
        lines: list[str] = []
        for k, v in doc.items():
            if isinstance(v, list | tuple) and all(not isinstance(x, dict | list | tuple) for x in v):
                lines += [f"{k}\t{fmt(x)}" for x in v] or [f"{k}\t"]  # a list repeats its key, one item a line
            else:
                lines.append(f"{k}\t{fmt(v)}")
        _write(lines)
    else:
        emit_document(out, doc, blocks, title=title)


def _warn(message: str) -> None:
    click.echo(f"rmqctl: warning: {message}", err=True)


# --- getControllerMetaData ----------------------------------------------------------------------------------


@click.command("getControllerMetaData")
@connection_options()
@pass_out
def get_controller_metadata(out: Out, conn: Conn) -> None:
    """Controller group, leader id and address, and peers (GET /api/v1/controller/metadata, any node)."""
    with conn.client() as c:
        reply = c.get("/api/v1/controller/metadata")
    _check(out, reply)
    h = reply.header
    peers = [p for p in str(h.get("peers") or "").split(";") if p]
    if out.mode == "json":
        _json(out, reply.envelope)
    elif out.mode == "text":
        _write(
            [
                f"#ControllerGroup\t{fmt(h.get('group'))}",
                f"#ControllerLeaderId\t{fmt(h.get('controllerLeaderId'))}",
                f"#ControllerLeaderAddress\t{fmt(h.get('controllerLeaderAddress'))}",
                *(f"#Peer:\t{p}" for p in peers),
            ]
        )
    else:
        leader = h.get("controllerLeaderAddress")
        doc = {
            "controllerGroup": h.get("group"),
            "controllerLeaderId": h.get("controllerLeaderId"),
            "controllerLeaderAddress": leader,
            "answeredBy": reply.node,
            "answeredByLeader": h.get("isLeader"),
        }
        rows = [{"peer": p, "leader": p == leader} for p in peers]
        emit_document(out, doc, [Block("peers", rows, ["peer", "leader"])], title="controller metadata")


# --- getSyncStateSet ----------------------------------------------------------------------------------------


def _names(values: Sequence[str]) -> list[str]:
    names: list[str] = []
    for value in values:
        for name in value.split(","):
            if name.strip() and name.strip() not in names:
                names.append(name.strip())
    return names


def _replica(r: Mapping[str, JSON]) -> str:
    """BrokerReplicasInfo.ReplicaIdentity#toString, as mqadmin prints each member."""
    return (
        f"ReplicaIdentity{{brokerName='{fmt(r.get('brokerName'))}', brokerId={fmt(r.get('brokerId'))}, "
        f"brokerAddress='{fmt(r.get('brokerAddress'))}', alive={fmt(r.get('alive'))}}}"
    )


def _render_sync_state(out: Out, reply: Reply, looping: bool) -> None:
    table: Mapping[str, JSON] = (reply.body or {}).get("replicasInfoTable") or {}
    if out.mode == "json":
        if looping:  # one compact envelope per round (NDJSON)
            emit_rows(out, [reply.envelope], columns=())
        else:
            _json(out, reply.envelope)
        return
    if out.mode == "text":
        lines: list[str] = []
        for name, info in table.items():
            in_sync, not_in_sync = info.get("inSyncReplicas") or [], info.get("notInSyncReplicas") or []
            lines += [
                f"#brokerName\t{name}",
                f"#MasterBrokerId\t{fmt(info.get('masterBrokerId'))}",
                f"#MasterAddr\t{fmt(info.get('masterAddress'))}",
                f"#MasterEpoch\t{fmt(info.get('masterEpoch'))}",
                f"#SyncStateSetEpoch\t{fmt(info.get('syncStateSetEpoch'))}",
                f"#SyncStateSetNums\t{len(in_sync)}",
            ]
            lines += [f"InSyncReplica:\t{_replica(r)}" for r in in_sync]
            lines += [f"NotInSyncReplica:\t{_replica(r)}" for r in not_in_sync]
        _write(lines)
        return
    sets, replicas = [], []
    for name, info in table.items():
        in_sync, not_in_sync = info.get("inSyncReplicas") or [], info.get("notInSyncReplicas") or []
        master = info.get("masterBrokerId")
        sets.append(
            {
                "brokerName": name,
                "masterBrokerId": master,
                "masterAddress": info.get("masterAddress"),
                "masterEpoch": info.get("masterEpoch"),
                "syncStateSetEpoch": info.get("syncStateSetEpoch"),
                "syncStateSetNums": len(in_sync),
            }
        )
        for r, synced in [(r, True) for r in in_sync] + [(r, False) for r in not_in_sync]:
            replicas.append(
                {
                    "brokerName": name,
                    "brokerId": r.get("brokerId"),
                    "brokerAddress": r.get("brokerAddress"),
                    "master": r.get("brokerId") == master,
                    "inSync": synced,
                    "alive": r.get("alive"),
                }
            )
    replicas.sort(key=lambda r: (str(r["brokerName"]), r["brokerId"] if isinstance(r["brokerId"], int) else 0))
    emit_rows(
        out,
        sets,
        ["brokerName", "masterBrokerId", "masterAddress", "masterEpoch", "syncStateSetEpoch", "syncStateSetNums"],
        title="broker sets",
    )
    emit_rows(out, replicas, ["brokerName", "brokerId", "brokerAddress", "master", "inSync", "alive"], title="replicas")


@click.command("getSyncStateSet")
@click.option(
    "-b",
    "--brokerName",
    "broker_names",
    multiple=True,
    metavar="NAME[,NAME...]",
    help="Broker set(s) to show; repeatable, or a comma list.",
)
@click.option(
    "-c", "--clusterName", "cluster", metavar="CLUSTER", help="Every broker set of this cluster (instead of -b)."
)
@click.option("--all", "all_sets", is_flag=True, help="Every broker set the controller knows, of every cluster.")
@click.option(
    "-i",
    "--interval",
    type=click.FloatRange(min=0, min_open=True),
    is_flag=False,
    flag_value=3.0,
    default=None,
    metavar="[SECONDS]",
    help="Repeat every SECONDS (3 when no value is given) until interrupted (or --count rounds).",
)
@click.option("--count", type=click.IntRange(min=1), default=None, help="With -i: stop after this many rounds.")
@connection_options()
@pass_out
def get_sync_state_set(
    out: Out,
    conn: Conn,
    broker_names: tuple[str, ...],
    cluster: str | None,
    all_sets: bool,
    interval: float | None,
    count: int | None,
) -> None:
    """Master, epochs and SyncStateSet of broker sets, with each replica's liveness: those named with -b
    (POST /api/v1/admin/sync-state-data), every set of a cluster with -c, or all with --all
    (GET /api/v1/admin/broker-sets); a linearizable read on the leader."""
    names = _names(broker_names)
    if sum([bool(broker_names), cluster is not None, all_sets]) != 1:
        raise BadUsage("pass one of -b NAME[,NAME...], -c CLUSTER or --all")
    if broker_names and not names:
        raise BadUsage("-b needs at least one broker name")
    if cluster is not None and not cluster.strip():
        raise BadUsage("-c needs a cluster name")
    if count is not None and interval is None:
        raise BadUsage("--count only makes sense with -i")
    with conn.client() as c:
        try:
            for n in counter():
                if n:
                    c.hooks.sleep(interval or 0)
                if names:
                    reply = c.post("/api/v1/admin/sync-state-data", {"brokerNames": names})
                else:
                    query = f"?clusterName={quote(cluster.strip(), safe='')}" if cluster is not None else ""
                    reply = c.get(f"/api/v1/admin/broker-sets{query}")
                _check(out, reply)
                _render_sync_state(out, reply, interval is not None)
                table = (reply.body or {}).get("replicasInfoTable") or {}
                missing = [x for x in names if x not in table]
                problem = (
                    f"no metadata for broker set(s): {', '.join(missing)}"
                    if missing
                    else f"no broker set in cluster {cluster.strip()}"
                    if cluster is not None and not table
                    else None
                )
                if problem and interval is None:
                    # The server says SUCCESS (RocketMQ's 1006 leaves unknown names out); rmqctl's verdict is
                    # 2008, what replica-info (1004) answers for one broker set it does not know: -o json shows
                    # that code (Out.flush_json), not the SUCCESS the exit code contradicts.
                    raise Failed(problem, code=BROKER_METADATA_NOT_EXIST)
                if problem:
                    _warn(problem)
                sys.stdout.flush()
                if interval is None or (count is not None and n + 1 >= count):
                    return
        except KeyboardInterrupt:  # the normal end of a watch
            return


# --- electMaster -------------------------------------------------------------------------------------------


@click.command("electMaster")
@click.option("-c", "--clusterName", "cluster", required=True, help="Cluster of the broker set.")
@click.option("-bn", "--brokerName", "broker_name", required=True, help="Broker set.")
@click.option(
    "-b",
    "--brokerId",
    "broker_id",
    type=click.IntRange(min=0, max=_LONG_MAX),
    required=True,
    help="The broker to make master.",
)
@connection_options()
@pass_out
def elect_master(out: Out, conn: Conn, cluster: str, broker_name: str, broker_id: int) -> None:
    """Make a broker the master of its set (admin trigger: it must be alive and in the SyncStateSet, or
    eligible as an unclean master). POST /api/v1/admin/elect-master."""
    with conn.client() as c:
        # Not resent after an unknown outcome: a second election would bump the epochs again.
        reply = c.post(
            "/api/v1/admin/elect-master",
            {"clusterName": cluster, "brokerName": broker_name, "brokerId": broker_id},
            resend_unknown=False,
        )
    _check(out, reply, f"electMaster {broker_name} {broker_id}")
    h, body = reply.header, reply.body or {}
    group = body.get("brokerMemberGroup") or {}
    members = sorted(((int(k), v) for k, v in (group.get("brokerAddrs") or {}).items()), key=lambda m: m[0])
    if out.mode == "json":
        _json(out, reply.envelope)
    elif out.mode == "text":
        _write(
            [
                f"#ClusterName\t{cluster}",
                f"#BrokerName\t{broker_name}",
                f"#BrokerMasterAddr\t{fmt(h.get('masterAddress'))}",
                f"#MasterEpoch\t{fmt(h.get('masterEpoch'))}",
                f"#SyncStateSetEpoch\t{fmt(h.get('syncStateSetEpoch'))}",
                *(f"\t#Broker\t{i}\t{a}" for i, a in members),
            ]
        )
    else:
        doc = {
            "clusterName": cluster,
            "brokerName": broker_name,
            "masterBrokerId": h.get("masterBrokerId"),
            "brokerMasterAddr": h.get("masterAddress"),
            "masterEpoch": h.get("masterEpoch"),
            "syncStateSetEpoch": h.get("syncStateSetEpoch"),
            "syncStateSet": body.get("syncStateSet") or [],
        }
        rows = [{"brokerId": i, "brokerAddress": a, "master": i == h.get("masterBrokerId")} for i, a in members]
        emit_document(out, doc, [Block("brokers", rows, ["brokerId", "brokerAddress", "master"])], title="elected")


# --- cleanBrokerMetadata -----------------------------------------------------------------------------------


def parse_clean_ids(text: str) -> str:
    """`-b "1;2;3"` (or commas) checked as broker ids here, before anything is sent (mqadmin's check never
    runs): the `;`-joined list the server expects. BadUsage names the bad piece."""
    pieces = [p.strip() for p in re.split(r"[;,]", text)]
    while pieces and pieces[-1] == "":  # "1;2;" is fine, as Java's split drops trailing empty pieces
        pieces.pop()
    if not pieces:
        raise BadUsage('-b needs broker ids like "1;2;3" (leave -b out to clean the whole broker set)')
    for p in pieces:
        if not re.fullmatch(r"[0-9]+", p) or int(p) > _LONG_MAX:
            raise BadUsage(f'-b: {p!r} is not a broker id; expected ids like "1;2;3"')
    return ";".join(str(int(p)) for p in pieces)


@click.command("cleanBrokerMetadata")
@click.option("-bn", "--brokerName", "broker_name", required=True, help="Broker set to clean.")
@click.option(
    "-b",
    "--brokerControllerIdsToClean",
    "ids",
    metavar='"1;2;3"',
    help="Only these broker ids (default: the whole broker set).",
)
@click.option("-c", "--clusterName", "cluster", help="Cluster of the broker set (required unless -l).")
@click.option("-l", "--cleanLivingBroker", "living", is_flag=True, help="Also clean brokers that are alive.")
@connection_options()
@pass_out
def clean_broker_metadata(
    out: Out, conn: Conn, broker_name: str, ids: str | None, cluster: str | None, living: bool
) -> None:
    """Remove a broker set, or some of its brokers, from the controller (POST /api/v1/admin/clean-broker-metadata)."""
    id_list = parse_clean_ids(ids) if ids is not None else None
    if not living and not (cluster or "").strip():
        raise BadUsage("cleanLivingBroker option is false, clusterName option can not be empty (pass -c, or -l)")
    request = {
        "clusterName": cluster.strip() if cluster else None,
        "brokerName": broker_name.strip(),
        "brokerControllerIdsToClean": id_list,
        "isCleanLivingBroker": living,
    }
    with conn.client() as c:
        reply = c.post("/api/v1/admin/clean-broker-metadata", request, resend_unknown=False)
    _check(out, reply, f"cleanBrokerMetadata {broker_name}")
    if out.mode == "json":
        _json(out, reply.envelope)
    elif out.mode == "text":
        _write([f"clear broker {broker_name.strip()} metadata from controller success!"])
    else:
        doc = {
            "brokerName": broker_name.strip(),
            "clusterName": request["clusterName"],
            "brokerIds": id_list or "all",
            "cleanLivingBroker": living,
            "result": reply.code_name,
        }
        emit_document(out, doc, title="broker metadata cleaned")


# --- per-node verbs ---------------------------------------------------------------------------------------


def _ask_each(
    c: ControllerClient, method: str, path: str, addresses: Sequence[str], what: str, *, keep_failed: bool = False
) -> tuple[dict[str, Reply], list[click.ClickException]]:
    """One request to each address in turn, no leader following and no retry round (a dead node costs one
    refused connection): the answers by node (failed ones too with `keep_failed`), and the errors."""
    answers: dict[str, Reply] = {}
    errors: list[click.ClickException] = []
    for address in addresses:
        try:
            reply = c.request(method, path, targets=[address], follow=False, retry=False)
        except Unreachable as e:
            errors.append(e)
            if keep_failed:  # -o json: the node is in the map with a failure code, not left out
                node = address.rpartition("://")[2]
                answers[node] = _not_asked(node, e.message)
            continue
        if reply.ok or keep_failed:
            answers[reply.node] = reply
        if not reply.ok:
            errors.append(reply.failure(what))
    return answers, errors


def _not_asked(node: str, why: str) -> Reply:
    """The -o json entry of a node no answer came from (UNREACHABLE_CODE)."""
    return Reply(
        node, {"code": UNREACHABLE_CODE, "codeName": UNREACHABLE_NAME, "remark": why, "header": None, "body": None}
    )


def _raise_all(errors: Sequence[click.ClickException]) -> None:
    """Every failure on stderr; the exit code is 3 if a node was unreachable, else 1."""
    if errors:
        final = next((e for e in errors if isinstance(e, Unreachable)), errors[-1])
        for e in errors:
            if e is not final:
                e.show()
        raise final


# --- getControllerConfig / updateControllerConfig --------------------------------------------------------


@click.command("getControllerConfig")
@connection_options()
@pass_out
def get_controller_config(out: Out, conn: Conn) -> None:
    """Each listed controller's config: the replicated keys and its node-local keys (GET /api/v1/admin/config,
    asked of every -a address, like mqadmin)."""
    with conn.client() as c:
        answers, errors = _ask_each(
            c, "GET", "/api/v1/admin/config", c.addresses, "getControllerConfig", keep_failed=out.mode == "json"
        )
    if out.mode == "json":
        emit_document(out, {}, json_doc={node: r.envelope for node, r in answers.items()})
    else:
        for node, reply in answers.items():
            if not reply.ok:
                continue
            body = reply.body if isinstance(reply.body, Mapping) else {}
            if out.mode == "text":
                _write([f"============{node}============", *(f"{k:<50}=  {fmt(body[k])}" for k in sorted(body))])
            else:
                emit_rows(out, [{"key": k, "value": body[k]} for k in sorted(body)], ["key", "value"], title=node)
    _raise_all(errors)


@click.command("updateControllerConfig")
@click.option("-k", "--key", required=True, help="Config key (e.g. enableElectUncleanMaster).")
@click.option("-v", "--value", required=True, help="Its new value, as properties text (true, 3, ...).")
@connection_options(short_verbose=False)
@pass_out
def update_controller_config(out: Out, conn: Conn, key: str, value: str) -> None:
    """Change a controller config key (PUT /api/v1/admin/config). Replicated through Raft here: one request
    to the leader changes it on every node (mqadmin sends one request per node). -v is the value, as in
    mqadmin; verbose output is --verbose."""
    key, value = key.strip(), value.strip()
    if not key:
        raise BadUsage("-k needs a config key")
    with conn.client() as c:
        reply = c.put("/api/v1/admin/config", {key: value})
    _check(out, reply, f"updateControllerConfig {key}")
    if out.mode == "json":
        _json(out, reply.envelope)
    elif out.mode == "text":
        _write([f"update controller config success![{reply.node}]", f"{key} : {value}"])
    else:
        emit_document(out, {"key": key, "value": value, "answeredBy": reply.node}, title="controller config updated")


# --- raft ----------------------------------------------------------------------------------------------


@click.group("raft")
def raft() -> None:
    """Online Raft operations: status, peers and lag, snapshots, leadership transfer, membership."""


def _peer_http(peers: JSON, peer_id: JSON) -> str:
    """The HTTP address a status body's peer list gives for `peer_id` ("" when unknown)."""
    for p in peers or []:
        if isinstance(p, Mapping) and p.get("id") == peer_id and p.get("httpAddress"):
            return str(p["httpAddress"])
    return ""


def _status_redirect(reply: Reply) -> str | None:
    """For `raft status --leader`: accept the leader's own answer; a follower's points at the leader it names."""
    body = reply.body or {}
    if body.get("role") == Role.LEADER:
        return None
    return _peer_http(body.get("peers"), body.get("leaderId"))


@raft.command("status")
@click.option(
    "--leader/--first",
    "leader",
    default=None,
    help="Ask the leader (the default when several addresses are given), or the first node that answers "
    "(the default with one address).",
)
@connection_options()
@pass_out
def raft_status(out: Out, conn: Conn, leader: bool | None) -> None:
    """One node's Raft state: role, term, leader, commit/applied index, log range, snapshot, peers. The first
    lines say which node answered and its role."""
    with conn.client() as c:
        if leader is None:
            leader = len(c.addresses) > 1
        # --leader: every address is asked in turn (a dead one is skipped at once) until the leader answers.
        reply = c.get("/api/v1/raft/status", redirect=_status_redirect if leader else None)
    _check(out, reply)
    body = reply.body or {}
    peers = [p for p in body.get("peers") or [] if isinstance(p, Mapping)]
    doc = {"answeredBy": reply.node, **{k: v for k, v in body.items() if k != "peers"}}
    if out.mode == "text":
        _write(
            [
                *(f"{k}\t{fmt(v)}" for k, v in doc.items()),
                *(
                    f"peer\t{p.get('id')}\t{fmt(p.get('httpAddress'))}\t{'voter' if p.get('voter') else 'learner'}"
                    for p in peers
                ),
            ]
        )
        return
    block = Block("peers", [dict(p) for p in peers], ["id", "raftAddress", "httpAddress", "remotingAddress", "voter"])
    _show_kv(out, reply, doc, [block], title=f"raft status of {reply.node} ({body.get('role', 'unknown role')})")


def _peers_redirect(reply: Reply) -> str | None:
    """For `raft peers`: the leader's view; a node that knows no leader is shown as is (with a warning)."""
    rows = [p for p in (reply.body or {}).get("peers") or [] if isinstance(p, Mapping)]
    leader = next((p for p in rows if p.get("role") == Role.LEADER), None)
    if leader is None or not leader.get("httpAddress") or leader["httpAddress"] == reply.node:
        return None
    return str(leader["httpAddress"])


PEER_COLUMNS = ("id", "role", "matchIndex", "lagEntries", "lastContactMs", "httpAddress", "remotingAddress")


@raft.command("peers")
@click.option("--local", is_flag=True, help="Show the answering node's view as is (lag is only known to the leader).")
@connection_options()
@pass_out
def raft_peers(out: Out, conn: Conn, local: bool) -> None:
    """Every peer's role, match index, lag in entries and last contact, as the leader sees them."""
    with conn.client() as c:
        reply = c.get("/api/v1/raft/peers", redirect=None if local else _peers_redirect)
    _check(out, reply)
    rows = [p for p in (reply.body or {}).get("peers") or [] if isinstance(p, Mapping)]
    leader = next((p for p in rows if p.get("role") == Role.LEADER), None)
    if leader is None and not local:
        _warn(f"{reply.node} knows no leader: match index, lag and last contact are unknown")
    if out.mode == "json":
        _json(out, reply.envelope)
    else:
        emit_rows(out, rows, PEER_COLUMNS, title=f"raft peers (as seen by {reply.node})")


@raft.command("snapshot")
@click.option(
    "--all",
    "all_nodes",
    is_flag=True,
    help="On every member of the group (their HTTP addresses from raft status), one after another.",
)
@connection_options()
@pass_out
def raft_snapshot(out: Out, conn: Conn, all_nodes: bool) -> None:
    """Take a snapshot now on the node asked (the first that answers), or on every member with --all: index,
    term, size and duration."""
    with conn.client() as c:
        if all_nodes:
            _snapshot_all(out, c)
            return
        reply = c.post("/api/v1/raft/snapshot")
    _check(out, reply, "snapshot")
    doc = {"node": reply.node, **(reply.body or {})}
    if reply.remark:  # e.g. nothing applied since the newest snapshot, which is answered instead
        doc["remark"] = reply.remark
    _show_kv(out, reply, doc, title="snapshot")


SNAPSHOT_ALL_COLUMNS = ("node", "created", "index", "term", "bytes", "durationMs", "remark")


def _snapshot_all(out: Out, c: ControllerClient) -> None:
    """`raft snapshot --all`: the members from one node's raft status, then one snapshot request per member; a
    row per member that answered, every failure on stderr (exit 3 if a member was unreachable, else 1)."""
    status = c.get("/api/v1/raft/status")
    _check(out, status)
    members = [p for p in (status.body or {}).get("peers") or [] if isinstance(p, Mapping)]
    addresses = [str(p["httpAddress"]) for p in members if p.get("httpAddress")]
    answers, errors = _ask_each(
        c, "POST", "/api/v1/raft/snapshot", addresses, "snapshot", keep_failed=out.mode == "json"
    )
    for p in members:
        if not p.get("httpAddress"):
            errors.append(Failed(f"snapshot: member {p.get('id')} has no known HTTP address; not asked"))
            if out.mode == "json":
                answers[str(p.get("id"))] = _not_asked(str(p.get("id")), "no known HTTP address; not asked")
    if out.mode == "json":
        emit_document(out, {}, json_doc={node: r.envelope for node, r in answers.items()})
    else:
        rows = [
            {"node": node, **{k: (r.body or {}).get(k) for k in SNAPSHOT_ALL_COLUMNS[1:-1]}, "remark": r.remark}
            for node, r in answers.items()
            if r.ok
        ]
        emit_rows(out, rows, SNAPSHOT_ALL_COLUMNS, title="snapshots taken")
    _raise_all(errors)


AUTOPILOT_COLUMNS = (
    "node",
    "leading",
    "enabled",
    "stabilizationSecs",
    "deadServerSecs",
    "minQuorum",
    "join",
    "promote",
    "remove",
    "failed",
)


@raft.command("autopilot")
@click.option("--enable/--disable", "enabled", default=None, help="Turn autopilot on or off.")
@click.option(
    "--stabilization-secs", type=click.IntRange(min=0), metavar="S", help="A learner's healthy time before promotion."
)
@click.option(
    "--dead-server-secs", type=click.IntRange(min=1), metavar="S", help="A voter's silent time before removal."
)
@click.option("--min-quorum", type=click.IntRange(min=1), metavar="N", help="Never remove a voter below N voters.")
@connection_options()
@pass_out
def raft_autopilot(
    out: Out,
    conn: Conn,
    enabled: bool | None,
    stabilization_secs: int | None,
    dead_server_secs: int | None,
    min_quorum: int | None,
) -> None:
    """Autopilot on every member (their HTTP addresses from raft status): its settings and what it did, one row
    per member; with options, set them on every member first, so that whichever leads acts alike. The
    leader's recent decisions follow its row (-o json: every member's document)."""
    change: JSONObject = {}
    for key, value in (
        ("enabled", enabled),
        ("stabilizationSecs", stabilization_secs),
        ("deadServerSecs", dead_server_secs),
        ("minQuorum", min_quorum),
    ):
        if value is not None:
            change[key] = value
    with conn.client() as c:
        status = c.get("/api/v1/raft/status")
        _check(out, status)
        members = [p for p in (status.body or {}).get("peers") or [] if isinstance(p, Mapping)]
        addresses = [str(p["httpAddress"]) for p in members if p.get("httpAddress")]
        errors: list[click.ClickException] = []
        if change:
            for address in addresses:
                try:
                    reply = c.request(
                        "PUT", "/api/v1/raft/autopilot", change, targets=[address], follow=False, retry=False
                    )
                except Unreachable as e:
                    errors.append(e)
                    continue
                if not reply.ok:
                    errors.append(reply.failure("autopilot"))
        answers, more = _ask_each(
            c, "GET", "/api/v1/raft/autopilot", addresses, "autopilot", keep_failed=out.mode == "json"
        )
        errors += more
    if out.mode == "json":
        emit_document(out, {}, json_doc={node: r.envelope for node, r in answers.items()})
    else:
        docs = {node: dict(r.body or {}) for node, r in answers.items() if r.ok}
        rows = [
            {"node": node, **{k: d.get(k) for k in AUTOPILOT_COLUMNS[1:6]}, **dict(d.get("counts") or {})}
            for node, d in docs.items()
        ]
        events = [
            {"leader": node, **e}
            for node, d in docs.items()
            if d.get("leading")
            for e in d.get("events") or []
            if isinstance(e, Mapping)
        ]
        blocks = [Block("decisions", events, ["leader", "secsAgo", "action", "peer", "reason"])] if events else []
        emit_document(out, {}, [Block("autopilot", rows, list(AUTOPILOT_COLUMNS)), *blocks], title="autopilot")
    _raise_all(errors)


FEATURE_COLUMNS = ("node", "level", "maxLevel")
FEATURE_WAIT_S = 3.0  # after --upgrade, how long the rows wait for members to show the raised level


@raft.command("features")
@click.option(
    "--upgrade",
    is_flag=True,
    help="Raise the group's feature level first (on the leader): refused, naming them, while a member reads less.",
)
@click.option("--level", type=click.IntRange(min=1), metavar="N", help="With --upgrade: the level to raise to.")
@connection_options()
@pass_out
def raft_features(out: Out, conn: Conn, upgrade: bool, level: int | None) -> None:
    """The group's feature level as each member applied it and the highest level each member reads, one row
    per member (a release without feature levels, v0.3.0, shows maxLevel 0). With --upgrade, raise the group's
    level first: to --level, by default the highest the leader's release reads (docs/operations.md, "Upgrades and
    versions"). The level is never lowered. After the raise, each member is asked again until it shows the new
    level, for 3 s in all (a follower learns of the commit from the leader's next append or heartbeat); a member
    still below it then is shown as it is."""
    if level is not None and not upgrade:
        raise BadUsage("--level goes with --upgrade")
    raised = 0
    with conn.client() as c:
        if upgrade:
            reply = c.post("/api/v1/raft/features", {"level": level} if level is not None else {})
            _check(out, reply, "feature level upgrade")
            raised = int((reply.body or {}).get("level") or 0)
        status = c.get("/api/v1/raft/status")
        _check(out, status)
        members = [p for p in (status.body or {}).get("peers") or [] if isinstance(p, Mapping)]
        rows: list[JSONObject] = []
        errors: list[click.ClickException] = []
        deadline = time.monotonic() + FEATURE_WAIT_S  # one wait for all members, not one each
        for p in members:
            address = p.get("httpAddress")
            if not address:
                errors.append(Failed(f"features: member {p.get('id')} has no known HTTP address; not asked"))
                continue
            try:
                reply = _member_features(c, str(address), raised, deadline)
            except Unreachable as e:
                errors.append(e)
                continue
            except Failed as e:
                if "HTTP 404" not in e.message:
                    raise
                rows.append({"node": str(address), "level": None, "maxLevel": 0})  # no feature levels: v0.3.0
                continue
            if not reply.ok:
                errors.append(reply.failure("features"))
                continue
            body = reply.body or {}
            rows.append({"node": reply.node, "level": body.get("level"), "maxLevel": body.get("maxLevel")})
    emit_rows(out, rows, FEATURE_COLUMNS, title="feature levels")
    _raise_all(errors)


def _member_features(c: ControllerClient, address: str, raised: int, deadline: float) -> Reply:
    """One member's /api/v1/raft/features. After an upgrade to `raised`, asked again until it shows that level
    (or the monotonic `deadline` passed): a follower learns that the raise is committed from the leader's next
    heartbeat, up to 100 ms later at the default timeouts, so a row read at once could show the old level."""
    while True:
        reply = c.get("/api/v1/raft/features", targets=[address], follow=False, retry=False)
        level = (reply.body or {}).get("level") if reply.ok else None
        if not isinstance(level, int) or level >= raised or time.monotonic() >= deadline:
            return reply
        time.sleep(0.02)


@raft.command("snapshots")
@connection_options()
@pass_out
def raft_snapshots(out: Out, conn: Conn) -> None:
    """The snapshots on the disk of the node asked, newest first."""
    with conn.client() as c:
        reply = c.get("/api/v1/raft/snapshots")
    _check(out, reply)
    if out.mode == "json":
        _json(out, reply.envelope)
        return
    snaps = [s for s in (reply.body or {}).get("snapshots") or [] if isinstance(s, Mapping)]
    rows = [
        {
            "index": s.get("index"),
            "term": s.get("term"),
            "bytes": s.get("bytes"),
            "createdAt": iso_seconds(s["createdAt"]) if isinstance(s.get("createdAt"), int | float) else None,
            "voters": ",".join(s.get("voters") or []),
            "learners": ",".join(s.get("learners") or []),
            "files": len(s.get("files") or []),
        }
        for s in snaps
    ]
    emit_rows(
        out,
        rows,
        ["index", "term", "bytes", "createdAt", "voters", "learners", "files"],
        title=f"snapshots on {reply.node}",
    )


@raft.command("transfer-leader")
@click.option(
    "--to", "target", metavar="ID", help="Raft id (host:port) of the voter to lead (default: the most caught-up)."
)
@click.option(
    "--max-lag",
    type=click.IntRange(min=0),
    metavar="N",
    help="Refuse when the target is more than N entries behind (default: the server's).",
)
@connection_options()
@pass_out
def raft_transfer_leader(out: Out, conn: Conn, target: str | None, max_lag: int | None) -> None:
    """Hand leadership to another voter; refused (exit 1, the server's reason on stderr) when it lags."""
    request: JSONObject = {}
    if target is not None:
        request["to"] = target
    if max_lag is not None:
        request["maxLagEntries"] = max_lag
    with conn.client() as c:
        reply = c.post("/api/v1/raft/transfer-leader", request, resend_unknown=False)
    _check(out, reply, "transfer-leader")
    _show_kv(out, reply, dict(reply.body or {}), title="leadership transferred")


@raft.command("add-peer")
@click.argument("peer_id", metavar="ID")
@click.option("--raft-address", metavar="HOST:PORT", help="Where to dial its Raft port (default: ID).")
@click.option("--http-address", metavar="HOST:PORT", help="Its HTTP API, for 2007 redirects to it.")
@click.option(
    "--remoting-address",
    metavar="HOST:PORT",
    help="Its RocketMQ remoting address (its jRaftControllerRPCAddr entry), served to brokers and mqadmin.",
)
@click.option(
    "--catch-up-timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="How long the leader lets it catch up as a learner before promoting it (default: the server's).",
)
@connection_options()
@pass_out
def raft_add_peer(
    out: Out,
    conn: Conn,
    peer_id: str,
    raft_address: str | None,
    http_address: str | None,
    remoting_address: str | None,
    catch_up_timeout: float | None,
) -> None:
    """Add a voter: it joins as a learner, catches up, then is promoted (one membership change at a time)."""
    request: JSONObject = {"id": peer_id}
    if raft_address:
        request["raftAddress"] = raft_address
    if http_address:
        request["httpAddress"] = http_address
    if remoting_address:
        request["remotingAddress"] = remoting_address
    if catch_up_timeout is not None:
        request["timeoutMs"] = round(catch_up_timeout * 1000)
    # The leader answers after the catch-up: without --timeout, wait that long plus the usual deadline.
    with conn.client(DEFAULT_TIMEOUT_S + (catch_up_timeout if catch_up_timeout is not None else 30.0)) as c:
        reply = c.post("/api/v1/raft/peers", request, resend_unknown=False)
    _check(out, reply, f"add-peer {peer_id}")
    _show_kv(out, reply, dict(reply.body or {}), title="membership")


@raft.command("remove-peer")
@click.argument("peer_id", metavar="ID")
@connection_options()
@pass_out
def raft_remove_peer(out: Out, conn: Conn, peer_id: str) -> None:
    """Remove a voter or learner from the group."""
    with conn.client() as c:
        reply = c.delete(f"/api/v1/raft/peers/{quote(peer_id, safe=':')}", resend_unknown=False)
    _check(out, reply, f"remove-peer {peer_id}")
    _show_kv(out, reply, dict(reply.body or {}), title="membership")


# --- kv ------------------------------------------------------------------------------------------------


@click.group("kv")
def kv() -> None:
    """The replicated key/value config (namespaced strings, like the NameServer's KV config)."""


def _kv_path(namespace: str, key: str) -> str:
    return f"/api/v1/kv/{quote(namespace, safe='')}/{quote(key, safe='')}"


@kv.command("get")
@click.argument("namespace")
@click.argument("key")
@connection_options()
@pass_out
def kv_get(out: Out, conn: Conn, namespace: str, key: str) -> None:
    """A value (a linearizable read). Missing key: exit 1, "not found"."""
    with conn.client() as c:
        reply = c.get(_kv_path(namespace, key))
    if reply.code == QUERY_NOT_FOUND:
        if out.mode == "json":
            _json(out, reply.envelope)
        raise Failed(f"not found: {namespace} {key} ({reply.code} {reply.code_name})")
    _check(out, reply, f"kv get {namespace} {key}")
    _show_kv(out, reply, dict(reply.body or {}), title=f"{namespace} {key}")


@kv.command("put")
@click.argument("namespace")
@click.argument("key")
@click.argument("value")
@connection_options()
@pass_out
def kv_put(out: Out, conn: Conn, namespace: str, key: str, value: str) -> None:
    """Set a value."""
    with conn.client() as c:
        reply = c.put(_kv_path(namespace, key), {"value": value})
    _check(out, reply, f"kv put {namespace} {key}")
    _show_kv(out, reply, dict(reply.body or {}), title=f"{namespace} {key}")


@kv.command("delete")
@click.argument("namespace")
@click.argument("key")
@connection_options()
@pass_out
def kv_delete(out: Out, conn: Conn, namespace: str, key: str) -> None:
    """Delete a key (`deleted false` when it was absent; still exit 0)."""
    with conn.client() as c:
        reply = c.delete(_kv_path(namespace, key))
    _check(out, reply, f"kv delete {namespace} {key}")
    _show_kv(out, reply, dict(reply.body or {}), title=f"{namespace} {key}")


@kv.command("cas")
@click.argument("namespace")
@click.argument("key")
@click.argument("value")
@click.option("--expect", metavar="V", help="Write only if the current value is V.")
@click.option("--absent", is_flag=True, help="Write only if the key is absent.")
@connection_options()
@pass_out
def kv_cas(out: Out, conn: Conn, namespace: str, key: str, value: str, expect: str | None, absent: bool) -> None:
    """Compare-and-set: exactly one of --expect V / --absent. Exit 1 when it did not succeed, showing the
    current value."""
    if (expect is None) == (not absent):
        raise BadUsage("kv cas needs exactly one of --expect V or --absent")
    with conn.client() as c:
        # Not resent after an unknown outcome: if the first attempt committed, a resend would report a
        # failure with our own value as the current one.
        reply = c.post(f"{_kv_path(namespace, key)}/cas", {"expect": expect, "value": value}, resend_unknown=False)
    _check(out, reply, f"kv cas {namespace} {key}")
    body = dict(reply.body or {})
    _show_kv(out, reply, body, title=f"{namespace} {key}")
    if not body.get("succeeded"):
        current = body.get("value")
        now = "the key is absent" if current is None else f"the current value is {current!r}"
        # No RocketMQ code says "compare failed": -o json shows 1 SYSTEM_ERROR with this message as the remark
        # (Out.flush_json), the body keeps `succeeded: false` and the current value.
        raise Failed(f"cas on {namespace} {key} did not succeed: {now}")


# --- registration ----------------------------------------------------------------------------------------

MQADMIN_VERBS = (
    get_controller_metadata,
    get_sync_state_set,
    elect_master,
    clean_broker_metadata,
    get_controller_config,
    update_controller_config,
)


def _alias(command: click.Command, name: str) -> click.Command:
    alias = copy.copy(command)
    alias.name = name
    alias.short_help = f"Same as {command.name}."
    return alias


@click.group("controller")
def controller() -> None:
    """Controller metadata and config (aliases of the mqadmin verbs)."""


@controller.group("config")
def controller_config() -> None:
    """Controller config: get (getControllerConfig), set (updateControllerConfig)."""


controller.add_command(_alias(get_controller_metadata, "metadata"))
controller_config.add_command(_alias(get_controller_config, "get"))
controller_config.add_command(_alias(update_controller_config, "set"))


# --- alarms ----------------------------------------------------------------------------------------------


@click.group("alarm")
def alarm() -> None:
    """Online: the group's raised alarms (NOSPACE) and disarming them, as etcdctl's `alarm list|disarm`."""


ALARM_COLUMNS = ["alarm", "memberId", "raisedAt", "detail"]


@alarm.command("list")
@connection_options()
@pass_out
def alarm_list(out: Out, conn: Conn) -> None:
    """Every raised alarm: which alarm, which member raised it, when and why (the node asked's applied list)."""
    with conn.client() as c:
        reply = c.get("/api/v1/alarms")
    _check(out, reply, "alarm list")
    if out.mode == "json":
        _json(out, reply.envelope)
        return
    rows = [
        {
            "alarm": a.get("alarm"),
            "memberId": a.get("memberId"),
            "raisedAt": iso_seconds(a["raisedAtMillis"] / 1000) if isinstance(a.get("raisedAtMillis"), int) else None,
            "detail": a.get("detail"),
        }
        for a in (reply.body or {}).get("alarms") or []
        if isinstance(a, Mapping)
    ]
    emit_rows(out, rows, ALARM_COLUMNS, title=f"alarms on {reply.node}")


@alarm.command("disarm")
@click.option(
    "--alarm", "name", type=click.Choice(["NOSPACE", "CORRUPT"]), help="Disarm only this alarm (default: every alarm)."
)
@connection_options()
@pass_out
def alarm_disarm(out: Out, conn: Conn, name: str | None) -> None:
    """Disarm alarms on every member (the leader proposes it). Free the space first: a member still past its
    limit raises NOSPACE again at its next check."""
    with conn.client() as c:
        reply = c.post("/api/v1/alarms/disarm", {"alarm": name} if name else {})
    _check(out, reply, "alarm disarm")
    gone = [g for g in (reply.body or {}).get("disarmed") or [] if isinstance(g, Mapping)]
    if out.mode == "json":
        _json(out, reply.envelope)
        return
    emit_rows(
        out,
        [{"alarm": g.get("alarm"), "memberId": g.get("memberId")} for g in gone],
        ["alarm", "memberId"],
        title="disarmed",
    )


def register(group: click.Group) -> None:
    """Add the online verbs to rmqctl's top-level group (idempotent)."""
    if "getControllerMetaData" in group.commands:
        return
    for command in MQADMIN_VERBS:
        group.add_command(command)
    group.add_command(_alias(get_sync_state_set, "sync-state-set"))
    group.add_command(_alias(elect_master, "elect-master"))
    group.add_command(_alias(clean_broker_metadata, "clean-broker-metadata"))
    group.add_command(controller)
    group.add_command(raft)
    group.add_command(kv)
    group.add_command(alarm)
