"""ApiSettings: what the HTTP layer needs beyond the ControllerService (docs/http.md "Settings")."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from api.service.tls import TlsSettings
from raft.options import setting

DEFAULT_MAX_BODY_BYTES = 256 * 1024
DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024  # RocketMQ's com.rocketmq.remoting.frameMaxLength default (16 MiB)
MIN_FRAME_BYTES = 64 * 1024  # below this, a 1006 naming a few thousand brokers or a 1009 body would not fit
MAX_FRAME_BYTES = 1024 * 1024 * 1024  # a frame is buffered whole before it is decoded: 1 GiB per connection at most
# RocketMQ rejects updates of these keys whatever configBlackList says (ControllerRequestProcessor).
ALWAYS_BLACK_LISTED = ("configBlackList", "configStorePath", "rocketmqHome")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


EXPORTER_TYPES = {"DISABLE": 0, "OTLP_GRPC": 1, "PROM": 2, "LOG": 3}  # RocketMQ's MetricsExporterType


def exporter_type(value: str) -> str:
    """metricsExporterType by name or number, as RocketMQ's setters take it (`PROM` or `2`); ValueError
    listing the valid values."""
    v = value.strip()
    for name, number in EXPORTER_TYPES.items():
        if v == name or v == str(number):
            return name
    valid = ", ".join(f"{n} ({i})" for n, i in EXPORTER_TYPES.items())
    raise ValueError(f"unknown metrics exporter type {value!r}; one of {valid}")


@dataclass(frozen=True)
class MetricsExport:
    """RocketMQ's metrics exporter keys (ControllerMetricsManager): where this node pushes or serves its series
    besides /metrics on its HTTP address (api/export.py, docs/operations.md "Metrics exporters")."""

    exporter_type: str = setting(
        "metricsExporterType",
        "str",
        "DISABLE",
        type_doc="`DISABLE` (0), `OTLP_GRPC` (1), `PROM` (2) or `LOG` (3)",
        doc="As in RocketMQ: `PROM` serves the series on `metricsPromExporterHost:metricsPromExporterPort` "
        "(Prometheus text format), `OTLP_GRPC` pushes them to `metricsGrpcExporterTarget` every "
        "`metricGrpcExporterIntervalInMills`, `LOG` logs them every `metricLoggingExporterIntervalInMills`. "
        "/metrics on the HTTP address is served whatever this says.",
    )
    prom_host: str = setting(
        "metricsPromExporterHost",
        "text",
        "",
        default_doc="empty, meaning `0.0.0.0`",
        doc="With `metricsExporterType=PROM`: the address the exporter listens on.",
    )
    prom_port: int = setting(
        "metricsPromExporterPort",
        "int",
        5557,
        minimum=1,
        maximum=65535,
        doc="With `metricsExporterType=PROM`: the port the exporter listens on.",
    )
    grpc_target: str = setting(
        "metricsGrpcExporterTarget",
        "text",
        "",
        doc="With `metricsExporterType=OTLP_GRPC` (required then): the OTLP/gRPC endpoint, `host:port` "
        "(TLS, as RocketMQ prefixes `https://`) or `http://host:port` (plaintext).",
    )
    grpc_headers: str = setting(
        "metricsGrpcExporterHeader",
        "text",
        "",
        doc="With `OTLP_GRPC`: `key:value,key:value` gRPC metadata sent with every export.",
    )
    grpc_timeout_ms: int = setting(
        "metricGrpcExporterTimeOutInMills", "int", 3000, minimum=1, doc="With `OTLP_GRPC`: deadline of one export."
    )
    grpc_interval_ms: int = setting(
        "metricGrpcExporterIntervalInMills", "int", 60_000, minimum=1, doc="With `OTLP_GRPC`: period of the exports."
    )
    log_interval_ms: int = setting(
        "metricLoggingExporterIntervalInMills",
        "int",
        10_000,
        minimum=1,
        doc="With `metricsExporterType=LOG`: period of the metrics log records (logger `controllerd.metrics`).",
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "exporter_type", exporter_type(self.exporter_type))  # `2` -> `PROM`
        if self.exporter_type == "OTLP_GRPC" and not self.grpc_target:
            raise ValueError("metricsExporterType=OTLP_GRPC needs metricsGrpcExporterTarget")
        pairs(self.grpc_headers, "metricsGrpcExporterHeader")

    def headers(self) -> dict[str, str]:
        return pairs(self.grpc_headers, "metricsGrpcExporterHeader")


def pairs(text: str, key: str) -> dict[str, str]:
    """RocketMQ's `k:v,k:v` lists (metricsLabel, metricsGrpcExporterHeader); empty items are skipped as
    RocketMQ's Splitter does. ValueError naming the key and the item that is not `k:v` (RocketMQ only warns)."""
    out = {}
    for item in text.split(","):
        if not item:
            continue
        parts = item.split(":")
        if len(parts) != 2 or not parts[0]:
            raise ValueError(f"{key}: {item!r} is not key:value")
        out[parts[0]] = parts[1]
    return out


@dataclass(frozen=True)
class ApiSettings:
    """Options of `api.http.app.create_app`. The daemon fills them from controller.conf (cli/config.py)."""

    admin_token: str | None = None
    """[controllerAdminToken] bearer token the admin and raft endpoints require; None: no check."""
    admin_token_file: str | None = None
    """[controllerAdminTokenFile] file holding the accepted token(s), one per line (two during a rotation),
    re-read whenever it changes; used instead of admin_token. Unreadable or empty: every request is refused."""
    max_body_bytes: int = setting(
        "controllerHttpMaxBodyBytes",
        "int",
        DEFAULT_MAX_BODY_BYTES,
        minimum=1024,
        doc="A request body larger than this is refused with 413 `BODY_TOO_LARGE` before it is parsed (ours).",
    )
    """Largest request body accepted; a larger one is refused with 413 before it is parsed."""
    max_connections: int = setting(
        "controllerHttpMaxConnections",
        "int",
        1000,
        minimum=1,
        doc="Concurrent HTTP connections and requests served; beyond, 503 at once (uvicorn `limit_concurrency`; ours).",
    )
    """[controllerHttpMaxConnections] concurrent connections and requests served; beyond, 503 at once."""
    keep_alive_s: float = setting(
        "controllerHttpKeepAliveSecs",
        "int",
        5.0,
        minimum=1,
        doc="An idle keep-alive connection is closed after this many seconds (ours).",
    )
    """[controllerHttpKeepAliveSecs] an idle keep-alive connection is closed after this long."""
    address: str | None = None
    """Metric label `address`; None: the node's raft id (RocketMQ sets it to jRaftServerId in jRaft mode)."""
    group: str | None = None
    """Metric label `group`; None: the service's group id (jRaftGroupId)."""
    peer_id: str | None = None
    """Metric label `peer_id`; None: the node's raft id."""
    metrics_labels: Mapping[str, str] = field(default_factory=dict)
    """Extra constant labels on every series (RocketMQ's metricsLabel `k:v,k:v` pairs)."""
    metrics_export: MetricsExport = field(default_factory=MetricsExport)
    """Where the series go besides /metrics (metricsExporterType and its keys)."""
    config_black_list: tuple[str, ...] = setting(
        "configBlackList",
        "keys",
        ("configBlackList", "configStorePath"),
        type_doc="`;`-separated keys",
        doc="Keys that `updateControllerConfig` may not change.",
    )
    """[configBlackList] keys PUT /api/v1/admin/config refuses with 16 NO_PERMISSION (plus ALWAYS_BLACK_LISTED)."""
    local_config: Mapping[str, str] = field(default_factory=dict)
    """This node's node-local effective config as text, secrets redacted (cli.config.effective_items):
    GET /api/v1/admin/config shows it next to the replicated keys."""
    remoting_max_frame_bytes: int = setting(
        "controllerRemotingMaxFrameBytes",
        "int",
        DEFAULT_MAX_FRAME_BYTES,
        minimum=MIN_FRAME_BYTES,
        maximum=MAX_FRAME_BYTES,
        default_doc="`16777216` (16 MiB)",
        doc="The largest RocketMQ remoting frame a node reads (RocketMQ's `com.rocketmq.remoting.frameMaxLength` "
        "system property, same default). A frame whose length field says more means the stream is out of step: "
        "that connection is closed with a warning naming the length, others are untouched (docs/remoting.md). A "
        "frame is buffered whole before it is decoded, hence the 1 GiB ceiling; the floor keeps room for a 1006 "
        "naming thousands of brokers. Ours as a key.",
    )
    """[controllerRemotingMaxFrameBytes] a remoting frame whose length field says more closes its connection."""
    audit_log: str | None = None
    """[controllerAuditLog] the audit log both front ends append accepted admin requests to; None: none."""
    remoting_acl_file: str | None = None
    """[controllerAclFile] users allowed to send state-changing remoting requests (api/service/acl.py); None: open."""
    remoting_tls: TlsSettings = field(default_factory=TlsSettings)
    http_tls: bool = False
    """[controllerHttpTls] serve HTTP as HTTPS with remoting_tls's certificate settings (whatever its mode)."""
    """[tls.server.* and tls.config.file] TLS of the remoting port (api/service/tls.py); disabled by default."""
    max_transfer_lag_entries: int = 100
    """POST /api/v1/raft/transfer-leader refuses a target further behind the leader's log than this."""
    transfer_timeout_s: float | None = None
    """How long a leadership transfer may take; None: the node's default (two election timeouts)."""
    add_peer_timeout_s: float = 30.0
    """How long POST /api/v1/raft/peers waits for the new peer to catch up before it is promoted."""

    def __post_init__(self) -> None:
        if self.admin_token is not None and not self.admin_token:
            raise ValueError("admin_token must be None (no check) or a non-empty string")
        if self.max_body_bytes < 1024:
            raise ValueError(f"max_body_bytes must be >= 1024, got {self.max_body_bytes}")
        if self.max_connections < 1 or self.keep_alive_s <= 0:
            raise ValueError("max_connections and keep_alive_s must be positive")
        if not MIN_FRAME_BYTES <= self.remoting_max_frame_bytes <= MAX_FRAME_BYTES:
            raise ValueError(
                f"remoting_max_frame_bytes must be in {MIN_FRAME_BYTES}..{MAX_FRAME_BYTES}, "
                f"got {self.remoting_max_frame_bytes}"
            )
        if self.max_transfer_lag_entries < 0:
            raise ValueError(f"max_transfer_lag_entries must be >= 0, got {self.max_transfer_lag_entries}")
        if self.add_peer_timeout_s <= 0 or (self.transfer_timeout_s is not None and self.transfer_timeout_s <= 0):
            raise ValueError("add_peer_timeout_s and transfer_timeout_s must be positive")
        for name in self.metrics_labels:
            if not _LABEL.fullmatch(name) or name.startswith("__"):
                raise ValueError(f"metrics label {name!r} is not a valid Prometheus label name")

    def admin_tokens(self) -> tuple[str, ...] | None:
        """The accepted bearer tokens; None: no check."""
        if self.admin_token_file is not None:
            return _TOKEN_FILES.get(self.admin_token_file)
        return None if self.admin_token is None else (self.admin_token,)

    def black_list(self) -> frozenset[str]:
        return frozenset(ALWAYS_BLACK_LISTED) | frozenset(self.config_black_list)


MAX_TOKENS = 2  # the current token and, during a rotation, the next one


def read_token_file(path: str) -> tuple[str, ...]:
    """The tokens of a controllerAdminTokenFile (blank lines and surrounding spaces ignored); ValueError
    saying what is wrong (never the token)."""
    with open(path, encoding="utf-8") as f:
        tokens = tuple(t for t in (line.strip() for line in f) if t)
    if not tokens:
        raise ValueError(f"{path}: no token in the file")
    if len(tokens) > MAX_TOKENS:
        raise ValueError(f"{path}: {len(tokens)} tokens; at most {MAX_TOKENS} (the current and the next one)")
    return tokens


class _TokenFiles:
    """Token files re-read when their (mtime, size, inode) changes: a rotation needs no restart."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[tuple[int, int, int], tuple[str, ...]]] = {}

    def get(self, path: str) -> tuple[str, ...]:
        try:
            st = os.stat(path)
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
            with self._lock:
                hit = self._cache.get(path)
                if hit is not None and hit[0] == key:
                    return hit[1]
            tokens = read_token_file(path)
        except (OSError, ValueError):
            return ()  # fail closed: no token is accepted
        with self._lock:
            self._cache[path] = (key, tokens)
        return tokens


_TOKEN_FILES = _TokenFiles()
