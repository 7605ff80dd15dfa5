"""/livez, /readyz (etcd conventions), /metrics (RocketMQ names + controllerd_raft_*)."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

from api.service.metrics import CONTENT_TYPE, LATENCY_BUCKETS_US, BrokerTables
from raft.testing.cluster import free_ports as ports
from statemachine import codes as C
from tests.api.harness import (
    GROUP_RAFT,
    Counter,
    FakeClock,
    Node,
    build,
    register,
    running,
    scrape,
    service_options,
    solo,
    value,
)
from tests.raft.helpers import eventually

pytestmark = pytest.mark.anyio
READY_CHECKS = ["started", "snapshot_loaded", "log_replayed", "leader_known", "apply_caught_up", "no_error"]
JSON = {"Accept": "application/json"}


def const(node: Node) -> set[tuple[str, str]]:
    """The constant labels of every series of `node`."""
    return {("address", node.id), ("group", "jRaft-Controller"), ("peer_id", node.id)}


# --------------------------------------------------------------------------------------------- health


async def test_livez(node: Node) -> None:
    r = await node.call("GET", "/livez")
    assert (r.status_code, r.text) == (200, "ok")
    r = await node.call("GET", "/livez?verbose")
    assert r.status_code == 200 and r.text == "[+]ping ok\nlivez check passed\n"
    r = await node.call("GET", "/livez", headers=JSON)
    assert r.json() == {
        "status": "ok",
        "checks": [{"name": "ping", "ok": True, "detail": "the event loop answers", "excluded": False}],
    }
    assert (await node.call("GET", "/livez/ping")).status_code == 200
    assert (await node.call("GET", "/livez/nope")).status_code == 404


async def test_readyz_on_a_leader(node: Node) -> None:
    for path in ("/readyz", "/healthz"):
        r = await node.call("GET", path)
        assert (r.status_code, r.text) == (200, "ok")
        r = await node.call("GET", f"{path}?verbose=1")
        assert r.text.splitlines() == [f"[+]{c} ok" for c in READY_CHECKS] + ["readyz check passed"]
        assert (await node.call("GET", f"{path}?verbose=false")).text == "ok"
        r = await node.call("GET", path, headers=JSON)
        assert r.json()["status"] == "ok" and [c["name"] for c in r.json()["checks"]] == READY_CHECKS
        r = await node.call("GET", f"{path}/leader_known")
        assert r.status_code == 200 and r.text.startswith("[+]leader_known ok")
        r = await node.call("GET", f"{path}/nope")
        assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND" and "leader_known" in r.json()["message"]
    r = await node.call("GET", "/readyz?verbose&exclude=no_error&exclude=started")
    assert "[+]no_error excluded: ok" in r.text and "[+]started excluded: ok" in r.text


async def test_a_node_without_a_leader_is_not_ready(tmp_path: Path) -> None:
    """One node of a three-node group, alone: it never learns a leader."""
    lone = build(service_options(tmp_path, ports(3), 0, GROUP_RAFT))
    async with running([lone]):
        r = await lone.call("GET", "/readyz")
        assert r.status_code == 503
        assert "[-]leader_known failed: leader unknown" in r.text.splitlines() and r.text.endswith(
            "readyz check failed\n"
        )
        assert (await lone.call("GET", "/readyz/leader_known")).status_code == 503
        assert (await lone.call("GET", "/readyz/started")).status_code == 200
        r = await lone.call("GET", "/readyz", headers=JSON)
        assert r.status_code == 503 and r.json()["status"] == "failed"
        assert [c["name"] for c in r.json()["checks"] if not c["ok"]] == ["leader_known"]
        r = await lone.call("GET", "/readyz?exclude=leader_known&verbose")
        assert r.status_code == 200 and "[+]leader_known excluded: ok" in r.text
        assert (await lone.call("GET", "/livez")).status_code == 200
        # Requests answer 2007 with an unknown leader; nothing is proposed.
        before = lone.last_index()
        env = await lone.ok("PUT", "/api/v1/kv/ns/k", json={"value": "v"}, code=C.CONTROLLER_NOT_LEADER)
        assert env["header"] == {"controllerLeaderId": None, "controllerLeaderAddress": None}
        assert lone.last_index() == before
        samples = await scrape(lone)
        assert value(samples, "role") in (1.0, 2.0) and value(samples, "controllerd_raft_has_leader") == 0


async def test_a_node_that_has_not_started(tmp_path: Path) -> None:
    idle = build(service_options(tmp_path, ports(1), 0, GROUP_RAFT))
    try:
        r = await idle.call("GET", "/readyz?verbose")
        assert r.status_code == 503 and r.text.startswith("[-]started failed: the node has not started")
        assert (await idle.call("GET", "/readyz/leader_known")).status_code == 503
        assert (await idle.call("GET", "/livez")).status_code == 200
        for method, path, body in [
            ("POST", "/api/v1/controller/replica-info", {"brokerName": "b"}),
            ("PUT", "/api/v1/kv/ns/k", {"value": "v"}),
            ("GET", "/api/v1/controller/metadata", None),
            ("GET", "/api/v1/raft/status", None),
            ("POST", "/api/v1/raft/snapshot", None),
            ("POST", "/api/v1/raft/transfer-leader", {}),
        ]:
            r = await idle.call(method, path, token=True, **({"json": body} if body is not None else {}))
            assert r.status_code == 503 and r.json()["error"] == "UNAVAILABLE", (path, r.text)
            assert r.headers["retry-after"] == "1"
        samples = await scrape(idle)
        assert value(samples, "role") == 0 and not any(n.startswith("controllerd_raft_") for n, _ in samples)
    finally:
        await idle.client.aclose()


# -------------------------------------------------------------------------------------------- metrics


async def test_metrics_names_and_constant_labels(node: Node, unique: Counter) -> None:
    await register(node, "mc", unique("metrics"), 1, "10.7.0.1:10911")
    samples = await scrape(node)
    assert all(const(node) <= set(labels) for _, labels in samples), "constant labels on every series"
    names = {n for n, _ in samples}
    expected = {
        "role",
        "request_total",
        "request_latency_bucket",
        "request_latency_count",
        "request_latency_sum",
        "active_broker_num",
        "controllerd_raft_term",
        "controllerd_raft_is_leader",
        "controllerd_raft_has_leader",
        "controllerd_raft_commit_index",
        "controllerd_raft_applied_index",
        "controllerd_raft_apply_lag_entries",
        "controllerd_raft_last_snapshot_index",
        "controllerd_raft_log_first_index",
        "controllerd_raft_log_last_index",
        "controllerd_raft_log_fsyncs_total",
        "controllerd_raft_transport_auth_failures_total",
        "controllerd_inactive_broker_scans_total",
    }
    assert expected <= names, expected - names
    assert value(samples, "role") == 3 and value(samples, "controllerd_raft_is_leader") == 1
    les = sorted(
        float(dict(ls)["le"])
        for n, ls in samples
        if n == "request_latency_bucket" and dict(ls)["request_type"] == "CONTROLLER_REGISTER_BROKER"
    )
    assert les == [*LATENCY_BUCKETS_US, float("inf")] and les[0] == 1 and les[-2] == 10_000_000


async def test_metrics_name_query_keeps_only_the_named_families_and_samples(node: Node, unique: Counter) -> None:
    name = unique("metrics")
    await register(node, "mc", name, 1, "10.7.0.2:10911")
    whole = await scrape(node)
    fsync = "controllerd_raft_fsync_duration_seconds"
    # a family by its name: every sample of it (a histogram's _bucket, _sum and _count), nothing else
    only = await scrape(node, f"?name[]={fsync}&name[]=role")
    assert {n for n, _ in only} == {f"{fsync}_bucket", f"{fsync}_sum", f"{fsync}_count", "role"}, only.keys()
    assert value(only, "role") == value(whole, "role") == 3
    assert value(only, f"{fsync}_count") >= value(whole, f"{fsync}_count") >= 1  # the writes since, at least
    # a sample by its name (as prometheus_client's own exposition takes name[]): that sample only
    counts = await scrape(node, "?name[]=request_latency_count")
    assert {n for n, _ in counts} == {"request_latency_count"} and len(counts) >= 1
    assert (await scrape(node, "?name[]=no_such_series")) == {}  # nothing named: an empty page, not the whole
    # the per-broker-set families, left out of the work unless named, by family or by sample
    oldest, count = (
        "controllerd_broker_set_heartbeat_age_max_seconds",
        "controllerd_broker_heartbeat_age_seconds_gcount",
    )
    per_set = await scrape(node, f"?name[]=active_broker_num&name[]={oldest}&name[]={count}")
    assert {n for n, _ in per_set} == {"active_broker_num", oldest, count}
    assert value(per_set, "active_broker_num", cluster="mc", broker_set=name) == 1
    assert (oldest, frozenset({*const(node), ("cluster", "mc"), ("broker_set", name)})) in per_set
    assert value(per_set, count, cluster="mc") == value(whole, count, cluster="mc") >= 1
    # without name[], another parameter changes nothing: the whole page
    assert {n for n, _ in await scrape(node, "?other=1")} == {n for n, _ in whole}


async def test_a_scrape_is_computed_and_formatted_off_the_nodes_loop(
    node: Node, unique: Counter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-broker-set families (most of a page at 10,000 brokers) are computed, and the page formatted and
    gzipped, in a worker thread: here they wait for a callback that only the node's loop can run."""
    name = unique("metrics")
    await register(node, "mc", name, 1, "10.7.0.3:10911")
    loop, ran, threads = asyncio.get_running_loop(), threading.Event(), []
    families = BrokerTables.families

    def waiting(tables: BrokerTables) -> Iterator[Metric]:
        threads.append(threading.get_ident())
        loop.call_soon_threadsafe(ran.set)
        assert ran.wait(10), "the node's loop did not run while the per-set families were computed"
        yield from families(tables)

    monkeypatch.setattr(BrokerTables, "families", waiting)
    r = await node.call("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
    assert r.status_code == 200 and r.headers["content-encoding"] == "gzip", r.text
    assert r.headers["content-type"] == CONTENT_TYPE
    assert threads and threading.get_ident() not in threads
    assert ("active_broker_num", frozenset({*const(node), ("cluster", "mc"), ("broker_set", name)})) in {
        (s.name, frozenset(s.labels.items())) for f in text_string_to_metric_families(r.text) for s in f.samples
    }


async def test_metrics_move_with_requests(node: Node, unique: Counter) -> None:
    name = unique("metrics")
    before = await scrape(node)
    await node.ok("PUT", f"/api/v1/kv/m/{name}", json={"value": "v"})
    await node.call("PUT", f"/api/v1/kv/m/{name}", json={"value": 1})  # 422: failed
    await register(node, "mc", name, 1, "10.7.1.1:10911")
    await node.ok(
        "POST", "/api/v1/controller/elect-master", json={"clusterName": "mc", "brokerName": name, "brokerId": 1}
    )
    await node.ok(
        "POST",
        "/api/v1/controller/elect-master",
        json={"clusterName": "mc", "brokerName": name, "brokerId": 1},
        code=C.CONTROLLER_MASTER_STILL_EXIST,
    )
    after = await scrape(node)

    def delta(name_: str, **labels: str) -> float:
        return value(after, name_, **labels) - value(before, name_, **labels)

    assert delta("request_total", request_type="PUT_KV_CONFIG", request_handle_status="success") == 1
    assert delta("request_total", request_type="PUT_KV_CONFIG", request_handle_status="failed") == 1
    assert delta("request_latency_count", request_type="PUT_KV_CONFIG") == 1
    assert delta("request_total", request_type="CONTROLLER_BROKER_HEARTBEAT", request_handle_status="success") == 1
    assert delta("election_total", cluster="mc", broker_set=name, election_result="new_master_elected") == 1
    assert delta("election_total", cluster="mc", broker_set=name, election_result="keep_current_master") == 1
    assert value(after, "active_broker_num", cluster="mc", broker_set=name) == 1
    assert value(after, "controllerd_broker_set_master_alive", cluster="mc", broker_set=name) == 1
    assert (
        "controllerd_broker_set_heartbeat_age_max_seconds",
        frozenset({*const(node), ("cluster", "mc"), ("broker_set", name)}),
    ) in after
    assert (
        value(after, "controllerd_raft_quorum_healthy") == 1
        and value(after, "controllerd_raft_leader_changes_total") >= 1
    )
    assert (
        value(after, "controllerd_inactive_broker_scan_interval_seconds") == node.service.opts.scan_interval_ms / 1000
    )
    assert delta("controllerd_raft_log_last_index") >= 5 and delta("controllerd_raft_commit_index") >= 5
    assert delta("controllerd_http_rejected_total", reason="validation") == 1
    # Every write is one or more fsynced batches and one commit on this leader.
    assert delta("controllerd_raft_fsync_duration_seconds_count") >= 1
    assert delta("controllerd_raft_commit_duration_seconds_count") >= 5
    assert value(after, "controllerd_raft_commit_duration_seconds_bucket", le="+Inf") == value(
        after, "controllerd_raft_commit_duration_seconds_count"
    )
    r = await node.call("POST", "/api/v1/raft/snapshot", token=True)
    assert r.status_code == 200
    snap = await scrape(node)
    assert value(snap, "controllerd_raft_last_snapshot_index") == r.json()["body"]["index"]
    assert value(snap, "controllerd_raft_snapshot_size_bytes") == r.json()["body"]["bytes"] > 0
    assert value(snap, "controllerd_raft_snapshot_age_seconds") >= 0


async def test_an_event_loop_stall_shows_in_the_loop_lag_histogram(node: Node) -> None:
    """controllerd_event_loop_lag_seconds: a 0.3 s stall of the node's loop (the stimulus: the loop blocked on
    purpose) lands above the 0.25 s bucket, and a loop left alone keeps observing."""
    samples = await scrape(node)
    above = value(samples, "controllerd_event_loop_lag_seconds_count") - value(
        samples, "controllerd_event_loop_lag_seconds_bucket", le="0.25"
    )

    def observed() -> int:
        return int(node.service.loop_lag.snapshot()["count"])  # type: ignore[call-overload]

    stalled = observed()
    end = time.monotonic() + 0.3
    while time.monotonic() < end:  # the stall under test: the loop blocked on purpose, not a wait
        pass
    await eventually(lambda: observed() > stalled)  # the probe's next wake-up
    after = await scrape(node)
    assert (
        value(after, "controllerd_event_loop_lag_seconds_count")
        - value(after, "controllerd_event_loop_lag_seconds_bucket", le="0.25")
        > above
    )
    after = await scrape(node)
    assert value(after, "controllerd_event_loop_lag_seconds_sum") >= 0.25
    assert value(after, "controllerd_event_loop_lag_seconds_bucket", le="+Inf") == value(
        after, "controllerd_event_loop_lag_seconds_count"
    )


async def test_elections_decided_by_the_scan_are_counted(tmp_path: Path) -> None:
    """The service's listener sees the scan's result (1015); its re-elections count in election_total."""
    clock = FakeClock()
    async with solo(tmp_path, clock=clock, on_disk=True) as node:
        samples = await scrape(node)
        assert value(samples, "dledger_disk_usage") > 0 and value(samples, "controllerd_store_free_bytes") > 0
        assert value(samples, "controllerd_store_min_free_bytes") == 16 << 20
        await register(node, "sc", "s", 1, "10.8.0.1:10911", timeout_ms=1_000)
        await register(node, "sc", "s", 2, "10.8.0.2:10911", timeout_ms=60_000)
        await node.ok(
            "POST", "/api/v1/controller/elect-master", json={"clusterName": "sc", "brokerName": "s", "brokerId": 1}
        )
        await node.ok(
            "POST",
            "/api/v1/controller/alter-sync-state-set",
            json={
                "brokerName": "s",
                "masterBrokerId": 1,
                "masterEpoch": 1,
                "syncStateSet": {"syncStateSet": [1, 2], "syncStateSetEpoch": 1},
            },
        )
        clock.now += 5_000  # broker 1 (the master) expired; broker 2 still alive
        result = await node.service.scan_once()
        assert result is not None and result.body["newMasters"][0]["masterBrokerId"] == 2
        samples = await scrape(node)
        assert value(samples, "election_total", cluster="sc", broker_set="s", election_result="new_master_elected") == 2
        assert value(samples, "active_broker_num", cluster="sc", broker_set="s") == 1
        assert value(samples, "controllerd_inactive_broker_scans_total") == 1
        assert value(samples, "controllerd_inactive_broker_scan_runs_total", outcome="expired") == 1
        assert value(samples, "controllerd_inactive_broker_scan_last_run_timestamp_seconds") == clock.now / 1000
        assert value(samples, "controllerd_broker_set_master_alive", cluster="sc", broker_set="s") == 1
        # Broker 1 is gone from the table; broker 2 heartbeated 5 s ago (timeout 60 s): under half.
        age = {"cluster": "sc", "broker_set": "s"}
        assert value(samples, "controllerd_broker_set_heartbeat_age_max_seconds", **age) == 5
        assert value(samples, "controllerd_brokers_past_half_timeout", **age) == 0
        # The cluster's histogram holds every set's brokers: set t's broker, heard from just now, too.
        await register(node, "sc", "t", 1, "10.8.0.3:10911")
        clock.now += 500
        samples = await scrape(node)
        assert value(samples, "controllerd_broker_set_heartbeat_age_max_seconds", cluster="sc", broker_set="t") == 0.5
        assert value(samples, "controllerd_broker_set_heartbeat_age_max_seconds", **age) == 5.5
        assert value(samples, "controllerd_broker_heartbeat_age_seconds_gcount", cluster="sc") == 2
        assert value(samples, "controllerd_broker_heartbeat_age_seconds_gsum", cluster="sc") == 6
        buckets = {
            le: value(samples, "controllerd_broker_heartbeat_age_seconds_bucket", cluster="sc", le=le)
            for le in ("0.5", "1.0", "5.0", "10.0", "+Inf")
        }
        assert buckets == {"0.5": 1, "1.0": 1, "5.0": 1, "10.0": 2, "+Inf": 2}  # le: at most, 0.5 s included
        assert await node.service.scan_once() is None  # nothing left to judge
        clock.now += 29_501  # broker 2 past half its timeout, not expired: still the master
        samples = await scrape(node)
        assert value(samples, "controllerd_brokers_past_half_timeout", **age) == 1
        assert value(samples, "controllerd_broker_set_heartbeat_age_max_seconds", **age) == 35.001
        assert value(samples, "controllerd_inactive_broker_scan_runs_total", outcome="nothing_to_do") == 1
        assert value(samples, "controllerd_broker_set_master_alive", **age) == 1
        clock.now += 30_000  # broker 2 expired: the set has no live master, before and after the scan
        assert value(await scrape(node), "controllerd_broker_set_master_alive", **age) == 0
        await node.service.scan_once()
        samples = await scrape(node)
        assert value(samples, "controllerd_inactive_broker_scan_runs_total", outcome="expired") == 2
        assert value(samples, "controllerd_broker_set_master_alive", **age) == 0
        assert value(samples, "election_total", election_result="no_master_elected", **age) == 1


async def test_docs_load_swagger_ui_and_redoc_from_the_node_itself_not_a_cdn(node: Node) -> None:
    for page, assets in (("/docs", ("swagger-ui-bundle.js", "swagger-ui.css")), ("/redoc", ("redoc.standalone.js",))):
        r = await node.client.get(page)
        assert r.status_code == 200
        urls = re.findall(r'(?:src|href)=["\']?([^"\'\s>]+)', r.text) + re.findall(r"url: ?'([^']+)'", r.text)
        assert urls and all(u.startswith("/") for u in urls), urls  # no http(s):// anywhere: works air-gapped
        for name in assets:
            assert f"/docs-assets/{name}" in urls
            asset = await node.client.get(f"/docs-assets/{name}")
            assert asset.status_code == 200 and len(asset.content) > 10_000
    assert (await node.client.get("/openapi.json")).json()["info"]["title"] == "controllerd"
