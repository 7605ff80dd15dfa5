"""Hostile HTTP input against a real 3-node group: schemathesis over the served OpenAPI schema (no 5xx, responses
conform to the schema, a rejected request changes no replicated state), oversized bodies, slow clients
(slowloris) and many idle connections while a normal client is served."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from cli.rocketmq import wait_until
from tests.daemon.cluster import ControllerdCluster

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("torture-http")]
TOKEN = "hostile-input-token"
# Membership changes and leadership transfers with made-up peers are accepted requests that stall the group;
# they are covered by their own tests. Everything else is fuzzed, with the admin token.
SKIP = {
    ("POST", "/api/v1/raft/peers"),
    ("DELETE", "/api/v1/raft/peers/{peer_id}"),
    ("POST", "/api/v1/raft/transfer-leader"),
}
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControllerdCluster, int]]:
    # A long election timeout: the fuzzing compares (term, last index) around every rejected request, so a
    # leader change from CPU starvation on a loaded 2-core machine must not pass for a state change.
    c = ControllerdCluster(
        str(tmp_path_factory.mktemp("hostile")),
        election_ms=2000,
        extra=f"controllerAdminToken={TOKEN}\nscanNotActiveBrokerInterval=600000\n"
        "controllerFeatureCheckIntervalMs=500\n",
    )
    c.headers = AUTH
    c.start_all()
    try:
        leader = c.index_of(c.wait_ready())

        # The leader raises the group's feature level on its own a few seconds after start (0 -> 2, one entry):
        # on a loaded machine (a fresh clone, 2026-11-30) that entry landed around a rejected request and passed
        # for its state change. The fuzzing starts once it is in. controllerFeatureCheckIntervalMs=500: at the
        # 30 s default the first check after the election came 30 s later, and each worker that ran a test of this
        # file waited for it (35 s of setup, 5.6 with 500 ms).
        def raised() -> bool:
            f = httpx.get(c.url(leader, "/api/v1/raft/features"), headers=AUTH, timeout=10).json()["body"]
            return bool(f["level"] == f["maxLevel"])

        wait_until("the group's feature level raised to the highest", raised, 120)
        yield c, leader
    finally:
        c.stop_all()


def digest(c: ControllerdCluster, i: int) -> tuple[int, int]:
    """(term, last log index) of node i: every change of replicated state goes through a new log entry."""
    body = httpx.get(c.url(i, "/api/v1/raft/status"), headers=AUTH, timeout=10).json()["body"]
    return body["term"], body["lastLogIndex"]


def test_schemathesis_no_5xx_schema_conformance_no_change_from_rejected(group) -> None:
    c, leader = group
    schema = schemathesis.openapi.from_url(c.url(leader, "/openapi.json"))
    ops = []
    for r in schema.get_all_operations():
        assert isinstance(r, Ok), r.err()  # every operation of the schema parses
        op = r.ok()
        if (op.method.upper(), op.path) not in SKIP:
            ops.append(op)
    assert len(ops) >= 20
    stats = {"calls": 0, "rejected": 0}
    for op in ops:
        _fuzzer(c, leader, op, stats)()
    assert stats["calls"] >= 10 * len(ops) and stats["rejected"] > 0, stats
    assert c.index_of(c.wait_ready()) == leader  # still one group, same leader


def test_oversized_body_is_413_and_changes_nothing(group) -> None:
    c, leader = group
    before = digest(c, leader)
    r = httpx.put(c.url(leader, "/api/v1/kv/t/big"), json={"value": "x" * (1 << 20)}, timeout=10)
    assert r.status_code == 413
    r = httpx.put(
        c.url(leader, "/api/v1/kv/t/big"),
        content=b"{" * (1 << 20),
        headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
        timeout=10,
    )
    assert r.status_code in (400, 413, 422)
    assert digest(c, leader) == before


def test_slow_and_idle_connections_do_not_starve_a_normal_client(group) -> None:
    c, leader = group
    host, port = c.https[leader].rsplit(":", 1)
    socks = []
    try:
        for n in range(300):
            s = socket.create_connection((host, int(port)), timeout=5)
            if n % 2:  # slowloris: a request line and part of the headers, never finished
                s.sendall(b"PUT /api/v1/kv/t/slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n")
            socks.append(s)
        for n in range(5):
            r = httpx.put(c.url(leader, f"/api/v1/kv/t/normal{n}"), json={"value": "v"}, timeout=5)
            assert r.status_code == 200 and r.json()["code"] == 0
        assert httpx.get(c.url(leader, "/api/v1/kv/t/slow"), timeout=5).json()["code"] == 22  # nothing half-applied
    finally:
        for s in socks:
            s.close()


def _fuzzer(c: ControllerdCluster, leader: int, op, stats: dict[str, int]):
    @settings(max_examples=12, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=op.as_strategy())
    def fuzz(case) -> None:
        before = digest(c, leader)
        response = case.call(base_url=f"http://{c.https[leader]}", headers=AUTH, timeout=10)
        stats["calls"] += 1
        case.validate_response(
            response, checks=[not_a_server_error, response_schema_conformance, status_code_conformance]
        )
        if 400 <= response.status_code < 500:
            stats["rejected"] += 1
            assert digest(c, leader) == before, (
                f"{op.method} {op.path} rejected ({response.status_code}), state changed"
            )

    return fuzz


@pytest.mark.xdist_group("torture-disk")
def test_http_limits_are_config_keys(tmp_path) -> None:
    """controllerHttpMaxBodyBytes and controllerHttpMaxConnections reach the served node."""
    c = ControllerdCluster(
        str(tmp_path), n=1, election_ms=300, extra="controllerHttpMaxBodyBytes=2048\ncontrollerHttpMaxConnections=4\n"
    )
    c.start_all()
    try:
        c.wait_ready()
        r = httpx.put(c.url(0, "/api/v1/kv/t/k"), json={"value": "x" * 4096}, timeout=5)
        assert r.status_code == 413
        r = httpx.put(c.url(0, "/api/v1/kv/t/k"), json={"value": "x" * 1000}, timeout=5)
        assert r.status_code == 200
        host, port = c.https[0].rsplit(":", 1)
        slow = b"PUT /api/v1/kv/t/slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"  # the body never comes
        held: list[socket.socket] = []
        try:
            # uvicorn counts open connections when a request's headers arrive: one kept-alive probe connection
            # plus two connections holding unfinished requests are 3, under the limit of 4 ...
            with httpx.Client(timeout=5) as probe:
                assert probe.get(c.url(0, "/livez")).status_code == 200
                for _ in range(2):
                    held.append(socket.create_connection((host, int(port)), timeout=5))
                    held[-1].sendall(slow)
                    assert probe.get(c.url(0, "/livez")).status_code == 200
                # ... and the 4th is over it: answered 503 at once, before any body is read.
                held.append(socket.create_connection((host, int(port)), timeout=5))
                held[-1].sendall(slow)
                assert held[-1].recv(64).startswith(b"HTTP/1.1 503")
        finally:
            for sock in held:
                sock.close()
    finally:
        c.stop_all()
