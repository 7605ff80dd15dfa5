"""RocketMQ's metrics exporters besides /metrics (metricsExporterType, api.service.settings.MetricsExport):
`LOG` writes the series to the log every metricLoggingExporterIntervalInMills; `OTLP_GRPC` pushes them to
metricsGrpcExporterTarget every metricGrpcExporterIntervalInMills with OpenTelemetry's OTLP/gRPC exporter.
(`PROM`, a second HTTP listener, is api/server.py's.) Both read the series of /metrics (api/service/metrics.py)
on the node's loop, and format or convert and push them in a worker thread.

OTLP mapping (docs/operations.md, "Metrics exporters"): scope `controller` (RocketMQ's meter name), empty
resource; a counter becomes a cumulative monotonic Sum named as its Prometheus sample (`request_total`), a gauge
a Gauge, a histogram a cumulative Histogram (explicit bounds = its `le` values, no min/max). The gauge
histogram of heartbeat ages has no OTLP equivalent: it goes as two Gauges, `<name>_gcount` and `<name>_gsum`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics.export import MetricsData
    from prometheus_client.core import Metric as PromMetric

    from api.service.metrics import ControllerMetrics
    from api.service.settings import MetricsExport

log = logging.getLogger("controllerd.metrics")
SCOPE = "controller"  # RocketMQ's OPEN_TELEMETRY_METER_NAME


class MetricsExporter:
    """The LOG or OTLP_GRPC exporter of one node (nothing for DISABLE and PROM). `start()` on the node's loop."""

    def __init__(self, metrics: ControllerMetrics, settings: MetricsExport) -> None:
        self.metrics = metrics
        self.settings = settings
        self.exports = 0  # successful pushes or log records
        self.failures = 0
        self._task: asyncio.Task[None] | None = None
        self._otlp: OTLPMetricExporter | None = None
        self._start_ns = time.time_ns()

    @property
    def active(self) -> bool:
        return self.settings.exporter_type in ("LOG", "OTLP_GRPC")

    def start(self) -> None:
        s = self.settings
        if s.exporter_type == "OTLP_GRPC":
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter  # noqa: PLC0415

            endpoint = s.grpc_target if s.grpc_target.startswith("http") else "https://" + s.grpc_target
            self._otlp = OTLPMetricExporter(
                endpoint=endpoint,
                insecure=endpoint.startswith("http://"),
                headers=s.headers() or None,
                timeout=s.grpc_timeout_ms / 1000,
            )
            period = s.grpc_interval_ms / 1000
            log.info("metrics: OTLP/gRPC export to %s every %.3gs", endpoint, period)
        elif s.exporter_type == "LOG":
            period = s.log_interval_ms / 1000
            log.info("metrics: logged every %.3gs (logger controllerd.metrics)", period)
        else:
            return
        self._task = asyncio.get_running_loop().create_task(self._loop(period), name="metrics-export")

    async def _loop(self, period: float) -> None:
        while True:
            await asyncio.sleep(period)
            await self.export_once()

    async def export_once(self) -> bool:
        """One export now: whether it succeeded (a failure is logged and counted, never raised)."""
        try:
            if self._otlp is not None:
                collected, otlp, start_ns = self.metrics.collected(), self._otlp, self._start_ns
                result = await asyncio.to_thread(
                    lambda: otlp.export(otlp_metrics(collected.collect(), start_ns, time.time_ns()))
                )
                ok = result.name == "SUCCESS"
            else:
                text, _ = await self.metrics.exposition()
                log.info("metrics\n%s", text.decode())
                ok = True
        except Exception:  # noqa: BLE001 - exporting must never stop the node
            log.exception("metrics export failed")
            ok = False
        if ok:
            self.exports += 1
        else:
            self.failures += 1
            log.warning("metrics export to %s failed", self.settings.grpc_target or "the log")
        return ok

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._otlp is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._otlp.shutdown)
            self._otlp = None


@dataclass
class _Buckets:
    """One Prometheus histogram series: (le, cumulative count) pairs, sum, count."""

    le: list[tuple[float, float]] = field(default_factory=list)
    sum: float = 0.0
    count: int = 0


def otlp_metrics(families: Iterable[PromMetric], start_ns: int, now_ns: int) -> MetricsData:
    """The node's Prometheus families as OTLP MetricsData (the module docstring's mapping)."""
    from opentelemetry.sdk.metrics.export import (  # noqa: PLC0415 - only with OTLP_GRPC
        AggregationTemporality,
        Gauge,
        Histogram,
        HistogramDataPoint,
        Metric,
        MetricsData,
        NumberDataPoint,
        ResourceMetrics,
        ScopeMetrics,
        Sum,
    )
    from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope  # noqa: PLC0415

    def point(labels: dict[str, str], value: float) -> NumberDataPoint:
        return NumberDataPoint(dict(labels), start_ns, now_ns, value)

    out: list[Metric] = []
    for fam in families:
        if fam.type == "counter":
            samples = [s for s in fam.samples if s.name.endswith("_total")]
            if samples:
                total = Sum([point(s.labels, s.value) for s in samples], AggregationTemporality.CUMULATIVE, True)
                out.append(Metric(samples[0].name, fam.documentation, fam.unit, total))
        elif fam.type == "gauge":
            out.append(
                Metric(fam.name, fam.documentation, fam.unit, Gauge([point(s.labels, s.value) for s in fam.samples]))
            )
        elif fam.type == "histogram":
            series: dict[tuple[tuple[str, str], ...], _Buckets] = {}
            for s in fam.samples:
                key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
                h = series.setdefault(key, _Buckets())
                if s.name.endswith("_bucket"):
                    h.le.append((float(s.labels["le"]), s.value))
                elif s.name.endswith("_sum"):
                    h.sum = s.value
                elif s.name.endswith("_count"):
                    h.count = int(s.value)
            points = []
            for key, h in series.items():
                les = sorted(h.le)
                cumulative = [int(c) for _, c in les]
                counts = [c - p for c, p in zip(cumulative, [0, *cumulative[:-1]], strict=True)]
                bounds = [le for le, _ in les if le != float("inf")]
                # min and max are unknown (Prometheus buckets keep neither): left unset in the OTLP message
                none = cast(float, None)
                points.append(
                    HistogramDataPoint(dict(key), start_ns, now_ns, h.count, h.sum, counts, bounds, none, none)
                )
            out.append(
                Metric(fam.name, fam.documentation, fam.unit, Histogram(points, AggregationTemporality.CUMULATIVE))
            )
        elif fam.type == "gaugehistogram":
            for suffix in ("_gcount", "_gsum"):
                pts = [point(s.labels, s.value) for s in fam.samples if s.name.endswith(suffix)]
                out.append(Metric(fam.name + suffix, fam.documentation, fam.unit, Gauge(pts)))
    scope = ScopeMetrics(InstrumentationScope(SCOPE), out, "")
    return MetricsData([ResourceMetrics(Resource.get_empty(), [scope], "")])
