"""Harness of the API tests: real ControllerServices (one node, or groups in one event loop, data under tmp
dirs) behind create_app, talked to in-process through httpx's ASGI transport. Raft runs on
`raft.testing.group.InProcessGroup` parts (in-memory log, meta store and transport; one group per root dir,
so a service rebuilt on the same options finds its log); the remoting and HTTP listeners stay real."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from api.http import models as M
from api.http.app import create_app
from api.http.hotpath import HeartbeatPath
from api.remoting.server import RemotingServer
from api.service import ControllerService, ServiceOptions
from api.service.settings import ApiSettings
from raft.node.factory import open_data_dir
from raft.options import LogStorageOptions, NodeOptions, RaftOptions
from raft.testing.cluster import free_ports
from raft.testing.group import InProcessGroup

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SOLO_RAFT = RaftOptions(election_timeout_ms=50)  # one voter: no contention, elected within 100 ms
GROUP_RAFT = RaftOptions(election_timeout_ms=300)
NEVER_MS = 10**9  # scans only when a test calls scan_once()
LOCAL_CONFIG = {
    "controllerStorePath": "/var/lib/controller",
    "scanNotActiveBrokerInterval": "5000",
    "controllerAdminToken": "****",
}
SETTINGS = ApiSettings(
    admin_token=TOKEN,
    max_body_bytes=8192,
    local_config=LOCAL_CONFIG,
    config_black_list=("configBlackList", "configStorePath", "jRaftServerId"),
)


class FakeClock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@dataclass
class Node:
    """One service, its app and an HTTP client on it."""

    service: ControllerService
    client: httpx.AsyncClient
    app: Any

    @property
    def id(self) -> str:
        return self.service.id

    def last_index(self) -> int:
        return int(self.service.node.status().last_index)

    async def call(self, method: str, path: str, *, token: bool = False, **kw: Any) -> httpx.Response:
        headers = {**(AUTH if token else {}), **kw.pop("headers", {})}
        return await self.client.request(method, path, headers=headers, **kw)

    async def ok(self, method: str, path: str, *, token: bool = False, code: int = 0, **kw: Any) -> dict[str, Any]:
        """The envelope of a 200 answer, checking its RocketMQ code."""
        r = await self.call(method, path, token=token, **kw)
        assert r.status_code == 200, r.text
        env = r.json()
        assert env["code"] == code, env
        return env


def http_address(raft_id: str) -> str:
    """Where the tests pretend a node serves HTTP (never bound: the tests talk through ASGI)."""
    return "127.0.0.2:" + raft_id.rsplit(":", 1)[1]


def service_options(
    root: Path,
    ports: list[int],
    me: int,
    raft: RaftOptions,
    voters: tuple[str, ...] = (),
    **kw: Any,
) -> ServiceOptions:
    ids = [f"127.0.0.1:{p}" for p in ports]
    http = {i: http_address(i) for i in ids}
    node = NodeOptions(
        ids[me],
        str(root / f"n{me}"),
        {i: ("127.0.0.1", p) for i, p in zip(ids, ports, strict=True)},
        b"cluster-secret",
        voters=voters,
        http_addresses=http,
        remoting_addresses=kw.pop("remoting_addresses", {}),  # the node's, as cli.config.to_node_options sets them
        raft=raft,
        log=kw.pop("log", LogStorageOptions()),
    )
    kw.setdefault("scan_interval_ms", NEVER_MS)
    kw.setdefault("first_scan_delay_ms", NEVER_MS)
    return ServiceOptions(node, **kw)


_GROUPS: dict[Path, InProcessGroup] = {}


def in_process(opts: ServiceOptions) -> InProcessGroup:
    """The in-process Raft group of the services whose data dirs share `opts`' root (kept across restarts)."""
    root = Path(opts.node.data_dir).parent
    return _GROUPS.setdefault(root, InProcessGroup())


def build(
    opts: ServiceOptions,
    settings: ApiSettings | None = None,
    clock: Callable[[], int] | None = None,
    on_disk: bool = False,
) -> Node:
    """A service on the in-process Raft group of its root, or with `on_disk` on the real data directory (WAL,
    meta, snapshots, TCP transport: what tests/testdata/cluster_data.py hands the audit)."""
    parts = open_data_dir if on_disk else in_process(opts).parts
    if clock is not None:
        service = ControllerService(opts, clock, open_parts=parts)
    else:
        service = ControllerService(opts, open_parts=parts)
    app = create_app(service, settings if settings is not None else SETTINGS)
    # What the daemon serves (api.server): the heartbeat's lean path in front of the FastAPI app.
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=HeartbeatPath(app)), base_url="http://controller.test")
    return Node(service, client, app)


@asynccontextmanager
async def running(nodes: list[Node]) -> AsyncIterator[list[Node]]:
    for n in nodes:
        await n.service.start()
    try:
        yield nodes
    finally:
        for n in nodes:
            await n.client.aclose()
            await n.service.stop(transfer=False)


@asynccontextmanager
async def solo(
    root: Path,
    settings: ApiSettings | None = None,
    clock: Callable[[], int] | None = None,
    on_disk: bool = False,
    **kw: Any,
) -> AsyncIterator[Node]:
    """A started one-node group that leads, with an applied entry of its term (`on_disk`: see build)."""
    node = build(service_options(root, free_ports(1), 0, SOLO_RAFT, **kw), settings, clock, on_disk)
    async with running([node]):
        await node.service.node.wait_for_leader(10)
        yield node


@asynccontextmanager
async def group(
    root: Path, n: int = 3, raft: RaftOptions = GROUP_RAFT, on_disk: bool = False, **kw: Any
) -> AsyncIterator[list[Node]]:
    """A started n-node group whose every node knows the leader (`on_disk`: real data directories, see build)."""
    ports = free_ports(n)
    nodes = [build(service_options(root, ports, i, raft, **kw), on_disk=on_disk) for i in range(n)]
    for node in nodes:
        node.service.peer_features = features_via(nodes)
    async with running(nodes):
        await settled(nodes)
        yield nodes


@dataclass
class RemotingGroup:
    """Three in-process nodes, each serving RocketMQ remoting (`remoting_group`)."""

    nodes: list[Node]
    servers: list[RemotingServer]
    remoting: dict[str, str]  # raft id -> its remoting address (jRaftControllerRPCAddr)
    rports: list[int]  # the nodes' remoting ports, in node order


@asynccontextmanager
async def remoting_group(root: Path, settings: ApiSettings = SETTINGS, **kw: Any) -> AsyncIterator[RemotingGroup]:
    """A started 3-node group whose nodes know each other's remoting addresses, a RemotingServer on each (started
    before the nodes, as controllerd does), stopped however the test ends; `kw` goes to service_options. Not
    settled: the test waits for the leader it needs."""
    ports, rports = free_ports(3), free_ports(3)
    ids = [f"127.0.0.1:{p}" for p in ports]
    remoting = {i: f"127.0.0.1:{p}" for i, p in zip(ids, rports, strict=True)}
    nodes = [build(service_options(root, ports, i, GROUP_RAFT, remoting_addresses=remoting, **kw)) for i in range(3)]
    servers = [RemotingServer(n.service, settings, ("127.0.0.1", p)) for n, p in zip(nodes, rports, strict=True)]
    for s in servers:
        await s.start()
    try:
        async with running(nodes):
            yield RemotingGroup(nodes, servers, remoting, rports)
    finally:
        for s in servers:
            await s.stop()


def features_via(nodes: list[Node]) -> Callable[[str], Awaitable[int | None]]:
    """The service's peer_features through each member's in-process app (what api.http.routes.raft.feature_fetcher
    does over the network): a member's GET /api/v1/raft/features; None for one not running."""
    by_id = {n.id: n for n in nodes}

    async def fetch(peer: str) -> int | None:
        node = by_id.get(peer)
        if node is None or not node.service.started or node.service.stopping:
            return None
        env = await node.ok("GET", "/api/v1/raft/features", token=True)
        return int(env["body"]["maxLevel"])

    return fetch


def joiner(root: Path, members: list[Node]) -> Node:
    """A new node for `members`' group (not started): it knows them, they learn of it by POST /raft/peers.
    Its data dir is under `root`, its Raft on the members' in-process group."""
    ports = [int(n.id.rsplit(":", 1)[1]) for n in members] + free_ports(1)
    voters = tuple(n.id for n in members)
    opts = service_options(root, ports, len(members), GROUP_RAFT, voters=voters)
    _GROUPS[root] = in_process(members[0].service.opts)
    return build(opts)


async def settled(nodes: list[Node]) -> Node:
    """The leader, once every node knows it and has applied an entry of its term."""
    ids = {await n.service.node.wait_for_leader(10) for n in nodes}
    assert len(ids) == 1, ids
    return next(n for n in nodes if n.id in ids)


class Counter:
    """Unique names for tests sharing a node."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}-{self.n}"


async def assert_rejected(
    node: Node, method: str, path: str, status: int, *, token: bool = True, **kw: Any
) -> dict[str, Any]:
    """The request is refused with `status` and a JSON error, and the Raft log did not move."""
    before = node.last_index()
    r = await node.call(method, path, token=token, **kw)
    assert r.status_code == status, r.text
    assert node.last_index() == before, f"{method} {path} reached the log"
    body = r.json()
    assert set(body) >= {"error", "message"}, body
    return dict(body)


async def register(node: Node, cluster: str, name: str, broker_id: int, addr: str, timeout_ms: int = 60_000) -> None:
    """next-broker-id -> apply-broker-id -> heartbeat -> register-broker for one broker."""
    env = await node.ok("POST", "/api/v1/controller/next-broker-id", json={"clusterName": cluster, "brokerName": name})
    assert M.NextBrokerIdAnswer.model_validate(env).header.nextBrokerId == broker_id  # type: ignore[union-attr]
    env = await node.ok(
        "POST",
        "/api/v1/controller/apply-broker-id",
        json={
            "clusterName": cluster,
            "brokerName": name,
            "appliedBrokerId": broker_id,
            "registerCheckCode": f"{addr};{broker_id}",
        },
    )
    assert env["header"] == {"clusterName": cluster, "brokerName": name}
    await node.ok(
        "POST",
        "/api/v1/controller/heartbeat",
        json={
            "clusterName": cluster,
            "brokerName": name,
            "brokerAddr": addr,
            "brokerId": broker_id,
            "heartbeatTimeoutMills": timeout_ms,
        },
    )
    env = await node.ok(
        "POST",
        "/api/v1/controller/register-broker",
        json={"clusterName": cluster, "brokerName": name, "brokerId": broker_id, "brokerAddress": addr},
    )
    M.RegisterBrokerAnswer.model_validate(env)


async def scrape(node: Node, query: str = "") -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    r = await node.call("GET", f"/metrics{query}")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    """The one sample of `name` whose labels include `labels` (0 when absent)."""
    found = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls)]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else 0.0
