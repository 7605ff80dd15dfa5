"""metricsExporterType (api/export.py, api/server.py): PROM serves the node's series on its own port, OTLP_GRPC
pushes them to a real OTLP/gRPC receiver (the protocol's own service definition from opentelemetry-proto, served
by grpcio in this test), LOG writes them to the log. One single-node ControllerServer per exporter type."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from api.server import ControllerServer
from api.service.settings import ApiSettings, MetricsExport
from raft.testing.cluster import free_ports
from tests.api.harness import GROUP_RAFT, service_options

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def server(tmp_path: Path, export: MetricsExport) -> AsyncIterator[ControllerServer]:
    raft, http = free_ports(2)
    settings = ApiSettings(metrics_export=export, metrics_labels={"dc": "east"})
    s = ControllerServer(service_options(tmp_path, [raft], 0, GROUP_RAFT), settings, ("127.0.0.1", http))
    await s.start()
    try:
        await s.service.node.wait_for_leader(10)
        async with httpx.AsyncClient() as c:  # one request, so request_total and request_latency have a series
            r = await c.post(
                f"http://127.0.0.1:{http}/api/v1/controller/next-broker-id",
                json={"clusterName": "c", "brokerName": "b"},
            )
            assert r.json()["code"] == 0
        yield s
    finally:
        await s.stop()


async def test_prom_serves_the_series_on_its_own_port(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    async with server(tmp_path, MetricsExport("2", "127.0.0.1", port)) as s, httpx.AsyncClient() as c:
        r = await c.get(f"http://127.0.0.1:{port}/metrics")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
        names = {f.name for f in text_string_to_metric_families(r.text)}
        assert {"role", "request", "request_latency", "active_broker_num", "controllerd_raft_quorum_healthy"} <= names
        role = next(f for f in text_string_to_metric_families(r.text) if f.name == "role").samples[0]
        assert role.value == 3 and role.labels == {
            "address": s.service.id,
            "group": "jRaft-Controller",
            "peer_id": s.service.id,
            "dc": "east",
        }
        # prometheus_client's choices: name[], OpenMetrics when asked for, gzip (httpx asks for it by default)
        only = await c.get(f"http://127.0.0.1:{port}/", params={"name[]": "role"})
        assert [f.name for f in text_string_to_metric_families(only.text)] == ["role"]
        assert only.headers["content-encoding"] == "gzip"
        om = await c.get(f"http://127.0.0.1:{port}/metrics", headers={"Accept": "application/openmetrics-text"})
        assert om.headers["content-type"].startswith("application/openmetrics-text") and om.text.endswith("# EOF\n")
    # stopped with the node: the port is free again
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2)


async def test_a_busy_prom_port_fails_the_start_naming_it(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    async with server(tmp_path / "a", MetricsExport("PROM", "127.0.0.1", port)):
        raft, http = free_ports(2)
        other = ControllerServer(
            service_options(tmp_path / "b", [raft], 0, GROUP_RAFT),
            ApiSettings(metrics_export=MetricsExport("PROM", "127.0.0.1", port)),
            ("127.0.0.1", http),
        )
        with pytest.raises(OSError, match=f"cannot listen for metricsPromExporterPort on 127.0.0.1:{port}"):
            await other.start()
        assert not other.service.started


class Receiver(metrics_service_pb2_grpc.MetricsServiceServicer):
    """An OTLP/gRPC metrics endpoint: keeps every export request and its metadata."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.requests: list[tuple[Any, dict[str, str]]] = []
        self.loop = loop
        self.got = asyncio.Event()

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 - the service's method name
        self.requests.append((request, dict(context.invocation_metadata())))
        self.loop.call_soon_threadsafe(self.got.set)
        return metrics_service_pb2.ExportMetricsServiceResponse()

    def with_metric(self, name: str) -> tuple[Any, dict[str, str]] | None:
        """The first request received with a series named `name`."""
        for request, metadata in list(self.requests):
            if any(m.name == name for rm in request.resource_metrics for sm in rm.scope_metrics for m in sm.metrics):
                return request, metadata
        return None


def num(point: Any) -> float:
    """A NumberDataPoint's value (the encoder sends ints as as_int)."""
    return float(point.as_double if point.HasField("as_double") else point.as_int)


async def test_otlp_grpc_pushes_the_series_to_a_receiver(tmp_path: Path) -> None:
    receiver = Receiver(asyncio.get_running_loop())
    grpc_server = grpc.server(ThreadPoolExecutor(2))
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(receiver, grpc_server)
    port = grpc_server.add_insecure_port("127.0.0.1:0")
    grpc_server.start()
    try:
        export = MetricsExport(
            "OTLP_GRPC", grpc_target=f"http://127.0.0.1:{port}", grpc_headers="tenant:t1", grpc_interval_ms=200
        )
        async with server(tmp_path, export) as s:
            # The exporter pushes from its start; the fixture's request comes after the leader is known, so the
            # first pushes may come before request_total has a series. Wait for a push that has it.
            while (got := receiver.with_metric("request_total")) is None:
                receiver.got.clear()
                await asyncio.wait_for(receiver.got.wait(), 20)
            request, metadata = got
            assert metadata["tenant"] == "t1"
            (rm,) = request.resource_metrics
            (sm,) = rm.scope_metrics
            assert sm.scope.name == "controller"
            by_name = {m.name: m for m in sm.metrics}
            role = by_name["role"].gauge.data_points[0]
            attrs = {a.key: a.value.string_value for a in role.attributes}
            assert num(role) == 3 and attrs == {
                "address": s.service.id,
                "group": "jRaft-Controller",
                "peer_id": s.service.id,
                "dc": "east",
            }
            total = by_name["request_total"].sum
            assert total.is_monotonic and total.aggregation_temporality == 2  # CUMULATIVE
            point = next(
                p
                for p in total.data_points
                if {a.key: a.value.string_value for a in p.attributes}["request_type"]
                == "CONTROLLER_GET_NEXT_BROKER_ID"
            )
            assert num(point) == 1
            hist = by_name["request_latency"].histogram.data_points[0]
            assert hist.count == 1 and sum(hist.bucket_counts) == 1 and list(hist.explicit_bounds)[:3] == [1, 3, 5]
            assert not hist.HasField("min") and not hist.HasField("max")
            assert "controllerd_broker_heartbeat_age_seconds_gcount" in by_name
            assert await s.exporter.export_once() and s.exporter.failures == 0 and len(receiver.requests) >= 2
    finally:
        grpc_server.stop(None)


async def test_an_unreachable_otlp_target_is_counted_and_logged_not_fatal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (port,) = free_ports(1)  # nothing listens
    export = MetricsExport(
        "OTLP_GRPC", grpc_target=f"http://127.0.0.1:{port}", grpc_timeout_ms=300, grpc_interval_ms=3_600_000
    )
    async with server(tmp_path, export) as s:
        with caplog.at_level(logging.WARNING, logger="controllerd.metrics"):
            assert await s.exporter.export_once() is False
        assert s.exporter.failures == 1 and s.service.is_leader()
        assert f"metrics export to http://127.0.0.1:{port} failed" in caplog.text


async def test_log_writes_the_series_to_the_log(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    export = MetricsExport("LOG", log_interval_ms=3_600_000)
    async with server(tmp_path, export) as s:
        with caplog.at_level(logging.INFO, logger="controllerd.metrics"):
            assert await s.exporter.export_once()
        record = next(
            r for r in caplog.records if r.name == "controllerd.metrics" and r.getMessage().startswith("metrics\n")
        )
        assert (
            f'role{{address="{s.service.id}",dc="east",group="jRaft-Controller",peer_id="{s.service.id}"}} 3.0'
            in record.getMessage()
        )
