"""ControllerMetrics: the Prometheus series of one node, from a collector of its own (several nodes can live
in one process, as in the tests). A scrape reads the node on its loop and leaves the per-broker-set families
(most of the page at 10,000 brokers) and the formatting to a worker thread (`exposition`).

RocketMQ's controller instruments keep their names and labels (operator-surface.md §1.4): `role`,
`request_total`, `request_latency` (µs, RocketMQ's buckets), `election_total`, `active_broker_num`, each
with the constant labels address, group, peer_id (plus metricsLabel pairs). The Raft series we add are
`controllerd_raft_*`. Gauges are read from the node at scrape time (a custom collector), so they are
never stale; counters and the histogram are kept here and fed by the request gateway and by the service's
result listener (elections decided inside the inactive-broker scan).
"""

from __future__ import annotations

import asyncio
import bisect
import gzip
import itertools
import logging
import os
import time
from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder

from api.service import alarms
from raft.core import Role
from raft.transport.tcp import TLS_REFUSED as RAFT_TLS_REFUSED
from statemachine import codes as C
from statemachine.alarms import ALARMS
from statemachine.liveness import LAST, TIMEOUT
from statemachine.result import Result

if TYPE_CHECKING:
    from api.service import ControllerService
    from raft.node import NodeStatus
    from snapshot.format import SnapshotMeta
    from statemachine.liveness import LiveRow

log = logging.getLogger("controllerd.api")

CONTENT_TYPE = CONTENT_TYPE_LATEST
_US, _MS, _S = 1, 1000, 1_000_000
LATENCY_BUCKETS_US: tuple[float, ...] = tuple(
    float(m * unit) for unit in (_US, _MS) for m in (1, 3, 5, 10, 30, 50, 100, 300, 500)
) + (1.0 * _S, 3.0 * _S, 5.0 * _S, 10.0 * _S)  # RocketMQ's ControllerMetricsManager buckets
ROLE_VALUES = {Role.PRE_CANDIDATE: 1, Role.CANDIDATE: 1, Role.FOLLOWER: 2, Role.LEADER: 3}  # 0: unknown (not started)
NEW_MASTER_ELECTED, KEEP_CURRENT_MASTER, NO_MASTER_ELECTED = (
    "new_master_elected",
    "keep_current_master",
    "no_master_elected",
)
STATUSES = ("success", "failed", "timeout")
HEARTBEAT_AGE_BUCKETS_S: tuple[float, ...] = (0.5, 1, 2, 3, 5, 10, 15, 20, 30, 60, 120, 300)


def election_result(code: int) -> str | None:
    """RocketMQ's election_result of an electMaster answer; None when no election was attempted."""
    if code == C.SUCCESS:
        return NEW_MASTER_ELECTED
    if code == C.CONTROLLER_MASTER_STILL_EXIST:
        return KEEP_CURRENT_MASTER
    if code in (C.CONTROLLER_MASTER_NOT_AVAILABLE, C.CONTROLLER_ELECT_MASTER_FAILED):
        return NO_MASTER_ELECTED
    return None  # e.g. 2010: the set is unknown, nothing was elected or kept


class _Histogram:
    __slots__ = ("counts", "total", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS_US) + 1)
        self.total = 0
        self.sum = 0.0

    def observe(self, v: float) -> None:
        self.counts[bisect.bisect_left(LATENCY_BUCKETS_US, v)] += 1
        self.total += 1
        self.sum += v

    def buckets(self) -> list[tuple[str, float]]:
        out, acc = [], 0
        for le, n in zip(LATENCY_BUCKETS_US, self.counts, strict=False):
            acc += n
            out.append((_fmt(le), float(acc)))
        out.append(("+Inf", float(self.total)))
        return out


def _fmt(v: float) -> str:
    return str(int(v)) if v == int(v) else str(v)


class ControllerMetrics:
    """Call everything from the node's event loop (the gateway, the listener and the scrape all do)."""

    def __init__(self, service: ControllerService, labels: Mapping[str, str]) -> None:
        self.service = service
        self.const_names = tuple(labels)
        self.const_values = tuple(labels[k] for k in self.const_names)
        self.requests: dict[tuple[str, str], int] = defaultdict(int)
        self.latency: dict[str, _Histogram] = {}
        self.elections: dict[tuple[str, str, str], int] = defaultdict(int)
        self.rejections: dict[str, int] = defaultdict(int)
        self.tls_refusals: dict[tuple[str, str], int] = defaultdict(int)
        self._snapshot_cache: tuple[tuple[int, int, int] | None, SnapshotMeta | None] = (None, None)

    # --------------------------------------------------------------------------------------- feeding

    def observe_request(self, request_type: str, status: str, latency_us: float | None = None) -> None:
        """request_total{request_type, request_handle_status}; request_latency for answered requests (as
        RocketMQ records it: only on success)."""
        self.requests[(request_type, status)] += 1
        if latency_us is not None:
            h = self.latency.get(request_type)
            if h is None:
                h = self.latency[request_type] = _Histogram()
            h.observe(latency_us)

    def observe_election(self, cluster: str, broker_set: str, code: int) -> None:
        result = election_result(code)
        if result is not None:
            self.elections[(cluster, broker_set, result)] += 1

    def rejected(self, reason: str) -> None:
        self.rejections[reason] += 1

    def tls_refused(self, listener: str, reason: str) -> None:
        """controllerd_tls_refused_total{listener, reason}: a connection refused before any request."""
        self.tls_refusals[(listener, reason)] += 1

    def on_result(self, request_type: str, result: Result) -> None:
        """The service's listener: count the elections a scan (1015) or a channel close (1014) decided.
        Elect-master requests are counted by their route, which knows the broker set."""
        body = result.body
        if not isinstance(body, dict) or not isinstance(body.get("elections"), list):
            return
        for e in body["elections"]:
            name = e.get("brokerName", "")
            self.observe_election(self.cluster_of(name), name, e.get("code", -1))

    def cluster_of(self, broker_name: str, fallback: str = "") -> str:
        cluster = self.service.cluster_of(broker_name)
        return cluster if cluster is not None else fallback

    # ---------------------------------------------------------------------------------------- scrape

    def collected(self, names: Collection[str] = ()) -> Collected:
        """One scrape's families, read on the node's loop; with `names` (the `name[]` query parameters, as
        prometheus_client's own exposition takes them), only the families so named, every sample of each, and
        the samples so named (`request_total`, `request_latency_count`, ...). The per-broker-set families are
        taken as a copy of the tables here and computed when the result is iterated, which may be elsewhere."""
        collector = _Collector(self, frozenset(names) if names else None)
        return Collected(list(collector.collect()), collector.broker_tables(), collector.only)

    def render(self, names: Collection[str] = ()) -> bytes:
        """The node's series in Prometheus text format, all formatted here (the LOG exporter, tests)."""
        return generate_latest(self.collected(names))

    async def exposition(
        self, names: Collection[str] = (), accept: str | None = None, accept_encoding: str = ""
    ) -> tuple[bytes, dict[str, str]]:
        """The body and headers of a scrape: read on the loop, then formatted, and gzipped when
        `accept_encoding` takes it, in a worker thread. At 10,000 brokers the text is ~2 MB, 0.1-0.2 s of work:
        on the loop every heartbeat behind it would wait that long; in a thread the loop gets the interpreter
        back at every switch interval (5 ms). `accept`: the Accept header, negotiated as prometheus_client does
        (PROM); None: the text format as CONTENT_TYPE (/metrics)."""
        collected = self.collected(names)
        encoder, content_type = (generate_latest, CONTENT_TYPE) if accept is None else choose_encoder(accept)
        zipped = "gzip" in accept_encoding.lower()

        def body() -> bytes:
            text = encoder(collected)
            return gzip.compress(text, compresslevel=6) if zipped else text

        headers = {"Content-Type": content_type}
        if zipped:
            headers["Content-Encoding"] = "gzip"
        return await asyncio.to_thread(body), headers

    def _newest_snapshot(self, st: NodeStatus) -> SnapshotMeta | None:
        """The newest snapshot's meta on disk, re-read only when a save or an install happened."""
        snap = st.snapshot
        key = (snap.index, snap.saves, snap.installs)
        if self._snapshot_cache[0] != key:
            metas = self.service.admin.snapshots()
            self._snapshot_cache = (key, metas[0] if metas else None)
        return self._snapshot_cache[1]


_F = TypeVar("_F", CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, GaugeHistogramMetricFamily)


class _Family(Protocol):
    """Makes a metric family with the node's constant labels (and `extra` ones)."""

    def __call__(self, kind: type[_F], name: str, doc: str, extra: tuple[str, ...] = ...) -> _F: ...


class Collected:
    """A scrape's families (prometheus_client's collector protocol: `collect()`): those read on the node's
    loop, then the per-broker-set families computed from the tables' copy, restricted to `only` (a family so
    named whole, else the samples so named)."""

    def __init__(self, metrics: list[Metric], tables: BrokerTables | None, only: frozenset[str] | None) -> None:
        self.metrics, self.tables, self.only = metrics, tables, only

    def collect(self) -> Iterator[Metric]:
        per_set = self.tables.families() if self.tables is not None else ()
        for metric in itertools.chain(self.metrics, per_set):
            if self.only is not None and metric.name not in self.only:
                metric.samples = [s for s in metric.samples if s.name in self.only]
                if not metric.samples:
                    continue
            yield metric


PER_SET_FAMILIES = (
    "active_broker_num",
    "controllerd_broker_heartbeat_age_seconds",
    "controllerd_broker_set_heartbeat_age_max_seconds",
    "controllerd_brokers_past_half_timeout",
    "controllerd_broker_set_master_alive",
)
"""`BrokerTables.families`: read from every heartbeat row and every broker set, most of a scrape's work at
10,000 brokers; left out unless one of them (or one of their samples) is asked for."""

_ROW_FIELDS = itemgetter(0, 1, LAST, TIMEOUT)  # of a LiveRow: cluster, broker set, last heartbeat, timeout


@dataclass(frozen=True, slots=True)
class BrokerTables:
    """What the per-broker-set families read, taken on the node's loop: copies of the broker sets and of the
    heartbeat table's list of rows, and one pass over the sets for their masters (at 30,000 brokers ~20 ms,
    where computing and formatting the families takes ~0.5 s). `families()` computes them anywhere, later.
    A row is the table's own list, which the loop goes on updating in place: each of its cells is read once,
    as one atomic read, so a row may show a heartbeat applied after the copy, as a scrape a moment later
    would (an age below 0 counts as 0)."""

    family: _Family
    values: list[str]
    now_ms: int
    sets: list[tuple[str, str]]  # (cluster, broker set) of every known set
    rows: list[LiveRow]  # every heartbeat row (the list is a copy; the rows are the table's, see below)
    masters: list[tuple[str, str, bool]]  # (cluster, broker set, master set and alive)

    def families(self) -> Iterator[Metric]:
        """active_broker_num{cluster, broker_set} (RocketMQ's), then ours: the heartbeat ages of each cluster's
        brokers (a gauge histogram: the distribution now), and per set the oldest heartbeat's age, the brokers
        past half their timeout and whether the set has a live master."""
        family, values, now = self.family, self.values, self.now_ms
        active: dict[tuple[str, str], int] = dict.fromkeys(self.sets, 0)
        halves: dict[tuple[str, str], int] = dict.fromkeys(self.sets, 0)
        oldest: dict[tuple[str, str], int] = {}
        bounds = HEARTBEAT_AGE_BUCKETS_S
        # per cluster, per bucket (+Inf last): brokers whose age falls in it; every known cluster, 0s included
        per_cluster: dict[str, list[int]] = {cluster: [0] * (len(bounds) + 1) for cluster, _ in self.sets}
        age_sums: dict[str, float] = defaultdict(float)
        for cluster, name, last, timeout in map(_ROW_FIELDS, self.rows):
            key, age_ms = (str(cluster), str(name)), max(0, now - int(last))
            timeout = int(timeout)
            active[key] = active.get(key, 0) + (age_ms <= timeout)
            halves[key] = halves.get(key, 0) + (age_ms * 2 > timeout)
            if age_ms > oldest.get(key, -1):
                oldest[key] = age_ms
            counts = per_cluster.get(key[0])
            if counts is None:
                counts = per_cluster[key[0]] = [0] * (len(bounds) + 1)
            counts[bisect.bisect_left(bounds, age_ms / 1000)] += 1
            age_sums[key[0]] += age_ms / 1000

        def per_set(name: str, doc: str, items: Iterable[tuple[tuple[str, str], float]]) -> Metric:
            g = family(GaugeMetricFamily, name, doc, ("cluster", "broker_set"))
            for key, v in sorted(items):
                g.add_metric([*values, *key], v)
            return g

        yield per_set("active_broker_num", "now active brokers num", active.items())
        ages = family(
            GaugeHistogramMetricFamily,
            "controllerd_broker_heartbeat_age_seconds",
            "seconds since each broker's last heartbeat (the applied table, now), per cluster",
            ("cluster",),
        )
        for cluster, counts in sorted(per_cluster.items()):
            cumulative = list(itertools.accumulate(counts))
            buckets = [(str(float(le)), float(n)) for le, n in zip(bounds, cumulative, strict=False)]
            ages.add_metric([*values, cluster], [*buckets, ("+Inf", float(cumulative[-1]))], age_sums[cluster])
        yield ages
        yield per_set(
            "controllerd_broker_set_heartbeat_age_max_seconds",
            "seconds since the last heartbeat of the set's broker heard from longest ago (absent without one)",
            ((key, ms / 1000) for key, ms in oldest.items()),
        )
        yield per_set(
            "controllerd_brokers_past_half_timeout",
            "brokers whose last heartbeat is older than half their heartbeatTimeoutMillis",
            halves.items(),
        )
        yield per_set(
            "controllerd_broker_set_master_alive",
            "1 if the broker set has a master whose heartbeat has not expired",
            (((cluster, name), 1 if alive else 0) for cluster, name, alive in self.masters),
        )


class _Collector:
    """One scrape's reads of the node, on its loop."""

    def __init__(self, m: ControllerMetrics, only: frozenset[str] | None = None) -> None:
        self.m = m
        self.only = only  # collected(names): the names asked for; None for everything
        self.values = list(m.const_values)

    def family(self, kind: type[_F], name: str, doc: str, extra: tuple[str, ...] = ()) -> _F:
        """A metric family with the node's constant labels (and `extra` ones)."""
        return kind(name, doc, labels=[*self.m.const_names, *extra])

    def wants(self, *families: str) -> bool:
        """Whether a name asked for is one of `families` or one of their samples (`_bucket`, `_gsum`, ...)."""
        return self.only is None or any(n.startswith(f) for n in self.only for f in families)

    def collect(self) -> Iterator[Metric]:
        yield from self._requests(self.family, self.values)
        yield from self._state(self.family, self.values)

    def broker_tables(self) -> BrokerTables | None:
        """The per-broker-set families' copy of the tables, if any of them is wanted."""
        service = self.m.service
        if not self.wants(*PER_SET_FAMILIES):
            return None
        now = service.now_ms()
        return BrokerTables(
            self.family,
            self.values,
            now,
            service.broker_set_names(),
            service.heartbeat_rows(),
            service.broker_set_masters(now),
        )

    def _requests(self, family: _Family, values: list[str]) -> Iterator[Metric]:
        m = self.m
        total = family(
            CounterMetricFamily, "request_total", "total request num", ("request_type", "request_handle_status")
        )
        for (rt, status), n in sorted(m.requests.items()):
            total.add_metric([*values, rt, status], n)
        yield total
        latency = family(HistogramMetricFamily, "request_latency", "request latency in microseconds", ("request_type",))
        for rt, h in sorted(m.latency.items()):
            latency.add_metric([*values, rt], h.buckets(), h.sum)
        yield latency
        elections = family(
            CounterMetricFamily, "election_total", "total elect num", ("cluster", "broker_set", "election_result")
        )
        for key, n in sorted(m.elections.items()):
            elections.add_metric([*values, *key], n)
        yield elections
        rejected = family(
            CounterMetricFamily,
            "controllerd_http_rejected_total",
            "requests refused before reaching the state machine",
            ("reason",),
        )
        for reason, n in sorted(m.rejections.items()):
            rejected.add_metric([*values, reason], n)
        yield rejected
        refused = family(
            CounterMetricFamily,
            "controllerd_tls_refused_total",
            "connections refused by the TLS layer (plain on enforcing, bad certificate, handshake failed or timed out)",
            ("listener", "reason"),
        )
        counts = dict(m.tls_refusals)
        for stat, n in (self._transport_stats() or {}).items():
            if stat.startswith(RAFT_TLS_REFUSED):  # the peer transport's, by reason (raft/transport/tcp.py)
                counts[("raft", stat.removeprefix(RAFT_TLS_REFUSED))] = n
        for (listener, reason), n in sorted(counts.items()):
            refused.add_metric([*values, listener, reason], n)
        yield refused

    def _transport_stats(self) -> Mapping[str, int] | None:
        service = self.m.service
        if not service.started:
            return None
        try:
            return service.node_status().transport
        except Exception:  # noqa: BLE001 - a scrape must answer even if the node is broken
            return None

    def _state(self, family: _Family, values: list[str]) -> Iterator[Metric]:
        m, service = self.m, self.m.service
        role = family(GaugeMetricFamily, "role", "role of current node: 0 unknown, 1 candidate, 2 follower, 3 leader")
        st: NodeStatus | None = None
        if service.started:
            try:
                st = service.node_status()
            except Exception:  # noqa: BLE001 - a scrape must answer even if the node is broken
                log.exception("metrics: node status failed")
        role.add_metric(values, ROLE_VALUES.get(st.role, 0) if st else 0)
        yield role
        yield from self._store(family, values)
        yield from self._alarms(family, values)
        if st is None:
            return

        def gauge(name: str, doc: str, v: float) -> Metric:
            g = family(GaugeMetricFamily, f"controllerd_raft_{name}", doc)
            g.add_metric(values, v)
            return g

        def counter(name: str, doc: str, v: float) -> Metric:
            c = family(CounterMetricFamily, f"controllerd_raft_{name}", doc)
            c.add_metric(values, v)
            return c

        snap = st.snapshot
        yield gauge("term", "current term", st.term)
        yield gauge("is_leader", "1 if this node leads", 1 if st.role is Role.LEADER else 0)
        yield gauge("has_leader", "1 if this node knows a leader", 1 if st.leader else 0)
        yield gauge("commit_index", "highest log index known committed", st.commit)
        yield gauge("applied_index", "highest log index applied to the state machine", st.applied)
        yield gauge("apply_lag_entries", "commit_index - applied_index", st.commit - st.applied)
        yield gauge("log_first_index", "first index in the log (after truncation)", st.first_index)
        yield gauge("log_last_index", "last index in the log", st.last_index)
        yield gauge("voters", "voters in the configuration", len(st.voters))
        yield gauge("learners", "learners in the configuration", len(st.learners))
        yield gauge("last_snapshot_index", "index the latest snapshot covers", snap.index)
        yield gauge("last_snapshot_term", "term of that index", snap.term)
        yield gauge("snapshot_saving", "1 while a snapshot is being written", 1 if snap.saving else 0)
        yield gauge("snapshot_save_duration_seconds", "duration of the latest save by this node", snap.last_save_s)
        newest = m._newest_snapshot(st)
        if newest is not None:
            yield gauge("snapshot_size_bytes", "size of the newest snapshot on disk", sum(f.size for f in newest.files))
            age = max(0.0, time.time() - newest.created_at) if newest.created_at else 0.0
            yield gauge("snapshot_age_seconds", "age of the newest snapshot on disk", age)
        yield counter("snapshot_saves", "snapshots saved by this node", snap.saves)
        yield counter("snapshot_installs", "snapshots installed from a leader", snap.installs)
        yield from self._followers(family, values, st)
        for name, doc, h in (
            ("fsync", "write + fdatasync of one log batch", st.fsync_latency),
            ("commit", "a proposal batch from propose to applied on this leader", st.commit_latency),
        ):
            if h:
                fam = family(HistogramMetricFamily, f"controllerd_raft_{name}_duration_seconds", doc)
                fam.add_metric(values, [(str(b), c) for b, c in h["buckets"]], h["sum"])
                yield fam
        lag = m.service.loop_lag.snapshot()
        lag_buckets = cast("list[tuple[float | str, float]]", lag["buckets"])
        fam = family(
            HistogramMetricFamily,
            "controllerd_event_loop_lag_seconds",
            "how late the event loop ran a 50 ms timer, sampled every 50 ms: how long it went without turning",
        )
        fam.add_metric(values, [(str(b), c) for b, c in lag_buckets], cast(float, lag["sum"]))
        yield fam
        writer = st.log_writer
        if writer:
            yield counter("log_fsyncs", "fsyncs of the log writer (one per batch)", writer.fsyncs)
            yield counter("log_batches", "batches written by the log writer", writer.batches)
            yield counter("log_entries", "entries written by the log writer", writer.entries)
        for key, v in sorted((st.transport or {}).items()):
            if key.startswith(RAFT_TLS_REFUSED):
                continue  # in controllerd_tls_refused_total{listener="raft"}
            if key == "pending_bytes":
                yield gauge("transport_pending_bytes", "encoded messages waiting for peers", v)
            else:
                yield counter(f"transport_{key}", f"peer transport: {key.replace('_', ' ')}", v)
        scans = family(CounterMetricFamily, "controllerd_inactive_broker_scans", "inactive-broker scans proposed")
        scans.add_metric(values, service.scans)
        yield scans
        yield from self._operations(family, values, st)

    def _operations(self, family: _Family, values: list[str], st: NodeStatus) -> Iterator[Metric]:
        """What an operator alerts on (deploy/prometheus/controllerd-alerts.yml): quorum health, leader
        changes, the scan timer's ticks, the snapshot schedule."""
        service = self.m.service

        def one(kind: type[CounterMetricFamily] | type[GaugeMetricFamily], name: str, doc: str, v: float) -> Metric:
            fam = (
                family(CounterMetricFamily, name, doc)
                if kind is CounterMetricFamily
                else family(GaugeMetricFamily, name, doc)
            )
            fam.add_metric(values, v)
            return fam

        yield one(
            GaugeMetricFamily,
            "controllerd_raft_quorum_healthy",
            "leader: 1 if a majority of voters (itself included) answered within an election timeout; "
            "follower: 1 if it knows a leader",
            1 if quorum_healthy(st, service.tick_ms(), service.opts.node.raft.election_timeout_ms) else 0,
        )
        yield one(
            CounterMetricFamily,
            "controllerd_raft_leader_changes",
            "times this node saw the leader change to another node (or come back after none)",
            service.leader_changes,
        )
        runs = family(
            CounterMetricFamily, "controllerd_inactive_broker_scan_runs", "scan timer ticks by outcome", ("outcome",)
        )
        for outcome, n in service.scan_runs.items():
            runs.add_metric([*values, outcome], n)
        yield runs
        if service.scan_last_run_ms is not None:
            yield one(
                GaugeMetricFamily,
                "controllerd_inactive_broker_scan_last_run_timestamp_seconds",
                "when the scan timer last ticked (unix time, this node's clock)",
                service.scan_last_run_ms / 1000,
            )
        yield one(
            GaugeMetricFamily,
            "controllerd_inactive_broker_scan_interval_seconds",
            "scanNotActiveBrokerMillis",
            service.opts.scan_interval_ms / 1000,
        )
        pilot = service.admin.autopilot()
        yield one(
            GaugeMetricFamily,
            "controllerd_raft_autopilot_enabled",
            "1 if autopilot is on here",
            1 if pilot["enabled"] else 0,
        )
        actions = family(
            CounterMetricFamily,
            "controllerd_raft_autopilot_actions",
            "membership changes this node's autopilot made as leader: join, promote, remove; failed attempts",
            ("action",),
        )
        for action, n in pilot["counts"].items():
            actions.add_metric([*values, action], n)
        yield actions
        yield one(
            GaugeMetricFamily,
            "controllerd_raft_snapshot_interval_seconds",
            "jRaftSnapshotIntervalSecs",
            service.opts.node.snapshot.interval_s,
        )

    def _store(self, family: _Family, values: list[str]) -> Iterator[Metric]:
        """RocketMQ's dledger_disk_usage (bytes under controllerStorePath), plus the file system's free space
        and the floor below which writes are refused (controllerMinFreeDiskMB)."""
        opts = self.m.service.opts.node
        path = opts.data_dir
        if not os.path.isdir(path):
            return
        usage = family(GaugeMetricFamily, "dledger_disk_usage", "disk usage of the controller store (bytes)")
        usage.add_metric(values, alarms.dir_bytes(path))
        yield usage
        free = family(GaugeMetricFamily, "controllerd_store_free_bytes", "free bytes on the store's file system")
        free.add_metric(values, alarms.free_bytes(path))
        yield free
        floor = family(
            GaugeMetricFamily, "controllerd_store_min_free_bytes", "controllerMinFreeDiskMB in bytes (0: no floor)"
        )
        floor.add_metric(values, opts.log.min_free_bytes)
        yield floor
        service_opts = self.m.service.opts
        for name, doc, v in (
            (
                "controllerd_store_quota_bytes",
                "controllerStoreQuotaBytes (0: no quota)",
                service_opts.store_quota_bytes,
            ),
            (
                "controllerd_store_alarm_free_bytes",
                "controllerAlarmFreeDiskMB in bytes: below it NOSPACE is raised (0: off)",
                service_opts.alarm_free_disk_mb << 20,
            ),
        ):
            g = family(GaugeMetricFamily, name, doc)
            g.add_metric(values, v)
            yield g

    def _alarms(self, family: _Family, values: list[str]) -> Iterator[Metric]:
        """One series per alarm type (1 while any member has it raised), and one per raised (alarm, member)."""
        service = self.m.service
        active = family(
            GaugeMetricFamily, "controllerd_alarm_active", "1 while any member has raised the alarm", ("alarm",)
        )
        raised = family(
            GaugeMetricFamily,
            "controllerd_alarm_raised",
            "1 per member that raised the alarm (the applied list)",
            ("alarm", "member"),
        )
        for alarm in ALARMS:
            members = service.raised_alarms(alarm)
            active.add_metric([*values, alarm], 1 if members else 0)
            for member, _at, _detail in members:
                raised.add_metric([*values, alarm, member], 1)
        yield active
        yield raised
        checks = family(
            CounterMetricFamily,
            "controllerd_store_checks",
            "this node's NOSPACE checks by outcome: ok, nospace (past a limit), failed (could not raise)",
            ("outcome",),
        )
        for outcome, n in service.alarm_checks.items():
            checks.add_metric([*values, outcome], n)
        yield checks

    def _followers(self, family: _Family, values: list[str], st: NodeStatus) -> Iterator[Metric]:
        """Per-peer replication progress, on the leader only (a follower tracks none)."""
        tick_s = self.m.service.tick_ms() / 1000
        match = family(
            GaugeMetricFamily, "controllerd_raft_follower_match_index", "highest index known on the peer", ("peer",)
        )
        lag = family(GaugeMetricFamily, "controllerd_raft_follower_lag_entries", "log_last_index - match", ("peer",))
        contact = family(
            GaugeMetricFamily,
            "controllerd_raft_follower_last_contact_seconds",
            "since the peer last answered (-1: not this term)",
            ("peer",),
        )
        for peer, pr in sorted(st.progress.items()):
            if peer == st.id:
                continue
            match.add_metric([*values, peer], pr.match)
            lag.add_metric([*values, peer], pr.lag)
            ticks = pr.contact_ticks
            contact.add_metric([*values, peer], -1 if ticks < 0 else round(ticks * tick_s, 3))
        yield match
        yield lag
        yield contact


def quorum_healthy(st: NodeStatus, tick_ms: float, election_timeout_ms: int) -> bool:
    """A leader: a majority of its voters, itself included, answered within an election timeout. A follower or
    candidate: it knows a leader."""
    if st.role is not Role.LEADER:
        return bool(st.leader)
    recent = 0
    for v in st.voters:
        pr = st.progress.get(v)
        if v == st.id or (pr is not None and 0 <= pr.contact_ticks * tick_ms <= election_timeout_ms):
            recent += 1
    return recent * 2 > len(st.voters)
