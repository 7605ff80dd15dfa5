"""rmqctl online verbs against fake controllers (httpx.MockTransport serving canned http-api.md envelopes):
golden output of every verb in every -o mode, the requests sent, leader following and failover, the
deadline (a fake clock: no test sleeps), exit codes 1/2/3, the bearer token, and -b validation.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from click.testing import Result
from pydantic import BaseModel

from api.http import models as M
from cli.rmqctl import client as client_module
from cli.rmqctl import main
from cli.rmqctl.client import ControllerClient, Hooks, parse_addresses
from cli.rmqctl.online import parse_clean_ids, register
from raft.testing.cluster import free_ports
from tests.cli.helpers import F1, F2, FakeTime, L, Serve, envelope, rmqctl

register(main)

RAFT = {L: "127.0.0.1:9880", F1: "127.0.0.1:9881", F2: "127.0.0.1:9882"}
REMOTING = {L: "127.0.0.1:10770", F1: "127.0.0.1:10771", F2: "127.0.0.1:10772"}


def not_leader(leader: str | None) -> dict[str, Any]:
    header = {"controllerLeaderId": RAFT.get(leader or ""), "controllerLeaderAddress": leader}
    return envelope(2007, header, remark="The controller is not in leader state")


# --- canned answers (shapes of api/http/models.py, values as a 3-node group would answer) ------------------------

META = envelope(
    header={
        "group": "jRaft-Controller",
        "controllerLeaderId": RAFT[L],
        "controllerLeaderAddress": L,
        "isLeader": True,
        "peers": f"{L};{F1};{F2};",
    }
)


def replica(name: str, broker_id: int, alive: bool) -> dict[str, Any]:
    return {"brokerName": name, "brokerId": broker_id, "brokerAddress": f"10.0.0.{broker_id}:30911", "alive": alive}


SYNC = envelope(
    body={
        "replicasInfoTable": {
            "broker-a": {
                "masterBrokerId": 1,
                "masterAddress": "10.0.0.1:30911",
                "masterEpoch": 3,
                "syncStateSetEpoch": 5,
                "inSyncReplicas": [replica("broker-a", 1, True), replica("broker-a", 2, True)],
                "notInSyncReplicas": [replica("broker-a", 3, False)],
            },
            "broker-b": {
                "masterBrokerId": None,
                "masterAddress": None,
                "masterEpoch": 1,
                "syncStateSetEpoch": 2,
                "inSyncReplicas": [],
                "notInSyncReplicas": [replica("broker-b", 4, False)],
            },
        }
    }
)
ELECT = envelope(
    header={"masterBrokerId": 2, "masterAddress": "10.0.0.2:30911", "masterEpoch": 4, "syncStateSetEpoch": 6},
    body={
        "brokerMemberGroup": {
            "cluster": "DefaultCluster",
            "brokerName": "broker-a",
            "brokerAddrs": {"1": "10.0.0.1:30911", "2": "10.0.0.2:30911", "3": "10.0.0.3:30911"},
        },
        "syncStateSet": [2],
    },
)
CONFIG = envelope(
    body={
        "controllerStorePath": "/data/controller",
        "electMasterMaxRetryCount": "3",
        "enableElectUncleanMaster": "false",
        "notifyBrokerRoleChanged": "true",
    }
)
STATUS = envelope(
    body={
        "nodeId": RAFT[L],
        "group": "jRaft-Controller",
        "role": "leader",
        "term": 7,
        "leaderId": RAFT[L],
        "commitIndex": 1042,
        "appliedIndex": 1042,
        "firstLogIndex": 901,
        "lastLogIndex": 1042,
        "lastSnapshotIndex": 900,
        "lastSnapshotTerm": 6,
        "peers": [
            {"id": RAFT[a], "raftAddress": RAFT[a], "httpAddress": a, "remotingAddress": REMOTING[a], "voter": True}
            for a in (L, F1, F2)
        ],
    }
)
PEERS = envelope(
    body={
        "leaderId": RAFT[L],
        "lastLogIndex": 1042,
        "peers": [
            {
                "id": RAFT[L],
                "raftAddress": RAFT[L],
                "role": "leader",
                "httpAddress": L,
                "remotingAddress": REMOTING[L],
                "matchIndex": 1042,
                "lagEntries": 0,
                "lastContactMs": 0,
                "state": "replicate",
            },
            {
                "id": RAFT[F1],
                "raftAddress": RAFT[F1],
                "role": "follower",
                "httpAddress": F1,
                "remotingAddress": REMOTING[F1],
                "matchIndex": 1041,
                "lagEntries": 1,
                "lastContactMs": 12,
                "state": "replicate",
            },
            {
                "id": RAFT[F2],
                "raftAddress": RAFT[F2],
                "role": "follower",
                "httpAddress": F2,
                "remotingAddress": REMOTING[F2],
                "matchIndex": 830,
                "lagEntries": 212,
                "lastContactMs": 4810,
                "state": "snapshot",
            },
        ],
    }
)
FOLLOWER_PEERS = envelope(
    body={
        "leaderId": RAFT[L],
        "lastLogIndex": 1042,
        "peers": [
            {**p, "matchIndex": None, "lagEntries": None, "lastContactMs": None, "state": None}
            for p in PEERS["body"]["peers"]
        ],
    }
)
SNAP = envelope(body={"created": True, "index": 1042, "term": 7, "bytes": 18234, "durationMs": 12.5})
SNAPS = envelope(
    body={
        "snapshots": [
            {
                "index": 1042,
                "term": 7,
                "bytes": 18234,
                "createdAt": 1700000000.0,
                "voters": [RAFT[L], RAFT[F1], RAFT[F2]],
                "learners": [],
                "files": [{"name": "data", "size": 18234, "crc32c": 305419896}],
            },
            {
                "index": 900,
                "term": 6,
                "bytes": 17002,
                "createdAt": 1699990000.5,
                "voters": [RAFT[L], RAFT[F1], RAFT[F2]],
                "learners": [],
                "files": [{"name": "data", "size": 17002, "crc32c": 2596069104}],
            },
        ]
    }
)
TRANSFER = envelope(
    body={"previousLeaderId": RAFT[L], "leaderId": RAFT[F1], "term": 8, "targetLagEntries": 1, "durationMs": 48.25}
)
NEW = "127.0.0.1:9883"
ADDED = envelope(body={"id": NEW, "voters": [RAFT[L], RAFT[F1], RAFT[F2], NEW], "learners": []})
REMOVED = envelope(body={"id": RAFT[F2], "voters": [RAFT[L], RAFT[F1]], "learners": []})
KV_GET = envelope(body={"value": "v1"})
KV_PUT = envelope(body={"value": "v2"})
KV_DELETE = envelope(body={"deleted": True})
KV_CAS = envelope(body={"succeeded": True, "value": "v2"})
EMPTY = envelope()

LEADER_ROUTES: dict[tuple[str, str], Any] = {
    ("GET", "/api/v1/controller/metadata"): META,
    ("POST", "/api/v1/admin/sync-state-data"): SYNC,
    ("POST", "/api/v1/admin/elect-master"): ELECT,
    ("POST", "/api/v1/admin/clean-broker-metadata"): EMPTY,
    ("GET", "/api/v1/admin/config"): CONFIG,
    ("PUT", "/api/v1/admin/config"): EMPTY,
    ("GET", "/api/v1/raft/status"): STATUS,
    ("GET", "/api/v1/raft/peers"): PEERS,
    ("POST", "/api/v1/raft/snapshot"): SNAP,
    ("GET", "/api/v1/raft/snapshots"): SNAPS,
    ("POST", "/api/v1/raft/transfer-leader"): TRANSFER,
    ("POST", "/api/v1/raft/peers"): ADDED,
    ("DELETE", f"/api/v1/raft/peers/{RAFT[F2]}"): REMOVED,
    ("GET", "/api/v1/kv/ns/k"): KV_GET,
    ("PUT", "/api/v1/kv/ns/k"): KV_PUT,
    ("DELETE", "/api/v1/kv/ns/k"): KV_DELETE,
    ("POST", "/api/v1/kv/ns/k/cas"): KV_CAS,
}

# --- the fake cluster -----------------------------------------------------------------------------------

Answer = Any  # an envelope dict, an httpx.Response, an exception to raise, or a callable(request) -> one


@dataclass
class Sent:
    node: str
    method: str
    path: str
    json: Any
    headers: httpx.Headers


@dataclass
class Cluster:
    """Fake controller nodes behind one httpx.MockTransport. `nodes[addr]` maps (method, path) to an answer;
    a node that is not in `nodes` refuses connections."""

    nodes: dict[str, dict[tuple[str, str], Answer]] = field(default_factory=dict)
    sent: list[Sent] = field(default_factory=list)
    time: FakeTime = field(default_factory=FakeTime)
    fallback: Answer = None  # answered for a route a node does not list (e.g. not_leader(L) on followers)

    def handler(self, request: httpx.Request) -> httpx.Response:
        node = f"{request.url.host}:{request.url.port}"
        body = json.loads(request.content) if request.content else None
        path = request.url.raw_path.decode()  # as sent: URL-encoded
        self.sent.append(Sent(node, request.method, path, body, request.headers))
        if node not in self.nodes:
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        answer = self.nodes[node].get((request.method, path), self.fallback)
        if callable(answer):
            answer = answer(request)
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, httpx.Response):
            return answer
        if answer is None:
            return httpx.Response(404, json={"error": "NOT_FOUND", "message": f"no route {request.url.path}"})
        return httpx.Response(200, json=answer)

    def nodes_asked(self) -> list[str]:
        return [s.node for s in self.sent]


@pytest.fixture
def cluster(serve_rmqctl: Serve) -> Cluster:
    c = Cluster()
    serve_rmqctl(c.handler, c.time)
    return c


@pytest.fixture
def leader(cluster: Cluster) -> Cluster:
    """A healthy group: L leads, the followers answer 2007 naming L."""
    cluster.nodes = {L: dict(LEADER_ROUTES), F1: {}, F2: {}}
    cluster.fallback = not_leader(L)
    return cluster


def table(r: Result) -> str:
    """Rich pads cells with spaces: compare tables without trailing blanks."""
    return "\n".join(line.rstrip() for line in r.stdout.splitlines()).strip("\n") + "\n"


# --- golden output: every verb, every -o mode -------------------------------------------------------------


@dataclass(frozen=True)
class Golden:
    args: tuple[str, ...]
    route: tuple[str, str]  # the request the verb sends (its answer is LEADER_ROUTES[route])
    text: str
    table: str


T = "\t"
GOLDEN: dict[str, Golden] = {
    "getControllerMetaData": Golden(
        ("getControllerMetaData",),
        ("GET", "/api/v1/controller/metadata"),
        f"#ControllerGroup{T}jRaft-Controller\n#ControllerLeaderId{T}127.0.0.1:9880\n"
        f"#ControllerLeaderAddress{T}127.0.0.1:9770\n"
        f"#Peer:{T}127.0.0.1:9770\n#Peer:{T}127.0.0.1:9771\n#Peer:{T}127.0.0.1:9772\n",
        """\
controller metadata

  ControllerGroup           jRaft-Controller
  ControllerLeaderId        127.0.0.1:9880
  ControllerLeaderAddress   127.0.0.1:9770
  AnsweredBy                127.0.0.1:9770
  AnsweredByLeader          true

peers

  Peer             Leader
 ─────────────────────────
  127.0.0.1:9770   true
  127.0.0.1:9771   false
  127.0.0.1:9772   false
""",
    ),
    "getSyncStateSet": Golden(
        ("getSyncStateSet", "-b", "broker-a,broker-b"),
        ("POST", "/api/v1/admin/sync-state-data"),
        f"#brokerName{T}broker-a\n#MasterBrokerId{T}1\n#MasterAddr{T}10.0.0.1:30911\n#MasterEpoch{T}3\n"
        f"#SyncStateSetEpoch{T}5\n#SyncStateSetNums{T}2\n"
        f"InSyncReplica:{T}ReplicaIdentity{{brokerName='broker-a', brokerId=1, brokerAddress='10.0.0.1:30911', alive=true}}\n"
        f"InSyncReplica:{T}ReplicaIdentity{{brokerName='broker-a', brokerId=2, brokerAddress='10.0.0.2:30911', alive=true}}\n"
        f"NotInSyncReplica:{T}ReplicaIdentity{{brokerName='broker-a', brokerId=3, brokerAddress='10.0.0.3:30911', alive=false}}\n"
        f"#brokerName{T}broker-b\n#MasterBrokerId{T}null\n#MasterAddr{T}null\n#MasterEpoch{T}1\n"
        f"#SyncStateSetEpoch{T}2\n#SyncStateSetNums{T}0\n"
        f"NotInSyncReplica:{T}ReplicaIdentity{{brokerName='broker-b', brokerId=4, brokerAddress='10.0.0.4:30911', alive=false}}\n",
        """\
broker sets

  BrokerName   MasterBrokerId   MasterAddress    MasterEpoch   SyncStateSetEpoch   SyncStateSetNums
 ───────────────────────────────────────────────────────────────────────────────────────────────────
  broker-a     1                10.0.0.1:30911   3             5                   2
  broker-b     null             null             1             2                   0

replicas

  BrokerName   BrokerId   BrokerAddress    Master   InSync   Alive
 ──────────────────────────────────────────────────────────────────
  broker-a     1          10.0.0.1:30911   true     true     true
  broker-a     2          10.0.0.2:30911   false    true     true
  broker-a     3          10.0.0.3:30911   false    false    false
  broker-b     4          10.0.0.4:30911   false    false    false
""",
    ),
    "electMaster": Golden(
        ("electMaster", "-c", "DefaultCluster", "-bn", "broker-a", "-b", "2"),
        ("POST", "/api/v1/admin/elect-master"),
        f"#ClusterName{T}DefaultCluster\n#BrokerName{T}broker-a\n#BrokerMasterAddr{T}10.0.0.2:30911\n"
        f"#MasterEpoch{T}4\n#SyncStateSetEpoch{T}6\n"
        f"{T}#Broker{T}1{T}10.0.0.1:30911\n{T}#Broker{T}2{T}10.0.0.2:30911\n{T}#Broker{T}3{T}10.0.0.3:30911\n",
        """\
elected

  ClusterName         DefaultCluster
  BrokerName          broker-a
  MasterBrokerId      2
  BrokerMasterAddr    10.0.0.2:30911
  MasterEpoch         4
  SyncStateSetEpoch   6
  SyncStateSet        2

brokers

  BrokerId   BrokerAddress    Master
 ────────────────────────────────────
  1          10.0.0.1:30911   false
  2          10.0.0.2:30911   true
  3          10.0.0.3:30911   false
""",
    ),
    "cleanBrokerMetadata": Golden(
        ("cleanBrokerMetadata", "-bn", "broker-a", "-b", "2;3", "-c", "DefaultCluster"),
        ("POST", "/api/v1/admin/clean-broker-metadata"),
        "clear broker broker-a metadata from controller success!\n",
        """\
broker metadata cleaned

  BrokerName          broker-a
  ClusterName         DefaultCluster
  BrokerIds           2;3
  CleanLivingBroker   false
  Result              SUCCESS
""",
    ),
    "getControllerConfig": Golden(
        ("getControllerConfig",),
        ("GET", "/api/v1/admin/config"),
        "============127.0.0.1:9770============\n"
        "controllerStorePath                               =  /data/controller\n"
        "electMasterMaxRetryCount                          =  3\n"
        "enableElectUncleanMaster                          =  false\n"
        "notifyBrokerRoleChanged                           =  true\n",
        """\
127.0.0.1:9770

  Key                        Value
 ─────────────────────────────────────────────
  controllerStorePath        /data/controller
  electMasterMaxRetryCount   3
  enableElectUncleanMaster   false
  notifyBrokerRoleChanged    true
""",
    ),
    "updateControllerConfig": Golden(
        ("updateControllerConfig", "-k", "enableElectUncleanMaster", "-v", "true"),
        ("PUT", "/api/v1/admin/config"),
        "update controller config success![127.0.0.1:9770]\nenableElectUncleanMaster : true\n",
        """\
controller config updated

  Key          enableElectUncleanMaster
  Value        true
  AnsweredBy   127.0.0.1:9770
""",
    ),
    "raft status": Golden(
        ("raft", "status"),
        ("GET", "/api/v1/raft/status"),
        f"answeredBy{T}127.0.0.1:9770\nnodeId{T}127.0.0.1:9880\ngroup{T}jRaft-Controller\nrole{T}leader\nterm{T}7\nleaderId{T}127.0.0.1:9880\n"
        f"commitIndex{T}1042\nappliedIndex{T}1042\nfirstLogIndex{T}901\nlastLogIndex{T}1042\n"
        f"lastSnapshotIndex{T}900\nlastSnapshotTerm{T}6\n"
        f"peer{T}127.0.0.1:9880{T}127.0.0.1:9770{T}voter\npeer{T}127.0.0.1:9881{T}127.0.0.1:9771{T}voter\n"
        f"peer{T}127.0.0.1:9882{T}127.0.0.1:9772{T}voter\n",
        """\
raft status of 127.0.0.1:9770 (leader)

  AnsweredBy          127.0.0.1:9770
  NodeId              127.0.0.1:9880
  Group               jRaft-Controller
  Role                leader
  Term                7
  LeaderId            127.0.0.1:9880
  CommitIndex         1042
  AppliedIndex        1042
  FirstLogIndex       901
  LastLogIndex        1042
  LastSnapshotIndex   900
  LastSnapshotTerm    6

peers

  Id               RaftAddress      HttpAddress      RemotingAddress   Voter
 ────────────────────────────────────────────────────────────────────────────
  127.0.0.1:9880   127.0.0.1:9880   127.0.0.1:9770   127.0.0.1:10770   true
  127.0.0.1:9881   127.0.0.1:9881   127.0.0.1:9771   127.0.0.1:10771   true
  127.0.0.1:9882   127.0.0.1:9882   127.0.0.1:9772   127.0.0.1:10772   true
""",
    ),
    "raft peers": Golden(
        ("raft", "peers"),
        ("GET", "/api/v1/raft/peers"),
        f"#Id{T}#Role{T}#MatchIndex{T}#LagEntries{T}#LastContactMs{T}#HttpAddress{T}#RemotingAddress\n"
        f"127.0.0.1:9880{T}leader{T}1042{T}0{T}0{T}127.0.0.1:9770{T}127.0.0.1:10770\n"
        f"127.0.0.1:9881{T}follower{T}1041{T}1{T}12{T}127.0.0.1:9771{T}127.0.0.1:10771\n"
        f"127.0.0.1:9882{T}follower{T}830{T}212{T}4810{T}127.0.0.1:9772{T}127.0.0.1:10772\n",
        """\
raft peers (as seen by 127.0.0.1:9770)

  Id               Role       MatchIndex   LagEntries   LastContactMs   HttpAddress      RemotingAddress
 ────────────────────────────────────────────────────────────────────────────────────────────────────────
  127.0.0.1:9880   leader     1042         0            0               127.0.0.1:9770   127.0.0.1:10770
  127.0.0.1:9881   follower   1041         1            12              127.0.0.1:9771   127.0.0.1:10771
  127.0.0.1:9882   follower   830          212          4810            127.0.0.1:9772   127.0.0.1:10772
""",
    ),
    "raft snapshot": Golden(
        ("raft", "snapshot"),
        ("POST", "/api/v1/raft/snapshot"),
        f"node{T}127.0.0.1:9770\ncreated{T}true\nindex{T}1042\nterm{T}7\nbytes{T}18234\ndurationMs{T}12.5\n",
        """\
snapshot

  Node         127.0.0.1:9770
  Created      true
  Index        1042
  Term         7
  Bytes        18234
  DurationMs   12.5
""",
    ),
    "raft snapshots": Golden(
        ("raft", "snapshots"),
        ("GET", "/api/v1/raft/snapshots"),
        f"#Index{T}#Term{T}#Bytes{T}#CreatedAt{T}#Voters{T}#Learners{T}#Files\n"
        f"1042{T}7{T}18234{T}2023-11-14T22:13:20.000Z{T}127.0.0.1:9880,127.0.0.1:9881,127.0.0.1:9882{T}{T}1\n"
        f"900{T}6{T}17002{T}2023-11-14T19:26:40.500Z{T}127.0.0.1:9880,127.0.0.1:9881,127.0.0.1:9882{T}{T}1\n",
        """\
snapshots on 127.0.0.1:9770

  Index   Term   Bytes   CreatedAt                  Voters                                         Learners   Files
 ───────────────────────────────────────────────────────────────────────────────────────────────────────────────────
  1042    7      18234   2023-11-14T22:13:20.000Z   127.0.0.1:9880,127.0.0.1:9881,127.0.0.1:9882              1
  900     6      17002   2023-11-14T19:26:40.500Z   127.0.0.1:9880,127.0.0.1:9881,127.0.0.1:9882              1
""",
    ),
    "raft transfer-leader": Golden(
        ("raft", "transfer-leader", "--to", RAFT[F1]),
        ("POST", "/api/v1/raft/transfer-leader"),
        f"previousLeaderId{T}127.0.0.1:9880\nleaderId{T}127.0.0.1:9881\nterm{T}8\ntargetLagEntries{T}1\n"
        f"durationMs{T}48.25\n",
        """\
leadership transferred

  PreviousLeaderId   127.0.0.1:9880
  LeaderId           127.0.0.1:9881
  Term               8
  TargetLagEntries   1
  DurationMs         48.25
""",
    ),
    "raft add-peer": Golden(
        ("raft", "add-peer", NEW, "--http-address", "127.0.0.1:9773"),
        ("POST", "/api/v1/raft/peers"),
        f"id{T}127.0.0.1:9883\nvoters{T}127.0.0.1:9880\nvoters{T}127.0.0.1:9881\nvoters{T}127.0.0.1:9882\n"
        f"voters{T}127.0.0.1:9883\nlearners{T}\n",
        """\
membership

  Id         127.0.0.1:9883
  Voters     127.0.0.1:9880, 127.0.0.1:9881, 127.0.0.1:9882, 127.0.0.1:9883
  Learners
""",
    ),
    "raft remove-peer": Golden(
        ("raft", "remove-peer", RAFT[F2]),
        ("DELETE", f"/api/v1/raft/peers/{RAFT[F2]}"),
        f"id{T}127.0.0.1:9882\nvoters{T}127.0.0.1:9880\nvoters{T}127.0.0.1:9881\nlearners{T}\n",
        """\
membership

  Id         127.0.0.1:9882
  Voters     127.0.0.1:9880, 127.0.0.1:9881
  Learners
""",
    ),
    "kv get": Golden(("kv", "get", "ns", "k"), ("GET", "/api/v1/kv/ns/k"), f"value{T}v1\n", "ns k\n\n  Value   v1\n"),
    "kv put": Golden(
        ("kv", "put", "ns", "k", "v2"), ("PUT", "/api/v1/kv/ns/k"), f"value{T}v2\n", "ns k\n\n  Value   v2\n"
    ),
    "kv delete": Golden(
        ("kv", "delete", "ns", "k"), ("DELETE", "/api/v1/kv/ns/k"), f"deleted{T}true\n", "ns k\n\n  Deleted   true\n"
    ),
    "kv cas": Golden(
        ("kv", "cas", "ns", "k", "v2", "--expect", "v1"),
        ("POST", "/api/v1/kv/ns/k/cas"),
        f"succeeded{T}true\nvalue{T}v2\n",
        "ns k\n\n  Succeeded   true\n  Value       v2\n",
    ),
}


@pytest.mark.parametrize("verb", GOLDEN)
def test_text_output_is_golden(leader: Cluster, verb: str) -> None:
    g = GOLDEN[verb]
    r = rmqctl("-o", "text", *g.args, "-a", L)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == g.text
    assert r.stderr == ""
    assert [(s.node, s.method, s.path) for s in leader.sent] == [(L, *g.route)]


@pytest.mark.parametrize("verb", GOLDEN)
def test_table_output_is_golden(leader: Cluster, verb: str) -> None:
    g = GOLDEN[verb]
    r = rmqctl("-o", "table", *g.args, "-a", L)
    assert r.exit_code == 0, r.stderr
    assert table(r) == g.table


@pytest.mark.parametrize("verb", GOLDEN)
def test_json_output_is_the_servers_envelope_with_raw_numbers(leader: Cluster, verb: str) -> None:
    g = GOLDEN[verb]
    r = rmqctl("-o", "json", *g.args, "-a", L)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    expected = LEADER_ROUTES[g.route]
    assert doc == ({L: expected} if verb == "getControllerConfig" else expected)
    assert r.stdout == json.dumps(doc, sort_keys=True, indent=2) + "\n"  # stable: sorted keys, 2-space indent


def test_the_verb_level_output_flag_works_like_the_global_one(leader: Cluster) -> None:
    r = rmqctl("kv", "get", "ns", "k", "-a", L, "-o", "json")
    assert json.loads(r.stdout) == KV_GET
    assert rmqctl("kv", "get", "ns", "k", "-a", L).stdout == f"value{T}v1\n"  # piped: text by default


def test_the_canned_answers_follow_the_api_models() -> None:
    """The fakes answer what the real routes answer (api/http/models.py), so the goldens test the real contract."""
    answers: dict[type[BaseModel], list[Any]] = {
        M.MetadataAnswer: [META],
        M.SyncStateDataAnswer: [SYNC],
        M.ElectMasterAnswer: [ELECT],
        M.EmptyAnswer: [EMPTY],
        M.ConfigAnswer: [CONFIG],
        M.RaftStatusAnswer: [STATUS],
        M.RaftPeersAnswer: [PEERS, FOLLOWER_PEERS],
        M.SnapshotTakenAnswer: [SNAP],
        M.SnapshotsAnswer: [SNAPS],
        M.TransferLeaderAnswer: [TRANSFER],
        M.MembershipAnswer: [ADDED, REMOVED],
        M.KvValueAnswer: [KV_GET, KV_PUT],
        M.KvDeleteAnswer: [KV_DELETE],
        M.KvCasAnswer: [KV_CAS],
    }
    for model, envelopes in answers.items():
        for e in envelopes:
            assert model.model_validate(e).model_dump(mode="json") == e, model.__name__
    M.Envelope[M.NotLeaderHeader, None].model_validate(not_leader(L))


# --- what is sent --------------------------------------------------------------------------------------------


def test_request_bodies_use_the_http_api_field_names(leader: Cluster) -> None:
    def sent(*args: str) -> Any:
        leader.sent.clear()
        r = rmqctl(*args, "-a", L)
        assert r.exit_code == 0, r.stderr
        return leader.sent[-1].json

    assert sent("getSyncStateSet", "-b", "broker-a", "-b", "broker-b,broker-a") == {
        "brokerNames": ["broker-a", "broker-b"]
    }
    assert sent("electMaster", "-c", "c1", "-bn", "broker-a", "-b", "2") == {
        "clusterName": "c1",
        "brokerName": "broker-a",
        "brokerId": 2,
    }
    assert sent("cleanBrokerMetadata", "-bn", "broker-a", "-c", "c1") == {
        "clusterName": "c1",
        "brokerName": "broker-a",
        "brokerControllerIdsToClean": None,
        "isCleanLivingBroker": False,
    }
    assert sent("cleanBrokerMetadata", "-bn", "broker-a", "-l", "-b", "1,2;") == {
        "clusterName": None,
        "brokerName": "broker-a",
        "brokerControllerIdsToClean": "1;2",
        "isCleanLivingBroker": True,
    }
    assert sent("updateControllerConfig", "-k", " electMasterMaxRetryCount ", "-v", " 5 ") == {
        "electMasterMaxRetryCount": "5"
    }
    assert sent("raft", "transfer-leader") == {}
    assert sent("raft", "transfer-leader", "--to", RAFT[F1], "--max-lag", "10") == {"to": RAFT[F1], "maxLagEntries": 10}
    assert sent(
        "raft",
        "add-peer",
        NEW,
        "--raft-address",
        "10.1.1.1:9883",
        "--http-address",
        "10.1.1.1:9773",
        "--remoting-address",
        "10.1.1.1:10773",
        "--catch-up-timeout",
        "2.5",
    ) == {
        "id": NEW,
        "raftAddress": "10.1.1.1:9883",
        "httpAddress": "10.1.1.1:9773",
        "remotingAddress": "10.1.1.1:10773",
        "timeoutMs": 2500,
    }
    assert sent("kv", "put", "ns", "k", "v2") == {"value": "v2"}
    assert sent("kv", "cas", "ns", "k", "v2", "--expect", "v1") == {"expect": "v1", "value": "v2"}
    assert sent("kv", "cas", "ns", "k", "v2", "--absent") == {"expect": None, "value": "v2"}


def test_kv_names_are_url_encoded(leader: Cluster) -> None:
    leader.nodes[L][("GET", "/api/v1/kv/my%20ns/a%2Fb%3F")] = KV_GET
    r = rmqctl("kv", "get", "my ns", "a/b?", "-a", L)
    assert r.exit_code == 0, r.stderr
    assert leader.sent[-1].path == "/api/v1/kv/my%20ns/a%2Fb%3F"


def test_the_token_is_sent_as_a_bearer_header_to_every_node_including_the_followed_leader(leader: Cluster) -> None:
    r = rmqctl("kv", "put", "ns", "k", "v2", "-a", f"{F1};{L}", "--token", "s3cret")
    assert r.exit_code == 0, r.stderr
    assert leader.nodes_asked() == [F1, L]
    assert all(s.headers["authorization"] == "Bearer s3cret" for s in leader.sent)
    leader.sent.clear()
    r = rmqctl("raft", "status", env={"RMQCTL_TOKEN": "from-env", "RMQCTL_ADDRESS": L})
    assert r.exit_code == 0, r.stderr
    assert leader.sent[0].headers["authorization"] == "Bearer from-env"
    leader.sent.clear()
    rmqctl("raft", "status", "-a", L)
    assert "authorization" not in leader.sent[0].headers


# --- leader following, failover, deadline -----------------------------------------------------------------


def test_a_2007_answer_is_followed_to_the_leader_it_names(leader: Cluster) -> None:
    r = rmqctl("electMaster", "-c", "c1", "-bn", "broker-a", "-b", "2", "-a", f"{F1};{F2}", "-v")
    assert r.exit_code == 0, r.stderr
    assert leader.nodes_asked() == [F1, L]  # straight to the leader F1 named, F2 never asked
    assert leader.time.sleeps == []
    assert f"rmqctl: {F1}: not the leader; following to {L}" in r.stderr
    assert f"rmqctl: answered by {L}: 0 SUCCESS" in r.stderr


def test_a_refused_connection_moves_on_to_the_next_address(leader: Cluster) -> None:
    del leader.nodes[F1]  # down
    r = rmqctl("-o", "text", "kv", "get", "ns", "k", "-a", f"{F1},{L}", "-v")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == f"value{T}v1\n"
    assert leader.nodes_asked() == [F1, L]
    assert leader.time.sleeps == []
    assert f"rmqctl: {F1}: ConnectError: [Errno 111] Connection refused" in r.stderr


def test_without_a_leader_anywhere_rounds_back_off_and_exit_3_at_the_deadline(cluster: Cluster) -> None:
    cluster.nodes = {L: {}, F1: {}}
    cluster.fallback = not_leader(None)  # an election is running: nobody knows the leader
    start = cluster.time.now
    r = rmqctl("kv", "put", "ns", "k", "v", "-a", f"{L};{F1}", "--timeout", "5")
    assert r.exit_code == 3
    assert r.stdout == ""
    assert r.stderr == (
        f"rmqctl: unreachable: no leader within 5s ({L}: not leader (leader: unknown); "
        f"{F1}: not leader (leader: unknown))\n"
    )
    assert cluster.time.sleeps == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, pytest.approx(0.5)]  # doubling, capped
    assert cluster.time.now - start == pytest.approx(5.0)  # the deadline, not a moment later
    assert cluster.nodes_asked() == [L, F1] * 8


def test_a_lost_majority_is_no_leader_naming_each_node(cluster: Cluster) -> None:
    cluster.nodes = {L: {}}  # F1 is down; L answers that it knows no leader
    cluster.fallback = not_leader(None)
    r = rmqctl("kv", "put", "ns", "k", "v", "-a", f"{L};{F1}", "--timeout", "5")
    assert r.exit_code == 3
    assert r.stderr == (
        f"rmqctl: unreachable: no leader within 5s ({L}: not leader (leader: unknown); "
        f"{F1}: ConnectError: [Errno 111] Connection refused)\n"
    )


def test_all_nodes_down_is_exit_3_at_once_naming_each_error(cluster: Cluster) -> None:
    # Every address refuses: nothing can change that within one invocation, so no backoff, no second round.
    start = cluster.time.now
    r = rmqctl("getControllerMetaData", "-a", f"{L};{F1}", "--timeout", "30")
    assert r.exit_code == 3
    assert r.stderr == (
        "rmqctl: unreachable: no controller could serve the request: every address refused the connection "
        f"({L}: ConnectError: [Errno 111] Connection refused; {F1}: ConnectError: [Errno 111] Connection refused)\n"
    )
    assert cluster.nodes_asked() == [L, F1]
    assert cluster.time.sleeps == [] and cluster.time.now == start


def test_a_refused_address_is_not_asked_again_while_the_others_are_waited_for(cluster: Cluster) -> None:
    # F1 is down; L is up but knows no leader (an election): rounds go on until the deadline, without F1.
    cluster.nodes = {L: {}}
    cluster.fallback = not_leader(None)
    r = rmqctl("kv", "put", "ns", "k", "v", "-a", f"{F1};{L}", "--timeout", "2")
    assert r.exit_code == 3
    assert r.stderr.startswith("rmqctl: unreachable: no leader within 2s (")
    assert cluster.nodes_asked()[:3] == [F1, L, L]
    assert cluster.nodes_asked().count(F1) == 1
    assert sum(cluster.time.sleeps) == pytest.approx(2.0)


def test_a_refused_leader_named_by_a_follower_is_not_asked_again(cluster: Cluster) -> None:
    # L was killed; F1 still names it. L refuses once; later rounds ask F1 only, which still names L.
    cluster.nodes = {F1: {}}
    cluster.fallback = not_leader(L)
    r = rmqctl("kv", "get", "ns", "k", "-a", F1, "--timeout", "1")
    assert r.exit_code == 3
    assert cluster.nodes_asked()[:3] == [F1, L, F1]
    assert cluster.nodes_asked().count(L) == 1


def test_the_global_timeout_is_in_the_help_and_sets_the_verbs_deadline(cluster: Cluster) -> None:
    r = rmqctl("--help")
    assert r.exit_code == 0
    assert "--timeout SECONDS" in r.stdout
    cluster.nodes = {L: {}}
    cluster.fallback = not_leader(None)
    r = rmqctl("--timeout", "3", "kv", "get", "ns", "k", "-a", L)
    assert r.exit_code == 3
    assert r.stderr.startswith("rmqctl: unreachable: no leader within 3s (")
    assert sum(cluster.time.sleeps) == pytest.approx(3.0)


def test_a_503_is_retried_and_an_election_in_progress_is_waited_out(cluster: Cluster) -> None:
    answers = iter(
        [
            httpx.Response(503, json={"error": "UNAVAILABLE", "message": "not committed within 3s"}),
            not_leader(None),
            KV_PUT,
        ]
    )
    cluster.nodes = {L: {("PUT", "/api/v1/kv/ns/k"): lambda _request: next(answers)}}
    r = rmqctl("kv", "put", "ns", "k", "v2", "-a", L, "-v")
    assert r.exit_code == 0, r.stderr
    assert cluster.nodes_asked() == [L, L, L]
    assert cluster.time.sleeps == [0.1, 0.2]
    assert f"{L}: HTTP 503: not committed within 3s" in r.stderr


def test_a_read_timeout_counts_as_unreachable_and_the_next_node_is_asked(leader: Cluster) -> None:
    leader.nodes[F1] = {("GET", "/api/v1/raft/status"): httpx.ReadTimeout("timed out")}
    r = rmqctl("raft", "status", "-a", f"{F1};{L}")
    assert r.exit_code == 0, r.stderr
    assert leader.nodes_asked() == [F1, L]


def test_followers_naming_each_other_do_not_loop(cluster: Cluster) -> None:
    cluster.nodes = {F1: {("GET", "/api/v1/kv/ns/k"): not_leader(F2)}, F2: {("GET", "/api/v1/kv/ns/k"): not_leader(F1)}}
    r = rmqctl("kv", "get", "ns", "k", "-a", F1, "--timeout", "0.25")
    assert r.exit_code == 3
    assert cluster.nodes_asked()[:2] == [F1, F2]
    assert cluster.time.sleeps == [0.1, pytest.approx(0.15)]  # the second backoff is cut at the deadline


def test_the_client_remembers_the_leader_between_requests(leader: Cluster) -> None:
    with ControllerClient([F1, F2], hooks=client_module.HOOKS) as c:
        assert c.get("/api/v1/kv/ns/k").node == L
        assert c.get("/api/v1/kv/ns/k").node == L
    assert leader.nodes_asked() == [F1, L, L]


def test_addresses_are_parsed_mqadmin_style() -> None:
    assert parse_addresses(" 127.0.0.1:9770; 127.0.0.1:9771 ,127.0.0.1:9770;") == [L, F1]
    assert parse_addresses("http://ctl-1.example:9770,https://[::1]:9771/") == [
        "http://ctl-1.example:9770",
        "https://[::1]:9771",
    ]
    for bad in ("", " ; ", "127.0.0.1", "h:99999", "ftp://h:1", "h :1x"):
        with pytest.raises(Exception, match="controller address"):
            parse_addresses(bad)


# --- exit codes ----------------------------------------------------------------------------------------------


def test_a_non_zero_code_exits_1_with_code_name_and_remark_on_stderr(leader: Cluster) -> None:
    failed = envelope(2012, ELECT["header"] | {"masterBrokerId": None}, remark="Failed to elect a new master")
    leader.nodes[L][("POST", "/api/v1/admin/elect-master")] = failed
    r = rmqctl("-o", "text", "electMaster", "-c", "c1", "-bn", "broker-a", "-b", "3", "-a", L)
    assert r.exit_code == 1
    assert r.stdout == ""
    assert r.stderr == (
        f"rmqctl: error: electMaster broker-a 3: {L} answered 2012 CONTROLLER_ELECT_MASTER_FAILED: "
        "Failed to elect a new master\n"
    )
    r = rmqctl("-o", "json", "electMaster", "-c", "c1", "-bn", "broker-a", "-b", "3", "-a", L)
    assert r.exit_code == 1
    assert json.loads(r.stdout) == failed  # scripts still get the envelope


def test_a_missing_kv_key_exits_1_not_found(leader: Cluster) -> None:
    leader.nodes[L][("GET", "/api/v1/kv/ns/gone")] = envelope(22, remark="No config item, Namespace: ns Key: gone")
    r = rmqctl("kv", "get", "ns", "gone", "-a", L)
    assert r.exit_code == 1
    assert r.stdout == ""
    assert r.stderr == "rmqctl: error: not found: ns gone (22 QUERY_NOT_FOUND)\n"


def test_a_failed_cas_exits_1_showing_the_current_value(leader: Cluster) -> None:
    leader.nodes[L][("POST", "/api/v1/kv/ns/k/cas")] = envelope(body={"succeeded": False, "value": "other"})
    r = rmqctl("kv", "cas", "ns", "k", "v2", "--expect", "v1", "-a", L)
    assert r.exit_code == 1
    assert r.stdout == f"succeeded{T}false\nvalue{T}other\n"
    assert r.stderr == "rmqctl: error: cas on ns k did not succeed: the current value is 'other'\n"
    leader.nodes[L][("POST", "/api/v1/kv/ns/k/cas")] = envelope(body={"succeeded": False, "value": None})
    r = rmqctl("-o", "json", "kv", "cas", "ns", "k", "v2", "--expect", "v1", "-a", L)
    assert r.exit_code == 1
    assert json.loads(r.stdout)["body"] == {"succeeded": False, "value": None}
    assert "the key is absent" in r.stderr


def test_a_refused_transfer_shows_the_servers_reason_and_exits_1(leader: Cluster) -> None:
    reason = f"{RAFT[F2]} lags by 212 entries (more than maxLagEntries=100); not transferring"
    leader.nodes[L][("POST", "/api/v1/raft/transfer-leader")] = httpx.Response(
        409, json={"error": "REFUSED", "message": reason}
    )
    r = rmqctl("raft", "transfer-leader", "--to", RAFT[F2], "-a", F1)
    assert r.exit_code == 1
    assert r.stderr == f"rmqctl: error: {L} answered HTTP 409 to POST /api/v1/raft/transfer-leader: {reason}\n"
    assert leader.nodes_asked() == [F1, L]  # found the leader first, and was not retried


def test_a_rejected_request_is_a_usage_error_naming_the_field(leader: Cluster) -> None:
    errors = [
        {
            "field": "enableElectUncleanMaster",
            "location": "body",
            "message": 'must be "true" or "false", got \'maybe\'',
            "type": "config_value",
        }
    ]
    leader.nodes[L][("PUT", "/api/v1/admin/config")] = httpx.Response(
        422, json={"error": "VALIDATION_ERROR", "message": "invalid request", "errors": errors}
    )
    r = rmqctl("updateControllerConfig", "-k", "enableElectUncleanMaster", "-v", "maybe", "-a", L)
    assert r.exit_code == 2
    assert r.stderr == (
        f"rmqctl: usage error: {L} rejected the request (HTTP 422): invalid request "
        '(enableElectUncleanMaster: must be "true" or "false", got \'maybe\')\n'
    )


def test_401_is_a_usage_error_about_the_token(leader: Cluster) -> None:
    leader.nodes[L][("GET", "/api/v1/raft/status")] = httpx.Response(
        401, json={"error": "UNAUTHORIZED", "message": "an admin bearer token is required"}
    )
    r = rmqctl("raft", "status", "-a", L)
    assert r.exit_code == 2
    assert "pass --token or set RMQCTL_TOKEN" in r.stderr
    r = rmqctl("raft", "status", "-a", L, "--token", "wrong")
    assert r.exit_code == 2
    assert "the token was refused: check --token / RMQCTL_TOKEN" in r.stderr


def test_other_http_errors_exit_1(leader: Cluster) -> None:
    leader.nodes[L][("DELETE", "/api/v1/raft/peers/127.0.0.1:9999")] = httpx.Response(
        404, json={"error": "PEER_NOT_FOUND", "message": "127.0.0.1:9999 is not a member"}
    )
    r = rmqctl("raft", "remove-peer", "127.0.0.1:9999", "-a", L)
    assert r.exit_code == 1
    assert "HTTP 404" in r.stderr and "127.0.0.1:9999 is not a member" in r.stderr
    leader.nodes[L][("GET", "/api/v1/raft/status")] = httpx.Response(500, text="Internal Server Error")
    assert rmqctl("raft", "status", "-a", L).exit_code == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("getControllerMetaData",), "no controller address: pass -a"),
        (("getControllerMetaData", "-a", "nohost"), "bad controller address 'nohost'"),
        (("cleanBrokerMetadata", "-a", L, "-bn", "broker-a"), "clusterName option can not be empty"),
        (("cleanBrokerMetadata", "-a", L, "-bn", "broker-a", "-c", "c1", "-b", "1;x;3"), "'x' is not a broker id"),
        (("cleanBrokerMetadata", "-a", L, "-bn", "broker-a", "-c", "c1", "-b", "1;;3"), "'' is not a broker id"),
        (("cleanBrokerMetadata", "-a", L, "-bn", "broker-a", "-c", "c1", "-b", "-1"), "'-1' is not a broker id"),
        (("cleanBrokerMetadata", "-a", L, "-bn", "broker-a", "-c", "c1", "-b", ""), "-b needs broker ids"),
        (
            ("cleanBrokerMetadata", "-a", L, "-bn", "broker-a", "-c", "c1", "-b", "9223372036854775808"),
            "is not a broker id",
        ),
        (("kv", "cas", "ns", "k", "v", "-a", L), "exactly one of --expect V or --absent"),
        (("kv", "cas", "ns", "k", "v", "--expect", "a", "--absent", "-a", L), "exactly one of --expect V or --absent"),
        (("getSyncStateSet", "-a", L, "-b", " , "), "-b needs at least one broker name"),
        (("getSyncStateSet", "-a", L, "-b", "x", "--count", "2"), "--count only makes sense with -i"),
    ],
)
def test_usage_errors_exit_2_before_anything_is_sent(leader: Cluster, args: tuple[str, ...], message: str) -> None:
    r = rmqctl(*args)
    assert r.exit_code == 2
    assert message in r.stderr
    assert leader.sent == []


def test_clickish_usage_errors_exit_2(leader: Cluster) -> None:
    assert rmqctl("electMaster", "-a", L, "-c", "c1", "-bn", "broker-a").exit_code == 2  # -b missing
    assert rmqctl("electMaster", "-a", L, "-c", "c1", "-bn", "broker-a", "-b", "two").exit_code == 2
    assert rmqctl("getControllerMetaData", "-a", L, "--timeout", "0").exit_code == 2
    assert leader.sent == []


def test_clean_ids_are_checked_client_side() -> None:
    assert parse_clean_ids("1;2;3") == "1;2;3"
    assert parse_clean_ids(" 1, 2 ;3;") == "1;2;3"
    assert parse_clean_ids("007") == "7"
    for bad in ("a", "1;a", "1.5", "1;;2", "", ";", "+1"):
        with pytest.raises(Exception, match="broker id"):
            parse_clean_ids(bad)


# --- verb specifics ------------------------------------------------------------------------------------------


def test_get_sync_state_set_loops_with_i_and_count_without_waiting(leader: Cluster) -> None:
    r = rmqctl("-o", "json", "getSyncStateSet", "-a", L, "-b", "broker-a,broker-b", "-i", "--count", "3")
    assert r.exit_code == 0, r.stderr
    assert [json.loads(line) for line in r.stdout.splitlines()] == [SYNC] * 3  # NDJSON, one envelope a round
    assert leader.time.sleeps == [3.0, 3.0]  # -i without a value: 3 s, as mqadmin
    leader.time.sleeps.clear()
    r = rmqctl("-o", "text", "getSyncStateSet", "-a", L, "-b", "broker-a,broker-b", "-i", "5", "--count", "2")
    assert r.stdout == GOLDEN["getSyncStateSet"].text * 2
    assert leader.time.sleeps == [5.0]


def test_get_sync_state_set_of_an_unknown_broker_set_prints_the_rest_and_exits_1(leader: Cluster) -> None:
    r = rmqctl("getSyncStateSet", "-a", L, "-b", "broker-a,broker-b,broker-x")
    assert r.exit_code == 1
    assert r.stdout == GOLDEN["getSyncStateSet"].text
    assert r.stderr == "rmqctl: error: no metadata for broker set(s): broker-x\n"


def test_get_sync_state_set_of_a_cluster_or_of_all_lists_every_broker_set(leader: Cluster) -> None:
    leader.nodes[L][("GET", "/api/v1/admin/broker-sets?clusterName=DefaultCluster")] = SYNC
    leader.nodes[L][("GET", "/api/v1/admin/broker-sets")] = SYNC
    leader.nodes[L][("GET", "/api/v1/admin/broker-sets?clusterName=nope")] = envelope(body={"replicasInfoTable": {}})
    r = rmqctl("getSyncStateSet", "-a", f"{F1},{L}", "-c", "DefaultCluster")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == GOLDEN["getSyncStateSet"].text
    assert [(s.node, s.path) for s in leader.sent] == [
        (F1, "/api/v1/admin/broker-sets?clusterName=DefaultCluster"),
        (L, "/api/v1/admin/broker-sets?clusterName=DefaultCluster"),
    ]
    assert rmqctl("getSyncStateSet", "-a", L, "--all").stdout == GOLDEN["getSyncStateSet"].text
    r = rmqctl("getSyncStateSet", "-a", L, "-c", "nope")
    assert (r.exit_code, r.stdout, r.stderr) == (1, "", "rmqctl: error: no broker set in cluster nope\n")
    for args in (("-c", "c1", "-b", "broker-a"), ("--all", "-c", "c1"), ()):
        r = rmqctl("getSyncStateSet", "-a", L, *args)
        assert (r.exit_code, r.stderr) == (
            2,
            "rmqctl: usage error: pass one of -b NAME[,NAME...], -c CLUSTER or --all\n",
        )


def test_get_controller_config_asks_every_listed_node(leader: Cluster) -> None:
    leader.nodes[F1][("GET", "/api/v1/admin/config")] = envelope(body={"electMasterMaxRetryCount": "3"})
    r = rmqctl("getControllerConfig", "-a", f"{L};{F1}")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == GOLDEN["getControllerConfig"].text + (
        "============127.0.0.1:9771============\nelectMasterMaxRetryCount                          =  3\n"
    )
    assert leader.nodes_asked() == [L, F1]


def test_get_controller_config_with_a_node_down_prints_the_others_and_exits_3(leader: Cluster) -> None:
    r = rmqctl("getControllerConfig", "-a", f"{F2};{L}")  # F2 answers 2007 to everything: not followed here
    assert r.exit_code == 1
    assert r.stdout == GOLDEN["getControllerConfig"].text
    assert f"{F2} answered 2007 CONTROLLER_NOT_LEADER" in r.stderr
    del leader.nodes[F2]
    r = rmqctl("getControllerConfig", "-a", f"{F2};{L}")
    assert r.exit_code == 3
    assert r.stdout == GOLDEN["getControllerConfig"].text
    assert leader.time.sleeps == []  # one try per node: a dead node does not hold the others up


def test_raft_peers_asks_the_leader_when_a_follower_answers(leader: Cluster) -> None:
    leader.nodes[F1][("GET", "/api/v1/raft/peers")] = FOLLOWER_PEERS
    r = rmqctl("-o", "text", "raft", "peers", "-a", F1)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == GOLDEN["raft peers"].text
    assert leader.nodes_asked() == [F1, L]
    leader.sent.clear()
    r = rmqctl("-o", "text", "raft", "peers", "-a", F1, "--local")
    assert (
        r.stdout.splitlines()[2] == f"127.0.0.1:9881{T}follower{T}null{T}null{T}null{T}127.0.0.1:9771{T}127.0.0.1:10771"
    )
    assert leader.nodes_asked() == [F1]


def follower_status(node: str, leader_id: str | None) -> dict[str, Any]:
    return envelope(body={**STATUS["body"], "nodeId": RAFT[node], "role": "follower", "leaderId": leader_id})


def test_raft_status_leader_asks_the_leader(leader: Cluster) -> None:
    leader.nodes[F1][("GET", "/api/v1/raft/status")] = follower_status(F1, RAFT[L])
    assert f"role{T}follower" in rmqctl("raft", "status", "-a", F1).stdout
    leader.sent.clear()
    r = rmqctl("raft", "status", "-a", F1, "--leader")
    assert r.stdout.splitlines()[:4] == [
        f"answeredBy{T}{L}",
        f"nodeId{T}{RAFT[L]}",
        f"group{T}jRaft-Controller",
        f"role{T}leader",
    ]
    assert [(s.node, s.path) for s in leader.sent] == [(F1, "/api/v1/raft/status"), (L, "/api/v1/raft/status")]


def test_raft_status_with_several_addresses_asks_the_leader_unless_told_first(leader: Cluster) -> None:
    leader.nodes[F1][("GET", "/api/v1/raft/status")] = follower_status(F1, RAFT[L])
    r = rmqctl("raft", "status", "-a", f"{F1},{L}")
    assert r.exit_code == 0, r.stderr
    assert f"answeredBy{T}{L}" in r.stdout and f"role{T}leader" in r.stdout
    leader.sent.clear()
    r = rmqctl("-o", "table", "raft", "status", "-a", f"{F1},{L}", "--first")
    assert table(r).startswith(f"raft status of {F1} (follower)\n\n  AnsweredBy          {F1}\n")
    assert leader.nodes_asked() == [F1]


def test_raft_status_leader_moves_past_a_killed_leader_at_once(cluster: Cluster) -> None:
    # L was SIGKILLed (refuses connections); F1 has not noticed yet and still names it; F2 won the election.
    cluster.nodes = {
        F1: {("GET", "/api/v1/raft/status"): follower_status(F1, RAFT[L])},
        F2: {
            ("GET", "/api/v1/raft/status"): envelope(
                body={**STATUS["body"], "nodeId": RAFT[F2], "leaderId": RAFT[F2], "term": 8}
            )
        },
    }
    start = cluster.time.now
    r = rmqctl("raft", "status", "-a", f"{L},{F1},{F2}", "--leader")
    assert r.exit_code == 0, r.stderr
    assert f"answeredBy{T}{F2}" in r.stdout and f"role{T}leader" in r.stdout
    assert cluster.nodes_asked() == [L, F1, F2]  # the dead L once, not again when F1 names it
    assert cluster.time.sleeps == [] and cluster.time.now == start


def test_raft_status_leader_waits_out_an_election_in_rounds_not_on_one_dead_address(cluster: Cluster) -> None:
    elected = iter(
        [follower_status(F2, None), envelope(body={**STATUS["body"], "nodeId": RAFT[F2], "leaderId": RAFT[F2]})]
    )
    cluster.nodes = {
        F1: {("GET", "/api/v1/raft/status"): follower_status(F1, RAFT[L])},
        F2: {("GET", "/api/v1/raft/status"): lambda _request: next(elected)},
    }
    r = rmqctl("raft", "status", "-a", f"{L},{F1},{F2}")
    assert r.exit_code == 0, r.stderr
    assert f"answeredBy{T}{F2}" in r.stdout
    assert cluster.time.sleeps == [0.1]  # one backoff between two rounds, then the new leader answers
    assert cluster.nodes_asked() == [L, F1, F2, F1, F2]  # the dead L refused: not asked in the second round


def test_a_connection_attempt_gives_up_after_the_connect_timeout(leader: Cluster) -> None:
    seen: list[dict[str, float]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["timeout"])
        return leader.handler(request)

    hooks = Hooks(transport=httpx.MockTransport(handler), clock=leader.time.clock, sleep=leader.time.sleep)
    with ControllerClient([L], timeout_s=30, hooks=hooks) as c:
        c.get("/api/v1/raft/status")
    assert seen[0]["connect"] == client_module.CONNECT_TIMEOUT_S < 30 == seen[0]["read"]


def test_raft_peers_skips_a_dead_leader_a_follower_still_names(cluster: Cluster) -> None:
    cluster.nodes = {
        F1: {("GET", "/api/v1/raft/peers"): FOLLOWER_PEERS},
        F2: {("GET", "/api/v1/raft/peers"): FOLLOWER_PEERS},
    }
    r = rmqctl("raft", "peers", "-a", f"{F1},{F2}", "--timeout", "2")
    assert r.exit_code == 3  # nobody can give the leader's view; the dead L is asked once, then skipped
    assert cluster.nodes_asked()[:4] == [F1, L, F2, F1]
    assert cluster.nodes_asked().count(L) == 1
    assert sum(cluster.time.sleeps) == pytest.approx(2.0)


def test_raft_snapshot_all_asks_every_member(leader: Cluster) -> None:
    leader.nodes[F1][("POST", "/api/v1/raft/snapshot")] = envelope(body={**SNAP["body"], "index": 1041})
    del leader.nodes[F2]  # down
    r = rmqctl("-o", "text", "raft", "snapshot", "--all", "-a", L)
    assert r.exit_code == 3
    assert r.stdout == (
        f"#Node{T}#Created{T}#Index{T}#Term{T}#Bytes{T}#DurationMs{T}#Remark\n"
        f"{L}{T}true{T}1042{T}7{T}18234{T}12.5{T}null\n{F1}{T}true{T}1041{T}7{T}18234{T}12.5{T}null\n"
    )
    assert r.stderr.startswith(
        f"rmqctl: unreachable: no controller could serve the request: every address refused the connection "
        f"({F2}: ConnectError"
    )
    assert leader.nodes_asked() == [L, L, F1, F2]  # the status, then one request per member, no retry round
    assert leader.time.sleeps == []


def test_table_output_off_a_terminal_does_not_wrap_long_values(leader: Cluster) -> None:
    long = "x" * 300
    leader.nodes[L][("GET", "/api/v1/kv/ns/k")] = envelope(body={"value": long})
    r = rmqctl("-o", "table", "kv", "get", "ns", "k", "-a", L, env={"COLUMNS": None})  # piped, no COLUMNS
    assert f"Value   {long}" in r.stdout
    narrow = rmqctl("-o", "table", "kv", "get", "ns", "k", "-a", L, env={"COLUMNS": "80"})  # as told
    assert long not in narrow.stdout and long[:60] in narrow.stdout


def test_raft_snapshot_shows_the_servers_remark(leader: Cluster) -> None:
    leader.nodes[L][("POST", "/api/v1/raft/snapshot")] = envelope(
        body={**SNAP["body"], "created": False}, remark="nothing applied since snapshot 1042: answering it"
    )
    r = rmqctl("raft", "snapshot", "-a", L)
    assert r.exit_code == 0
    assert r.stdout.splitlines()[1:2] == [f"created{T}false"]
    assert r.stdout.splitlines()[-1] == f"remark{T}nothing applied since snapshot 1042: answering it"


def test_aliases_run_the_same_verbs(leader: Cluster) -> None:
    same = [
        (("getControllerMetaData",), ("controller", "metadata")),
        (("getControllerConfig",), ("controller", "config", "get")),
        (
            ("updateControllerConfig", "-k", "notifyBrokerRoleChanged", "-v", "false"),
            ("controller", "config", "set", "-k", "notifyBrokerRoleChanged", "-v", "false"),
        ),
        (("getSyncStateSet", "-b", "broker-a"), ("sync-state-set", "-b", "broker-a")),
        (
            ("electMaster", "-c", "c", "-bn", "broker-a", "-b", "2"),
            ("elect-master", "-c", "c", "-bn", "broker-a", "-b", "2"),
        ),
        (("cleanBrokerMetadata", "-bn", "broker-a", "-l"), ("clean-broker-metadata", "-bn", "broker-a", "-l")),
    ]
    for mqadmin, alias in same:
        leader.sent.clear()
        a = rmqctl(*mqadmin, "-a", L)
        b = rmqctl(*alias, "--controllerAddress", L)
        assert (a.exit_code, a.stdout) == (b.exit_code, b.stdout) == (0, a.stdout), alias
        assert [s.json for s in leader.sent[:1]] == [s.json for s in leader.sent[1:]]


def test_update_controller_config_keeps_mqadmins_v_for_the_value(leader: Cluster) -> None:
    r = rmqctl("updateControllerConfig", "-a", F1, "-k", "electMasterMaxRetryCount", "-v", "4", "--verbose")
    assert r.exit_code == 0
    assert leader.sent[-1].json == {"electMasterMaxRetryCount": "4"}
    assert f"rmqctl: answered by {L}" in r.stderr
    assert r.stdout == f"update controller config success![{L}]\nelectMasterMaxRetryCount : 4\n"


def test_register_is_idempotent() -> None:
    before = dict(main.commands)
    register(main)
    assert main.commands == before


def test_transfer_and_membership_changes_are_not_resent_when_their_outcome_is_unknown(leader: Cluster) -> None:
    leader.nodes[L][("POST", "/api/v1/raft/transfer-leader")] = httpx.Response(
        503, json={"error": "UNAVAILABLE", "message": f"leadership did not move to {RAFT[F1]} in time"}
    )
    r = rmqctl("raft", "transfer-leader", "-a", f"{L};{F1}")
    assert r.exit_code == 3
    assert r.stderr == (
        f"rmqctl: unreachable: {L} answered HTTP 503: leadership did not move to {RAFT[F1]} in time; "
        "the outcome is unknown, not resending\n"
    )
    assert leader.nodes_asked() == [L]
    leader.sent.clear()
    leader.nodes[L][("POST", "/api/v1/raft/peers")] = httpx.ReadTimeout("timed out")
    r = rmqctl("raft", "add-peer", NEW, "-a", f"{L};{F1}")
    assert r.exit_code == 3
    assert "no answer (ReadTimeout: timed out); the outcome is unknown, not resending" in r.stderr
    assert leader.nodes_asked() == [L]


def test_an_error_message_that_names_the_field_is_not_repeated(leader: Cluster) -> None:
    message = 'enableElectUncleanMaster: must be "true" or "false", got \'maybe\''
    errors = [
        {
            "field": "enableElectUncleanMaster",
            "location": "body",
            "message": message.split(": ", 1)[1],
            "type": "config_value",
        }
    ]
    leader.nodes[L][("PUT", "/api/v1/admin/config")] = httpx.Response(
        422, json={"error": "VALIDATION_ERROR", "message": message, "errors": errors}
    )
    r = rmqctl("updateControllerConfig", "-k", "enableElectUncleanMaster", "-v", "maybe", "-a", L)
    assert r.exit_code == 2
    assert r.stderr == f"rmqctl: usage error: {L} rejected the request (HTTP 422): {message}\n"


@pytest.mark.parametrize(
    ("args", "route"),
    [
        (("kv", "cas", "ns", "k", "v2", "--expect", "v1"), ("POST", "/api/v1/kv/ns/k/cas")),
        (("electMaster", "-c", "c", "-bn", "b", "-b", "1"), ("POST", "/api/v1/admin/elect-master")),
        (("cleanBrokerMetadata", "-bn", "b", "-c", "c"), ("POST", "/api/v1/admin/clean-broker-metadata")),
    ],
)
def test_non_idempotent_writes_are_not_resent_after_an_unknown_outcome(
    leader: Cluster, args: tuple[str, ...], route: tuple[str, str]
) -> None:
    leader.nodes[L][route] = httpx.Response(503, json={"error": "UNAVAILABLE", "message": "not committed in time"})
    r = rmqctl(*args, "-a", f"{L};{F1}")
    assert r.exit_code == 3
    assert "the outcome is unknown, not resending" in r.stderr
    assert leader.nodes_asked() == [L]


def test_the_address_and_token_may_also_come_before_the_verb(leader: Cluster) -> None:
    r = rmqctl("-a", L, "--token", "t0k", "raft", "status")
    assert r.exit_code == 0 and f"role{T}leader" in r.stdout
    assert leader.sent[-1].node == L and leader.sent[-1].headers.get("authorization") == "Bearer t0k"


def test_a_refused_connection_on_a_real_socket_fails_well_before_the_deadline() -> None:
    # No fake transport: the real HTTP client against a port that was bound and closed, so nothing listens
    # and the kernel refuses the connection. Before, the client went round until --timeout (here 30 s).
    (port,) = free_ports(1)  # nothing listens on it
    start = time.monotonic()
    r = rmqctl("-a", f"127.0.0.1:{port}", "--timeout", "30", "raft", "status")
    elapsed = time.monotonic() - start
    assert r.exit_code == 3, r.stderr
    assert "every address refused the connection" in r.stderr and f"127.0.0.1:{port}" in r.stderr
    assert elapsed < 5, f"took {elapsed:.1f}s with --timeout 30"


# --- -o json never contradicts the exit code ------------------------------------------------------------------


def json_documents(stdout: str) -> list[Any]:
    """Every JSON document on stdout (indented documents one after another, or NDJSON lines)."""
    decoder, docs, at = json.JSONDecoder(), [], 0
    while at < len(stdout):
        if stdout[at].isspace():
            at += 1
            continue
        doc, at = decoder.raw_decode(stdout, at)
        docs.append(doc)
    return docs


def envelope_codes(doc: Any) -> list[int]:
    """The codes of an envelope, or of each node's envelope in a per-node map."""
    if isinstance(doc, dict) and "codeName" in doc:
        return [doc["code"]]
    return [code for value in doc.values() for code in envelope_codes(value)] if isinstance(doc, dict) else []


def test_json_of_an_unknown_broker_set_carries_the_failure_code_not_success(leader: Cluster) -> None:
    leader.nodes[L][("POST", "/api/v1/admin/sync-state-data")] = envelope(body={"replicasInfoTable": {}})
    r = rmqctl("-o", "json", "getSyncStateSet", "-b", "no-such-broker", "-a", L)
    assert r.exit_code == 1
    assert json.loads(r.stdout) == {
        "code": 2008,
        "codeName": "CONTROLLER_BROKER_METADATA_NOT_EXIST",
        "remark": "no metadata for broker set(s): no-such-broker",
        "header": None,
        "body": {"replicasInfoTable": {}},  # the server's answer, as it came
    }
    assert r.stderr == "rmqctl: error: no metadata for broker set(s): no-such-broker\n"


def test_json_of_a_failed_cas_carries_a_failure_code(leader: Cluster) -> None:
    leader.nodes[L][("POST", "/api/v1/kv/ns/k/cas")] = envelope(body={"succeeded": False, "value": "other"})
    r = rmqctl("-o", "json", "kv", "cas", "ns", "k", "v2", "--expect", "v1", "-a", L)
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert (doc["code"], doc["codeName"]) == (1, "SYSTEM_ERROR")
    assert doc["remark"] == "cas on ns k did not succeed: the current value is 'other'"
    assert doc["body"] == {"succeeded": False, "value": "other"}


def test_json_per_node_maps_name_the_nodes_that_could_not_be_asked(leader: Cluster) -> None:
    del leader.nodes[F2]
    r = rmqctl("-o", "json", "getControllerConfig", "-a", f"{L};{F2}")
    assert r.exit_code == 3
    doc = json.loads(r.stdout)
    assert doc[L] == CONFIG
    assert (doc[F2]["code"], doc[F2]["codeName"]) == (-1, "RMQCTL_UNREACHABLE")
    assert "every address refused the connection" in doc[F2]["remark"]
    r = rmqctl("-o", "json", "raft", "snapshot", "--all", "-a", L)
    assert r.exit_code == 3
    doc = json.loads(r.stdout)
    assert list(doc) == [L, F1, F2] and (doc[L]["code"], doc[F2]["code"]) == (0, -1)


@pytest.mark.parametrize(
    "case",
    [
        "unknown broker set",
        "one of two broker sets unknown",
        "empty cluster",
        "failed cas",
        "missing key",
        "refused election",
        "refused transfer",
        "config with a node down",
        "snapshot --all with a node down",
        "everything down",
        "no leader",
    ],
)
def test_every_verb_that_exits_non_zero_prints_no_success_in_json(leader: Cluster, case: str) -> None:
    routes = leader.nodes[L]
    routes[("POST", "/api/v1/admin/sync-state-data")] = lambda request: envelope(
        body={
            "replicasInfoTable": {
                k: v
                for k, v in SYNC["body"]["replicasInfoTable"].items()
                if k in json.loads(request.content)["brokerNames"]
            }
        }
    )
    routes[("GET", "/api/v1/admin/broker-sets?clusterName=nope")] = envelope(body={"replicasInfoTable": {}})
    routes[("POST", "/api/v1/kv/ns/k/cas")] = envelope(body={"succeeded": False, "value": "other"})
    routes[("GET", "/api/v1/kv/ns/gone")] = envelope(22, remark="No config item")
    routes[("POST", "/api/v1/admin/elect-master")] = envelope(2012, remark="Failed to elect a new master")
    routes[("POST", "/api/v1/raft/transfer-leader")] = httpx.Response(409, json={"error": "REFUSED", "message": "lags"})
    args: dict[str, tuple[str, ...]] = {
        "unknown broker set": ("getSyncStateSet", "-b", "no-such-broker"),
        "one of two broker sets unknown": ("getSyncStateSet", "-b", "broker-a,no-such-broker"),
        "empty cluster": ("getSyncStateSet", "-c", "nope"),
        "failed cas": ("kv", "cas", "ns", "k", "v2", "--expect", "v1"),
        "missing key": ("kv", "get", "ns", "gone"),
        "refused election": ("electMaster", "-c", "c1", "-bn", "broker-a", "-b", "3"),
        "refused transfer": ("raft", "transfer-leader"),
        "config with a node down": ("getControllerConfig", "-a", f"{L};127.0.0.1:9"),
        "snapshot --all with a node down": ("raft", "snapshot", "--all"),
        "everything down": ("getControllerMetaData", "-a", "127.0.0.1:9"),
        "no leader": ("kv", "get", "ns", "k", "-a", F1, "--timeout", "1"),
    }
    if case == "snapshot --all with a node down":
        del leader.nodes[F2]
    if case == "no leader":
        leader.fallback = not_leader(None)
    r = rmqctl("-o", "json", *args[case], *(() if "-a" in args[case] else ("-a", L)))
    assert r.exit_code != 0, r.stdout
    for doc in json_documents(r.stdout):
        codes = envelope_codes(doc)
        assert codes and any(code != 0 for code in codes), doc
        if isinstance(doc, dict) and "codeName" in doc:
            assert doc["code"] != 0 and doc["codeName"] != "SUCCESS", doc
