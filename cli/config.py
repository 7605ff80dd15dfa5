"""The controller's RocketMQ `.properties` config: a strict parser and the typed `ControllerConfig`.

RocketMQ binds one `java.util.Properties` onto `ControllerConfig` and `JraftConfig` by setter name and
silently ignores unknown keys and values that fail to parse (docs/config.md). We read the same files with
the same key names (case-sensitive), but strictly:

* an unknown key is a warning naming the key, its file:line and the nearest known key (a `ConfigWarning`
  with `unknown_key` set: `controllerd check-config` makes it an error unless `--lenient`, and a node that
  starts anyway says in its boot line which keys it ignored);
* a bad value raises `ConfigError` naming the key, the value (secrets redacted), file:line and the reason.

The file syntax is `java.util.Properties.load`'s: `key=value`, `key: value` or `key value`; `#` and `!`
comment lines; blank lines; a line ending in an odd number of backslashes continues on the next line
(leading whitespace of the continuation dropped); escapes `\\t \\n \\r \\f \\uXXXX` and backslash-anything for
that character (`\\\\ \\= \\: \\#`, `\\ `). Values are trimmed as RocketMQ trims them. An XML `<!-- ... -->`
block (RocketMQ's namesrv samples start with one) is skipped. The file is read as UTF-8 (Java 9+ resource
bundle convention; plain ASCII files read the same under ISO-8859-1).
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import logging
import os
import re
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypedDict, Unpack

from api.service import ServiceOptions
from api.service.acl import AclFileError, load_users
from api.service.properties import PropertiesError, Property
from api.service.properties import parse_properties as _parse_properties
from api.service.settings import ApiSettings, MetricsExport, exporter_type, pairs, read_token_file
from api.service.tls import (
    CLIENT_AUTH,
    DEFAULT_CONFIG_FILE,
    MODES,
    ServerTls,
    TlsError,
    TlsSettings,
    build_context,
)
from raft.options import (
    NODE_LOCAL,
    REPLICATED,
    SETTING,
    AutopilotOptions,
    LogStorageOptions,
    NodeOptions,
    PeerTls,
    RaftOptions,
    Setting,
    SnapshotOptions,
    file_text,
    same_setting,
    setting,
)
from statemachine.config import DEFAULTS as REPLICATED_DEFAULTS
from statemachine.values import DataclassField, JSONObject

log = logging.getLogger("controllerd.config")
log.addHandler(logging.NullHandler())

JRAFT = "jRaft"
LEASE_BASED = "ReadOnlyLeaseBased"
READ_ONLY_OPTIONS = ("ReadOnlySafe", LEASE_BASED)  # JRaft's ReadOnlyOption
DEV_CLUSTER_SECRET = b"rocketmq-jraft-controller/loopback-only/dev-secret"
"""Used when jRaftClusterSecret is unset and every raft and HTTP address is loopback (a warning says so).
It is public, so it protects nothing: it exists so that `make run` works without setup, where no other
host can reach the peers anyway. Any non-loopback address makes jRaftClusterSecret mandatory."""
REDACTED = "****"
JAVA_INT_MAX = 2**31 - 1
JAVA_LONG_MAX = 2**63 - 1
HTTP_PORT_OFFSET = -1000
"""controllerHttpAddr unset: each node serves HTTP on its remoting address's host, port - 1000 (9770 -> 8770), so
that a stock RocketMQ controller.conf runs unchanged and an operator can guess where HTTP is."""
HTTP_DEFAULT_SOURCE = "default: each jRaftControllerRPCAddr port - 1000"


class ConfigError(Exception):
    """A config that must not start a node. `str()` is one line: `file:line: key=value: reason`."""

    def __init__(
        self,
        reason: str,
        *,
        path: str,
        line: int | None = None,
        key: str | None = None,
        value: str | None = None,
    ) -> None:
        self.reason, self.path, self.line, self.key, self.value = reason, path, line, key, value
        where = f"{path}:{line}" if line is not None else path
        if key is None:
            text = f"{where}: {reason}"
        else:
            shown = _shown(key, value if value is not None else "")
            default = "" if line is not None else " (default; not set in the file)"
            text = f"{where}: {key}={shown}{default}: {reason}"
        self.warnings: tuple[str, ...] = ()  # the file's warnings, when the error comes from parse_config
        super().__init__(text)

    @property
    def errors(self) -> list[ConfigError]:
        """Every error found in the file (check-config reports them all), this one first."""
        return [self]


class ConfigWarning(str):
    """One warning line (a plain `str` to every caller). For an unknown key, `unknown_key`, `line` and `hint`
    (the " (did you mean ...?)" part, or "") say which: RocketMQ ignores such a key silently, so a typo leaves
    the setting on its default; `error_text()` is the line as an error."""

    unknown_key: str | None
    line: int | None
    hint: str

    def __new__(
        cls, text: str, *, unknown_key: str | None = None, line: int | None = None, hint: str = ""
    ) -> ConfigWarning:
        w = super().__new__(cls, text)
        w.unknown_key, w.line, w.hint = unknown_key, line, hint
        return w

    def error_text(self) -> str:
        return self.removesuffix("; ignored")


def unknown_keys(warnings: list[str]) -> list[ConfigWarning]:
    """The warnings about unknown keys, in file order."""
    return [w for w in warnings if isinstance(w, ConfigWarning) and w.unknown_key is not None]


class ConfigErrors(ConfigError):
    """Several errors in one file: `str()` is one line per error; `errors` lists them."""

    def __init__(self, errors: list[ConfigError]) -> None:
        first = errors[0]
        super().__init__(first.reason, path=first.path, line=first.line, key=first.key, value=first.value)
        self._errors = errors
        self.args = ("\n".join(str(e) for e in errors),)

    def __str__(self) -> str:
        return self.args[0]

    @property
    def errors(self) -> list[ConfigError]:
        return list(self._errors)


# --------------------------------------------------------------------------------------------------------------
# java.util.Properties syntax (api/service/properties.py), its errors as ConfigError


def parse_properties(text: str, path: str = "<string>") -> list[Property]:
    """Every key/value of a .properties text in file order (duplicates kept; the last one wins when bound)."""
    try:
        return _parse_properties(text, path)
    except PropertiesError as e:
        raise ConfigError(e.reason, path=e.path, line=e.line) from None


# --------------------------------------------------------------------------------------------------------------
# Keys


def key(name: str, kind: str, default: str | None, **decl: object) -> DataclassField:
    """A ControllerConfig field declaring controller.conf key `name` (default: as the file spells it, None:
    unset) that no lower layer's options declare."""
    return setting(name, kind, text_default=default, **decl)


def replicated_key(name: str, kind: str, **decl: object) -> DataclassField:
    """A ControllerConfig field declaring a replicated key (statemachine.commands.CONFIG_KEYS). Its default is the
    state machine's (statemachine.config.DEFAULTS), not declared here: every replica, `rmqctl log replay` and the
    audit decide with it before a 1009 sets the key, so it belongs to what applying the log means."""
    return key(name, kind, file_text(REPLICATED_DEFAULTS[name]), scope=REPLICATED, **decl)


@dataclass(frozen=True, slots=True)
class KeySpec:
    """One key of the file and the ControllerConfig field it sets: a view of the key's declaration."""

    attr: str
    setting: Setting

    @property
    def key(self) -> str:
        return self.setting.key

    @property
    def kind(self) -> str:
        """int | long | bool | str | text (may be empty) | addr | addrs | path | keys | secret"""
        return self.setting.kind

    @property
    def default(self) -> str | None:
        """The default as the file would spell it; None means unset."""
        return self.setting.default

    @property
    def minimum(self) -> int | None:
        return self.setting.minimum

    @property
    def maximum(self) -> int | None:
        """Largest value of an int; None: a Java int's."""
        return self.setting.maximum

    @property
    def replicated(self) -> bool:
        return self.setting.replicated

    @property
    def doc(self) -> str:
        return self.setting.doc


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """The effective config of one node. Build it with `load_config` / `parse_config`, not by hand.

    Each field but `path` and `sources` is one controller.conf key, in the order of docs/config.md's table: its
    declaration (`raft.options.Setting`: RocketMQ name, kind, default, scope, doc) is the field's metadata,
    written here (`key(...)`) or, for a key that a lower layer's options read with the same meaning and
    default, on that options field and only referred to here (`same_setting(...)`)."""

    path: str
    controller_type: str = key(
        "controllerType",
        "str",
        JRAFT,
        type_doc="`jRaft`",
        default_doc="`jRaft` (RocketMQ: `DLedger`)",
        doc="Controller back end. The `--type jraft` flag wins over the file, with a warning if they differ.",
    )
    group_id: str = same_setting(NodeOptions, "group_id")
    server_id: str = key(
        "jRaftServerId",
        "addr",
        "localhost:9880",
        doc="This node's raft address and its node id. Must be one of `jRaftInitConf`.",
    )
    init_conf: tuple[str, ...] = key(
        "jRaftInitConf",
        "addrs",
        "localhost:9880,localhost:9881,localhost:9882",
        doc="Every raft peer, this node included.",
    )
    rpc_addrs: tuple[str, ...] = key(
        "jRaftControllerRPCAddr",
        "addrs",
        "localhost:9770,localhost:9771,localhost:9772",
        doc="As in RocketMQ: the RocketMQ remoting addresses brokers (`controllerAddr`) and mqadmin connect to, paired by position with `jRaftInitConf`; this node listens for remoting on its own entry (docs/remoting.md).",
    )
    http_addrs: tuple[str, ...] = key(
        "controllerHttpAddr",
        "addrs",
        None,
        default_doc="each `jRaftControllerRPCAddr` entry, port - 1000 (`localhost:8770,localhost:8771,localhost:8772`)",
        doc="Ours: the HTTP API addresses (rmqctl, `/ui/`, `/metrics`, health, the 2007 redirects of HTTP clients), paired by position with `jRaftInitConf`. The default is derived, not fixed, so that a stock RocketMQ `controller.conf` (remoting 9770..9772) runs unchanged with HTTP on 8770..8772, and an operator who knows the remoting address knows the HTTP one. `controllerd check-config` and the boot log line print this node's two addresses; `-p` prints the derived value with the source `default: each jRaftControllerRPCAddr port - 1000`. `make run` sets remoting :10770+ and leaves this key out (HTTP :9770+).",
    )
    """controllerHttpAddr, or when unset the derived default (HTTP_PORT_OFFSET; source HTTP_DEFAULT_SOURCE)."""
    store_path: str = key(
        "controllerStorePath",
        "path",
        "",
        default_doc="empty, meaning `~/jRaftController`",
        doc="Data directory (log, raft meta, snapshots). `~` is expanded.",
    )
    election_timeout_ms: int = same_setting(RaftOptions, "election_timeout_ms")
    read_only_option: str = key(
        "jRaftReadOnlyOption",
        "str",
        "ReadOnlySafe",
        type_doc="`ReadOnlySafe` or `ReadOnlyLeaseBased`",
        doc='JRaft\'s `ReadOnlyOption`. `ReadOnlySafe`: every linearizable read confirms leadership with a heartbeat round (ReadIndex). `ReadOnlyLeaseBased`: the leader answers from its lease while it holds; the lease lives on the monotonic clock and trusts `jRaftMaxClockDriftPercent` (docs/raft.md, "Reads"). Needs `jRaftCheckQuorum=true`. Ours: RocketMQ has no such key.',
    )
    check_quorum: bool = same_setting(RaftOptions, "check_quorum")
    max_clock_drift_percent: int = key(
        "jRaftMaxClockDriftPercent",
        "int",
        "1",
        minimum=0,
        type_doc="int 0..99",
        doc="Bound on how far any node's clock rate may stray from real time. The lease is `0.9 x jRaftElectionTimeoutMs x (100 - d) / (100 + d)`. Only read with `ReadOnlyLeaseBased`. Ours.",
    )
    scan_wait_timeout_ms: int = same_setting(ServiceOptions, "scan_wait_ms")
    snapshot_interval_secs: int = same_setting(SnapshotOptions, "interval_s")
    snapshot_threshold: int = same_setting(SnapshotOptions, "threshold_entries")
    snapshot_log_bytes: int = same_setting(SnapshotOptions, "threshold_log_bytes")
    max_snapshot_reserved: int = same_setting(SnapshotOptions, "max_reserved")
    snapshot_trailing_logs: int = same_setting(SnapshotOptions, "log_margin")
    scan_not_active_broker_ms: int = same_setting(ServiceOptions, "scan_interval_ms")
    enable_elect_unclean_master: bool = replicated_key(
        "enableElectUncleanMaster", "bool", doc="Allow electing a master outside the SyncStateSet."
    )
    elect_master_max_retry_count: int = replicated_key(
        "electMasterMaxRetryCount", "int", minimum=0, doc="Re-election attempts."
    )
    notify_broker_role_changed: bool = replicated_key(
        "notifyBrokerRoleChanged", "bool", doc="Push role changes (1008) to brokers after an election."
    )
    thread_pool_nums: int = key(
        "controllerThreadPoolNums", "int", "16", minimum=1, doc="Request worker count (RocketMQ parity)."
    )
    request_queue_capacity: int = key(
        "controllerRequestThreadPoolQueueCapacity",
        "int",
        "50000",
        minimum=1,
        doc="Bound on queued requests (RocketMQ parity).",
    )
    config_black_list: tuple[str, ...] = same_setting(ApiSettings, "config_black_list")
    config_store_path: str = key(
        "configStorePath",
        "path",
        "~/controller/controller.properties",
        doc="Where RocketMQ persists runtime config updates.",
    )
    admin_token: str | None = key(
        "controllerAdminToken",
        "secret",
        None,
        doc="Bearer token that the admin and raft HTTP endpoints require (ours).",
    )
    cluster_secret: str | None = key(
        "jRaftClusterSecret",
        "secret",
        None,
        doc="Shared secret that authenticates every raft frame between peers (ours). It must be the same on every node.",
    )
    """As configured; None when unset (then `secret_bytes` is the dev secret, loopback only)."""
    http_max_body_bytes: int = same_setting(ApiSettings, "max_body_bytes")
    http_max_connections: int = same_setting(ApiSettings, "max_connections")
    http_keep_alive_secs: int = same_setting(ApiSettings, "keep_alive_s")
    min_free_disk_mb: int = key(
        "controllerMinFreeDiskMB",
        "int",
        str(LogStorageOptions().min_free_bytes >> 20),
        minimum=0,
        doc="While the file system of `controllerStorePath` has less free space than this many MiB, the leader refuses writes with 503 `UNAVAILABLE` (reads go on), and accepts them again by itself once space is freed; a follower stops taking entries and snapshots from the leader (it stays up, a follower, and answers reads) and catches up by itself once space is freed; 0 disables the check. Running out of space inside a WAL write anyway (less than this reserve left for one batch) stops the node instead (docs/reliability.md).",
    )
    admin_token_file: str = key(
        "controllerAdminTokenFile",
        "path",
        "",
        default_doc="unset",
        doc="File holding the admin token instead of `controllerAdminToken` (ours): one token per line, two during a rotation (both accepted), re-read whenever the file changes (replace it atomically: write a temp file, rename it over). Keeps the token out of the config file and the process list. Unreadable or empty later: every protected request gets 401. Setting both keys is an error.",
    )
    """controllerAdminTokenFile; "" when unset."""
    remoting_max_frame_bytes: int = same_setting(ApiSettings, "remoting_max_frame_bytes")
    audit_log: str = key(
        "controllerAuditLog",
        "path",
        "",
        default_doc="`<controllerStorePath>/audit.log`",
        doc="Ours: the audit log, one JSON line per accepted state-changing admin request from either front end (remoting 1009, 1011, designated 1002; HTTP writes under /api/v1/admin and /api/v1/raft): who, from where, what, outcome; fsync'd per record. `rmqctl audit FILE` reads it. docs/security.md.",
    )
    acl_file: str = key(
        "controllerAclFile",
        "path",
        "",
        default_doc="unset (no check)",
        doc="Ours: the users allowed to send state-changing remoting requests (904, 1001, 1002, 1003, 1009, 1011, 1012, 1013), signed as RocketMQ's AclClientRPCHook signs; others get 16 NO_PERMISSION. Properties text `user.<accessKey>.secretKey|role|brokerNames`, role `admin` or `broker` (only for its brokerNames, never 1009/1011); re-read when it changes. docs/security.md.",
    )
    peer_tls_cert_path: str = key(
        "jRaftTlsCertPath",
        "path",
        "",
        default_doc="unset (peers over plain TCP, frames MAC'd)",
        doc="Ours: PEM certificate of this node for mutual TLS between peers; its subject CN must be this node's `jRaftServerId`. With `jRaftTlsKeyPath` and `jRaftTlsTrustCertPath` (all three or none). A peer whose certificate names another id than the one it speaks as (or that is dialled as) is refused. The frame MAC stays. docs/security.md.",
    )
    peer_tls_key_path: str = key(
        "jRaftTlsKeyPath", "path", "", default_doc="unset", doc="PEM private key of `jRaftTlsCertPath`."
    )
    peer_tls_key_password: str | None = key(
        "jRaftTlsKeyPassword", "secret", None, doc="Password of an encrypted `jRaftTlsKeyPath`."
    )
    peer_tls_trust_cert_path: str = key(
        "jRaftTlsTrustCertPath",
        "path",
        "",
        default_doc="unset",
        doc="PEM CA certificate(s) every peer's certificate must chain to.",
    )
    http_tls: bool = key(
        "controllerHttpTls",
        "bool",
        "false",
        doc="Ours: serve `controllerHttpAddr` as HTTPS with the `tls.server.*` certificate, key and client-certificate settings (and `tls.config.file`), whatever `tls.server.mode` says; reloaded as the remoting ones. rmqctl then needs `https://` addresses and `--cacert` (and `--cert`/`--key` when client certificates are required). docs/security.md.",
    )
    tls_server_mode: str = key(
        "tls.server.mode",
        "str",
        "disabled",
        type_doc="`disabled`, `permissive` or `enforcing`",
        default_doc="`disabled` (RocketMQ: `permissive`, with a self-signed test certificate)",
        doc="RocketMQ's TLS mode of the remoting port (a JVM system property there, a key here): `permissive` serves TLS and plain on the one port (a first byte 0x16 means TLS), `enforcing` closes every plain connection, `disabled` closes every TLS one. Other values are an error (RocketMQ reads them as `permissive`). docs/security.md.",
    )
    tls_config_file: str = key(
        "tls.config.file",
        "path",
        DEFAULT_CONFIG_FILE,
        doc="RocketMQ's TLS properties file: when it exists, its `tls.test.mode.enable` and `tls.server.*` keys win over this file's. Re-read whenever a certificate is reloaded (SIGHUP, or a change of any file named).",
    )
    tls_test_mode: bool = key(
        "tls.test.mode.enable",
        "bool",
        "true",
        doc="As RocketMQ: `true` serves a self-signed certificate made at start and ignores the certificate keys, checking no client certificate. Set `false` to use `tls.server.certPath`.",
    )
    tls_need_client_auth: str = key(
        "tls.server.need.client.auth",
        "str",
        "none",
        type_doc="`none`, `optional` or `require`",
        doc="Whether a client certificate is requested (`optional`) or required (`require`). Anything but `none` needs `tls.server.authClient=true` and `tls.server.trustCertPath`: RocketMQ would accept any certificate there, this controller refuses the config.",
    )
    tls_cert_path: str = key(
        "tls.server.certPath", "path", "", default_doc="unset", doc="PEM certificate (chain) of the remoting port."
    )
    tls_key_path: str = key(
        "tls.server.keyPath", "path", "", default_doc="unset", doc="PEM private key (PKCS#8, as Netty reads it)."
    )
    tls_key_password: str | None = key(
        "tls.server.keyPassword", "secret", None, doc="Password of an encrypted `tls.server.keyPath`."
    )
    tls_auth_client: bool = key(
        "tls.server.authClient",
        "bool",
        "false",
        doc="Verify client certificates against `tls.server.trustCertPath`.",
    )
    tls_trust_cert_path: str = key(
        "tls.server.trustCertPath",
        "path",
        "",
        default_doc="unset",
        doc="PEM CA certificate(s) that client certificates must chain to.",
    )
    autopilot: bool = same_setting(AutopilotOptions, "enabled")
    autopilot_stabilization_secs: int = same_setting(AutopilotOptions, "stabilization_s")
    autopilot_dead_server_secs: int = same_setting(AutopilotOptions, "dead_server_s")
    autopilot_min_quorum: int = same_setting(AutopilotOptions, "min_quorum")
    corrupt_check_entries: int = same_setting(ServiceOptions, "corrupt_check_entries")
    corrupt_check_interval_ms: int = same_setting(ServiceOptions, "corrupt_check_interval_ms")
    feature_level_auto: bool = same_setting(ServiceOptions, "feature_level_auto")
    feature_check_interval_ms: int = same_setting(ServiceOptions, "feature_check_interval_ms")
    store_quota_bytes: int = same_setting(ServiceOptions, "store_quota_bytes")
    alarm_free_disk_mb: int = same_setting(ServiceOptions, "alarm_free_disk_mb")
    alarm_check_interval_ms: int = same_setting(ServiceOptions, "alarm_check_interval_ms")
    metrics_exporter_type: str = same_setting(MetricsExport, "exporter_type")
    metrics_prom_host: str = same_setting(MetricsExport, "prom_host")
    metrics_prom_port: int = same_setting(MetricsExport, "prom_port")
    metrics_grpc_target: str = same_setting(MetricsExport, "grpc_target")
    metrics_grpc_headers: str = same_setting(MetricsExport, "grpc_headers")
    metrics_grpc_timeout_ms: int = same_setting(MetricsExport, "grpc_timeout_ms")
    metrics_grpc_interval_ms: int = same_setting(MetricsExport, "grpc_interval_ms")
    metrics_log_interval_ms: int = same_setting(MetricsExport, "log_interval_ms")
    metrics_label: str = key(
        "metricsLabel",
        "text",
        "",
        default_doc="empty",
        doc="As in RocketMQ: `key:value,key:value` constant labels added to every series (after `address`, `group`, `peer_id`, which they cannot replace).",
    )
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    """key -> "default", "<file>:<line>" or "--type". (A default only because the key fields above, declared
    through `key(...)`, look defaulted to mypy; the parser always passes it.)"""

    @property
    def secret_bytes(self) -> bytes:
        return self.cluster_secret.encode() if self.cluster_secret is not None else DEV_CLUSTER_SECRET

    def line(self, key: str) -> int | None:
        src = self.sources.get(key, "default")
        return int(src.rsplit(":", 1)[1]) if src.startswith(self.path + ":") else None


KEYS: tuple[KeySpec, ...] = tuple(
    KeySpec(f.name, f.metadata[SETTING]) for f in dataclasses.fields(ControllerConfig) if SETTING in f.metadata
)
"""Every key, in reference order (docs/config.md's table, `controllerd -p`), derived from the declarations."""
BY_KEY: Mapping[str, KeySpec] = MappingProxyType({s.key: s for s in KEYS})
SECRET_KEYS = frozenset(s.key for s in KEYS if s.kind == "secret")

IGNORED: Mapping[str, str] = MappingProxyType(
    {
        "scanInactiveMasterInterval": "DLedger only",
        "controllerDLegerGroup": "DLedger only",
        "controllerDLegerPeers": "DLedger only",
        "controllerDLegerSelfId": "DLedger only",
        "mappedFileSize": "DLedger log only",
        "processReadEvent": "DLedger only; jRaft reads are linearizable (ReadIndex)",
        "isProcessReadEvent": "DLedger only; jRaft reads are linearizable (ReadIndex)",
        "rocketmqHome": "not needed by this controller",
        "listenPort": "the remoting port is this node's jRaftControllerRPCAddr entry (HTTP: controllerHttpAddr)",
    }
)
"""RocketMQ keys that are known but have no effect here: accepted with a warning saying why."""
_IGNORED_PREFIX = ("metrics", "RocketMQ metrics exporter key this controller does not read")


def _shown(key: str, value: str) -> str:
    return REDACTED if key in SECRET_KEYS and value else value


# --------------------------------------------------------------------------------------------------------------
# Values


_INT = re.compile(r"[+-]?[0-9]+")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")


def split_addr(addr: str) -> tuple[str, int]:
    """'host:port' or '[v6]:port' -> (host, port); ValueError with the reason."""
    if addr.startswith("["):
        host, sep, port = addr[1:].partition("]:")
        if not sep:
            raise ValueError("IPv6 address must be written [addr]:port")
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{host!r} is not an IPv6 address") from None
    else:
        host, sep, port = addr.rpartition(":")
        if not sep or not host:
            raise ValueError("expected host:port")
        if ":" in host:
            raise ValueError("IPv6 hosts must be bracketed: [addr]:port")
        if not _HOSTNAME.fullmatch(host):
            raise ValueError(f"{host!r} is not a valid host name or IPv4 address")
        if re.fullmatch(r"[0-9.]+", host):
            try:
                ipaddress.IPv4Address(host)
            except ValueError:
                raise ValueError(f"{host!r} is not a valid IPv4 address") from None
    if not re.fullmatch(r"[0-9]{1,5}", port) or not 1 <= int(port) <= 65535:
        raise ValueError(f"port {port!r} is not in 1..65535")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """localhost, 127.0.0.0/8 or ::1. Names are not resolved (deterministic); 0.0.0.0 binds every interface."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _convert(spec: KeySpec, raw: str) -> ConfValue:
    """The typed value of one key, or ValueError with a one-line reason."""
    kind = spec.kind
    if kind in ("int", "long"):
        if not _INT.fullmatch(raw):
            raise ValueError("not an integer")
        v = int(raw)
        if spec.minimum is not None and v < spec.minimum:
            raise ValueError(f"must be >= {spec.minimum}")
        if spec.maximum is not None and v > spec.maximum:
            raise ValueError(f"must be <= {spec.maximum}")
        top, what = (JAVA_INT_MAX, "a Java int") if kind == "int" else (JAVA_LONG_MAX, "a Java long")
        if v > top:
            raise ValueError(f"must be <= {top} ({what})")
        return v
    if kind == "bool":
        low = raw.lower()
        if low not in ("true", "false"):
            raise ValueError(
                "must be true or false (case-insensitive); RocketMQ's Boolean.parseBoolean would read it as false"
            )
        return low == "true"
    if kind == "str":
        if not raw or any(c.isspace() for c in raw):
            raise ValueError("must be non-empty without whitespace")
        return raw
    if kind == "text":
        if any(c.isspace() for c in raw):
            raise ValueError("must not contain whitespace")
        return raw
    if kind == "addr":
        split_addr(raw)
        return raw
    if kind == "addrs":
        items = [a.strip() for a in raw.split(",")]
        if not raw or any(not a for a in items):
            raise ValueError("must be a comma-separated list of host:port without empty entries")
        for a in items:
            try:
                split_addr(a)
            except ValueError as e:
                raise ValueError(f"entry {a!r}: {e}") from None
        dups = sorted({a for a in items if items.count(a) > 1})
        if dups:
            raise ValueError(f"duplicate address {dups[0]}")
        return tuple(items)
    if kind == "path":
        return os.path.expanduser(raw)
    if kind == "keys":
        return tuple(k.strip() for k in raw.split(";") if k.strip())
    if kind == "secret":
        if not raw:
            raise ValueError("must not be empty; remove the line to leave it unset")
        return raw
    raise AssertionError(kind)


# --------------------------------------------------------------------------------------------------------------
# Loading


def load_config(
    path: str | os.PathLike[str], *, controller_type: str | None = None
) -> tuple[ControllerConfig, list[str]]:
    """Read and validate a .properties file. Returns the config and the warnings (also logged).

    `controller_type` is the `--type` flag: it wins over the file's controllerType (with a warning if they
    differ). Raises ConfigError for anything that must not start a node.
    """
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConfigError(f"cannot read config file: {e.strerror or e}", path=p) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ConfigError(f"not UTF-8 (byte 0x{data[e.start]:02x}); use \\uXXXX escapes", path=p, line=line) from None
    return parse_config(text, p, controller_type=controller_type)


def parse_config(
    text: str, path: str = "<string>", *, controller_type: str | None = None
) -> tuple[ControllerConfig, list[str]]:
    """`load_config` on a text already read (`path` only names it in messages)."""
    warnings: list[str] = []
    given: dict[str, Property] = {}
    prop: Property | None
    for prop in parse_properties(text, path):
        where = f"{path}:{prop.line}"
        if prop.key in given:
            warnings.append(f"{where}: duplicate key {prop.key} overrides line {given[prop.key].line}")
        if prop.key in BY_KEY:
            given[prop.key] = prop
        elif prop.key in IGNORED:
            warnings.append(f"{where}: key {prop.key} has no effect here ({IGNORED[prop.key]}); ignored")
        elif prop.key.startswith(_IGNORED_PREFIX[0]):
            warnings.append(f"{where}: key {prop.key} has no effect here ({_IGNORED_PREFIX[1]}); ignored")
        elif not prop.key:
            warnings.append(f"{where}: line with an empty key (value {_shown('', prop.value)!r}); ignored")
        else:
            hint = _suggest(prop.key)
            text = f"{where}: unknown key {prop.key}{hint}; ignored"
            warnings.append(ConfigWarning(text, unknown_key=prop.key, line=prop.line, hint=hint))

    values: JSONObject = {}
    sources: dict[str, str] = {}
    errors: list[ConfigError] = []  # every problem is reported, not only the first
    bad: set[str] = set()  # keys whose value did not parse: the checks that need them are skipped
    for spec in KEYS:
        prop = given.get(spec.key)
        raw = prop.value if prop is not None else spec.default
        sources[spec.key] = f"{path}:{prop.line}" if prop is not None else "default"
        if raw is None:
            values[spec.attr] = None
            continue
        if spec.kind == "path" and raw == "" and spec.key == "controllerStorePath":
            raw = "~/jRaftController"  # RocketMQ: ~/<controllerType>Controller when empty
        try:
            values[spec.attr] = _convert(spec, raw)
        except ValueError as e:
            errors.append(ConfigError(str(e), path=path, line=prop.line if prop else None, key=spec.key, value=raw))
            values[spec.attr] = None
            bad.add(spec.key)

    def fail(key: str, reason: str, value: str | None = None) -> None:
        prop = given.get(key)
        shown = value if value is not None else (prop.value if prop else BY_KEY[key].default)
        errors.append(ConfigError(reason, path=path, line=prop.line if prop else None, key=key, value=shown))

    # controllerType: the flag wins; without it the file must say jRaft.
    if controller_type is not None:
        if controller_type.lower() != JRAFT.lower():
            raise ConfigError(f"unsupported --type {controller_type!r}: only 'jraft' is implemented", path=path)
        if "controllerType" in given and values["controller_type"].lower() != JRAFT.lower():
            warnings.append(
                f"{sources['controllerType']}: controllerType={values['controller_type']} overridden by --type jraft"
            )
        if "controllerType" not in given or values["controller_type"].lower() != JRAFT.lower():
            sources["controllerType"] = "--type"
        values["controller_type"] = JRAFT
    elif "controllerType" in bad:
        pass
    elif values["controller_type"].lower() != JRAFT.lower():
        fail("controllerType", "only jRaft is implemented (DLedger is not)")
    else:
        values["controller_type"] = JRAFT

    addresses_ok = not bad & {"jRaftServerId", "jRaftInitConf", "jRaftControllerRPCAddr"}
    init, rpc, me = values["init_conf"], values["rpc_addrs"], values["server_id"]
    if addresses_ok and me not in init:
        fail("jRaftServerId", f"not one of jRaftInitConf ({','.join(init)})")
        addresses_ok = False
    if addresses_ok and len(rpc) != len(init):
        fail(
            "jRaftControllerRPCAddr",
            f"has {len(rpc)} entries but jRaftInitConf has {len(init)}; they are paired by position",
        )
        addresses_ok = False
    both = sorted(set(init) & set(rpc)) if addresses_ok else []
    if both:
        fail("jRaftControllerRPCAddr", f"{both[0]} is also a raft address in jRaftInitConf")
    https = values.get("http_addrs")
    if addresses_ok and https is None and "controllerHttpAddr" not in bad:
        try:
            https = values["http_addrs"] = default_http_addrs(rpc)
            sources["controllerHttpAddr"] = HTTP_DEFAULT_SOURCE
        except ValueError as e:
            fail(
                "controllerHttpAddr",
                f"its default (each jRaftControllerRPCAddr port - 1000) cannot be used: {e}; set controllerHttpAddr",
                "",
            )
            addresses_ok = False
    if addresses_ok and https is not None and "controllerHttpAddr" not in bad:
        if len(https) != len(init):
            fail(
                "controllerHttpAddr", f"has {len(https)} entries but jRaftInitConf has {len(init)}; paired by position"
            )
        elif clash := sorted(set(https) & (set(init) | set(rpc))):
            fix = (
                ""
                if "controllerHttpAddr" in given
                else " (each jRaftControllerRPCAddr port - 1000); set controllerHttpAddr"
            )
            fail("controllerHttpAddr", f"{clash[0]} is also a raft or remoting address{fix}", ",".join(https))

    floor, hard = values["alarm_free_disk_mb"], values["min_free_disk_mb"]
    if not bad & {"controllerAlarmFreeDiskMB", "controllerMinFreeDiskMB"} and floor and floor <= hard:
        fail(
            "controllerAlarmFreeDiskMB",
            f"must be above controllerMinFreeDiskMB ({hard}), where writes already stop, or 0 (off)",
        )
    if "metricsExporterType" not in bad:
        try:
            values["metrics_exporter_type"] = exporter_type(values["metrics_exporter_type"])
        except ValueError as e:
            fail("metricsExporterType", str(e))
            bad.add("metricsExporterType")
    if values["metrics_exporter_type"] == "OTLP_GRPC" and not values["metrics_grpc_target"]:
        fail("metricsGrpcExporterTarget", "metricsExporterType=OTLP_GRPC needs an OTLP/gRPC endpoint here", "")
    for k in ("metricsLabel", "metricsGrpcExporterHeader"):
        if k not in bad:
            try:
                found = pairs(values[BY_KEY[k].attr], k)
                if k == "metricsLabel":
                    ApiSettings(metrics_labels=found)  # label names Prometheus accepts
            except ValueError as e:
                fail(k, str(e))
    if values["read_only_option"] not in READ_ONLY_OPTIONS:
        fail("jRaftReadOnlyOption", f"must be one of {', '.join(READ_ONLY_OPTIONS)}")
    if values["read_only_option"] == LEASE_BASED and not values["check_quorum"]:
        fail(
            "jRaftCheckQuorum",
            f"jRaftReadOnlyOption={LEASE_BASED} needs jRaftCheckQuorum=true: without it a follower votes for a "
            "new leader while the old one still answers reads from its lease",
        )
    if "jRaftMaxClockDriftPercent" not in bad and values["max_clock_drift_percent"] >= 100:
        fail("jRaftMaxClockDriftPercent", "must be below 100")

    if values["admin_token_file"] and not bad & {"controllerAdminToken", "controllerAdminTokenFile"}:
        if values["admin_token"] is not None:
            fail("controllerAdminTokenFile", "controllerAdminToken is set too; set only one of them")
        else:
            try:
                read_token_file(values["admin_token_file"])
            except (OSError, ValueError) as e:
                fail("controllerAdminTokenFile", f"cannot use it: {e}")
    # Security: a reachable node needs the admin token; a reachable cluster needs a real secret.
    if addresses_ok and "controllerAdminToken" not in bad:
        mine = [("jRaftServerId", me), ("jRaftControllerRPCAddr", rpc[init.index(me)])]
        if https is not None and len(https) == len(init):
            mine.append(("controllerHttpAddr", https[init.index(me)]))
        for key, addr in mine:
            host = split_addr(addr)[0]
            if not is_loopback(host) and values["admin_token"] is None and not values["admin_token_file"]:
                fail(
                    key,
                    f"this node binds non-loopback host {host} ({addr}) but controllerAdminToken is not set; "
                    "set it, or bind localhost/127.0.0.1",
                )
                break
    if values["cluster_secret"] is None and "jRaftClusterSecret" not in bad:
        remote_keys = [
            k
            for k in ("jRaftInitConf", "jRaftControllerRPCAddr", "controllerHttpAddr")
            if k not in bad and values[BY_KEY[k].attr] is not None
        ]
        for key in remote_keys:
            remote = [a for a in values[BY_KEY[key].attr] if not is_loopback(split_addr(a)[0])]
            if remote:
                fail(
                    key,
                    f"non-loopback address {remote[0]} but jRaftClusterSecret is not set; "
                    "set the same jRaftClusterSecret on every node",
                )
                break
        else:
            if len(remote_keys) >= 2:
                warnings.append(
                    f"{path}: jRaftClusterSecret is not set; every address is loopback, so the public development "
                    "secret is used (set jRaftClusterSecret before binding any other address)"
                )

    peer_tls = ("jRaftTlsCertPath", "jRaftTlsKeyPath", "jRaftTlsTrustCertPath")
    peer_set = [k for k in peer_tls if values[BY_KEY[k].attr]]
    if peer_set and len(peer_set) < len(peer_tls):
        missing = [k for k in peer_tls if k not in peer_set]
        fail(missing[0], f"peer TLS needs {', '.join(peer_tls)} together; {', '.join(peer_set)} set, this one not", "")
    elif peer_set:
        try:
            named = certificate_common_name(values["peer_tls_cert_path"])
            peer_contexts(
                values["peer_tls_cert_path"],
                values["peer_tls_key_path"],
                values["peer_tls_key_password"],
                values["peer_tls_trust_cert_path"],
            )
        except (OSError, ValueError, ssl.SSLError) as e:
            fail("jRaftTlsCertPath", f"cannot use the peer certificate, key or CA: {e}")
        else:
            if "jRaftServerId" not in bad and named != values["server_id"]:
                fail("jRaftTlsCertPath", f"the certificate names {named!r}, not this node's jRaftServerId")
    if values["acl_file"] and "controllerAclFile" not in bad:
        try:
            load_users(values["acl_file"])
        except AclFileError as e:
            fail("controllerAclFile", f"cannot use it: {e}")
    if values["tls_server_mode"] not in MODES and "tls.server.mode" not in bad:
        fail("tls.server.mode", f"must be one of {', '.join(MODES)} (RocketMQ would read it as permissive)")
    if values["tls_need_client_auth"] not in CLIENT_AUTH and "tls.server.need.client.auth" not in bad:
        fail("tls.server.need.client.auth", f"must be one of {', '.join(CLIENT_AUTH)}")

    tls_on = values["tls_server_mode"] != "disabled" or values["http_tls"]
    if tls_on and values["tls_test_mode"] and values["tls_cert_path"]:
        warnings.append(
            f"{sources['tls.server.certPath']}: tls.server.certPath is ignored while tls.test.mode.enable=true "
            "(a self-signed certificate is served, as RocketMQ does); set tls.test.mode.enable=false to use it"
        )

    cfg = None
    if not errors:
        cfg = ControllerConfig(path=path, sources=MappingProxyType(sources), **values)
        if cfg.tls_server_mode != "disabled" or cfg.http_tls:
            try:
                build_context(
                    dataclasses.replace(tls_settings(cfg), mode="enforcing").effective()
                )  # a missing or unreadable file fails check-config
            except TlsError as e:
                errors.append(ConfigError(str(e), path=path))
        try:
            to_node_options(cfg)  # the raft layer's own checks, so that check-config catches them too
        except ValueError as e:
            errors.append(ConfigError(f"rejected by the raft options: {e}", path=path))
    for w in warnings:
        log.warning("%s", w)
    if errors or cfg is None:
        error = errors[0] if len(errors) == 1 else ConfigErrors(errors)
        error.warnings = tuple(warnings)
        raise error
    return cfg, warnings


def _suggest(key: str) -> str:
    known = list(BY_KEY) + list(IGNORED)
    for k in known:
        if k.lower() == key.lower():
            return f" (did you mean {k}? keys are case-sensitive)"
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""


# --------------------------------------------------------------------------------------------------------------
# Mapping onto the layers


def to_node_options(cfg: ControllerConfig) -> NodeOptions:
    """The raft node's options. Other fields of RaftOptions/SnapshotOptions/TransportOptions keep their defaults."""
    return NodeOptions(
        node_id=cfg.server_id,
        group_id=cfg.group_id,
        data_dir=cfg.store_path,
        peers={a: split_addr(a) for a in cfg.init_conf},
        secret=cfg.secret_bytes,
        http_addresses=http_addresses(cfg),
        remoting_addresses=remoting_addresses(cfg),
        raft=RaftOptions(
            election_timeout_ms=cfg.election_timeout_ms,
            check_quorum=cfg.check_quorum,
            lease_read=cfg.read_only_option == LEASE_BASED,
            max_clock_drift=cfg.max_clock_drift_percent / 100,
            # Fault injection only (the Jepsen lease negative control, docs/jepsen.md): the old tick-counted lease.
            unsafe_tick_lease=os.environ.get("CONTROLLERD_UNSAFE_TICK_LEASE") == "1",
        ),
        # Fault injection only (the Jepsen crash nemesis, docs/jepsen.md): record the durable WAL offset.
        log=LogStorageOptions(
            fsync_sidecar=os.environ.get("CONTROLLERD_FSYNC_SIDECAR") == "1",
            min_free_bytes=cfg.min_free_disk_mb << 20,
            segment_bytes=_fault_size("CONTROLLERD_SEGMENT_BYTES", LogStorageOptions().segment_bytes),
        ),
        tls=peer_contexts(
            cfg.peer_tls_cert_path, cfg.peer_tls_key_path, cfg.peer_tls_key_password, cfg.peer_tls_trust_cert_path
        )
        if cfg.peer_tls_cert_path
        else None,
        autopilot=AutopilotOptions(
            enabled=cfg.autopilot,
            stabilization_s=float(cfg.autopilot_stabilization_secs),
            dead_server_s=float(cfg.autopilot_dead_server_secs),
            min_quorum=cfg.autopilot_min_quorum,
        ),
        snapshot=SnapshotOptions(
            threshold_entries=cfg.snapshot_threshold,
            threshold_log_bytes=cfg.snapshot_log_bytes,
            interval_s=float(cfg.snapshot_interval_secs),
            max_reserved=cfg.max_snapshot_reserved,
            log_margin=cfg.snapshot_trailing_logs,
            chunk_bytes=_fault_size("CONTROLLERD_SNAPSHOT_CHUNK_BYTES", SnapshotOptions().chunk_bytes),
        ),
    )


def certificate_common_name(path: str) -> str | None:
    """The subject CN of the first certificate of a PEM file."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    with open(path, "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read())
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else None


class PeerFiles(PeerTls):
    """Peer TLS from PEM files, reloaded like the remoting certificates (api.service.tls.ServerTls): when a file
    changes, and on `reload()` (SIGHUP). Each inbound handshake gets the current server context (certificate,
    key and CA bundle) and each outbound connection the current client context."""

    def __init__(self, cert: str, key: str, password: str | None, trust: str) -> None:
        settings = TlsSettings(
            mode="enforcing",
            config_file="",
            test_mode=False,
            need_client_auth="require",
            cert_path=cert,
            key_path=key,
            key_password=password,
            auth_client=True,
            trust_cert_path=trust,
            sources={"tls.server.certPath": "jRaftTlsCertPath", "tls.server.keyPath": "jRaftTlsKeyPath"},
        )
        self.files = ServerTls(settings, "peer")
        self._built: tuple[ssl.SSLContext | None, ssl.SSLContext | None] = (None, None)

    def server_context(self) -> ssl.SSLContext:
        return self.files.context()

    def client_context(self) -> ssl.SSLContext:
        """A client context on the current files: our certificate, the CA, no host-name check (the CN is checked
        against the peer's raft id instead)."""
        server = self.files.context()
        if self._built[0] is not server:
            s = self.files.effective
            client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            client.minimum_version = ssl.TLSVersion.TLSv1_2
            client.check_hostname = False
            client.load_cert_chain(s.cert_path, s.key_path, s.key_password)
            client.load_verify_locations(cafile=s.trust_cert_path)
            self._built = (server, client)
        client_ctx = self._built[1]
        assert client_ctx is not None
        return client_ctx

    def reload(self) -> bool:
        return self.files.reload()


def peer_contexts(cert: str, key: str, password: str | None, trust: str) -> PeerFiles:
    """Mutual TLS between peers: both sides present `cert` and require a certificate chaining to `trust`
    (which node a certificate names is checked by the transport against the raft ids). TlsError (a ValueError)
    naming the file that cannot be used."""
    tls = PeerFiles(cert, key, password, trust)
    tls.client_context()
    return tls


def audit_log_path(cfg: ControllerConfig) -> str:
    """controllerAuditLog, or its default in the data directory."""
    return cfg.audit_log or os.path.join(cfg.store_path, "audit.log")


def tls_settings(cfg: ControllerConfig) -> TlsSettings:
    """The remoting port's TLS keys (tls.config.file is read over them when a context is built)."""
    return TlsSettings(
        mode=cfg.tls_server_mode,
        config_file=cfg.tls_config_file,
        test_mode=cfg.tls_test_mode,
        need_client_auth=cfg.tls_need_client_auth,
        cert_path=cfg.tls_cert_path,
        key_path=cfg.tls_key_path,
        key_password=cfg.tls_key_password,
        auth_client=cfg.tls_auth_client,
        trust_cert_path=cfg.tls_trust_cert_path,
        sources={k: v for k, v in cfg.sources.items() if k.startswith("tls.")},
    )


def metrics_export(cfg: ControllerConfig) -> MetricsExport:
    """metricsExporterType and its keys (api.service.settings.MetricsExport)."""
    return MetricsExport(
        exporter_type=cfg.metrics_exporter_type,
        prom_host=cfg.metrics_prom_host,
        prom_port=cfg.metrics_prom_port,
        grpc_target=cfg.metrics_grpc_target,
        grpc_headers=cfg.metrics_grpc_headers,
        grpc_timeout_ms=cfg.metrics_grpc_timeout_ms,
        grpc_interval_ms=cfg.metrics_grpc_interval_ms,
        log_interval_ms=cfg.metrics_log_interval_ms,
    )


def to_service_options(cfg: ControllerConfig) -> ServiceOptions:
    """The controller node's options: the raft node's (group and peers' addresses included) plus the leader's
    duties."""
    return ServiceOptions(
        node=to_node_options(cfg),
        scan_interval_ms=cfg.scan_not_active_broker_ms,
        scan_wait_ms=cfg.scan_wait_timeout_ms,
        store_quota_bytes=cfg.store_quota_bytes,
        corrupt_check_entries=cfg.corrupt_check_entries,
        corrupt_check_interval_ms=cfg.corrupt_check_interval_ms,
        feature_level_auto=cfg.feature_level_auto,
        feature_check_interval_ms=cfg.feature_check_interval_ms,
        alarm_free_disk_mb=cfg.alarm_free_disk_mb,
        alarm_check_interval_ms=cfg.alarm_check_interval_ms,
        # Fault injection only (the Jepsen suite's negative control, docs/jepsen.md): reads skip ReadIndex.
        unsafe_local_reads=os.environ.get("CONTROLLERD_UNSAFE_LOCAL_READS") == "1",
        file_config={k: v for k, v in replicated_defaults(cfg).items() if cfg.sources[k] != "default"},
    )


def default_http_addrs(rpc_addrs: tuple[str, ...]) -> tuple[str, ...]:
    """controllerHttpAddr's default: each remoting address's host with its port - 1000 (ValueError naming the
    entry whose port has no such port)."""
    out = []
    for addr in rpc_addrs:
        host, port = split_addr(addr)
        if not 1 <= port + HTTP_PORT_OFFSET <= 65535:
            raise ValueError(f"jRaftControllerRPCAddr entry {addr} has no port - 1000")
        out.append(join_addr(host, port + HTTP_PORT_OFFSET))
    return tuple(out)


def join_addr(host: str, port: int) -> str:
    """The inverse of split_addr: host:port, an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def http_address(cfg: ControllerConfig) -> tuple[str, int]:
    """Where this node serves HTTP: its own entry of controllerHttpAddr (paired by position with jRaftInitConf)."""
    return split_addr(http_addresses(cfg)[cfg.server_id])


def http_addresses(cfg: ControllerConfig) -> dict[str, str]:
    """raft address -> HTTP address of every peer (for 2007 redirects to the leader's HTTP address)."""
    return dict(zip(cfg.init_conf, cfg.http_addrs, strict=True))


def remoting_addresses(cfg: ControllerConfig) -> dict[str, str]:
    """raft address -> RocketMQ remoting address (jRaftControllerRPCAddr) of every peer."""
    return dict(zip(cfg.init_conf, cfg.rpc_addrs, strict=True))


def remoting_address(cfg: ControllerConfig) -> tuple[str, int]:
    """Where this node serves RocketMQ remoting: its own jRaftControllerRPCAddr entry."""
    return split_addr(remoting_addresses(cfg)[cfg.server_id])


def replicated_defaults(cfg: ControllerConfig) -> JSONObject:
    """The decision-affecting keys (statemachine.commands.CONFIG_KEYS) with this file's values, for a 1009.

    They change only through the log (statemachine/config.py); the daemon proposes these once it leads.
    Which of them the file set explicitly is in `cfg.sources` (anything but "default").
    """
    return {s.key: getattr(cfg, s.attr) for s in KEYS if s.replicated}


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def effective_items(cfg: ControllerConfig) -> list[tuple[str, str, str]]:
    """(key, value as text, source) for every key in reference order; secrets that are set show as ****."""
    out = []
    for s in KEYS:
        v = getattr(cfg, s.attr)
        text = ";".join(v) if s.kind == "keys" else _text(v)
        if s.key == "jRaftClusterSecret" and v is None:
            out.append((s.key, REDACTED, "dev-default (loopback only)"))
            continue
        out.append((s.key, _shown(s.key, text), cfg.sources[s.key]))
    return out


def _escape(value: str) -> str:
    """A value as a .properties file spells it (java.util.Properties#store's escapes for values)."""
    out = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    out = out.replace("\f", "\\f")
    return "\\" + out if out.startswith((" ", "#", "!")) else out


def properties_lines(cfg: ControllerConfig) -> list[str]:
    """`controllerd -p`: the effective config as a .properties file that check-config reads back, each
    value's source in a comment line above it. Secrets are never printed: their lines are comments saying
    whether they are set and where (copy them from there to use the output as a config)."""
    lines = [f"# effective config of {cfg.path} (controllerd -p); the comment above each key is its source"]
    for key, text, source in effective_items(cfg):
        if key in SECRET_KEYS:
            if getattr(cfg, BY_KEY[key].attr) is None:
                dev = (
                    " (the public development secret is used: every address is loopback)"
                    if key == "jRaftClusterSecret"
                    else ""
                )
                lines.append(f"# {key}: not set{dev}; source: {source}")
            else:
                lines.append(f"# {key}: set in {source}, not printed")
            continue
        lines += [f"# {source}", f"{key}={_escape(text)}"]
    return lines


# --------------------------------------------------------------------------------------------------------------
# Writing a controller.conf (the one writer: `controllerd local-cluster`, tools/cluster.py, the Jepsen harness)


def _value_text(spec: KeySpec, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return (";" if spec.kind == "keys" else ",").join(str(v) for v in value)
    return str(value)


ConfValue = str | int | bool | tuple[str, ...] | list[str] | None
"""A controller.conf key's typed value: text, a number, a boolean, addresses or keys (None: unset)."""


class ConfOptions(TypedDict, total=False):
    """The keyword options of `controller_conf`, which `write_controller_conf` passes on."""

    header: Iterable[str]
    comments: Mapping[str, str] | None
    separator: str


def controller_conf(
    settings: Mapping[str, object],
    *,
    header: Iterable[str] = (),
    comments: Mapping[str, str] | None = None,
    separator: str = "=",
) -> str:
    """A controller.conf with RocketMQ's key names: `settings` (key -> value: text, int, bool, or a tuple or
    list of addresses or keys; None leaves the key out) in their order, `header` lines first as comments, and
    `comments[key]` as a comment line above its key (also above a key left out, as a note). A key that is not
    declared raises ValueError naming it: a generated file with a misspelt key would keep that setting on its
    default without a word (RocketMQ ignores unknown keys)."""
    comments = comments or {}
    lines = [f"# {h}" for h in header]
    for key, value in settings.items():
        spec = BY_KEY.get(key)
        if spec is None:
            raise ValueError(f"unknown controller.conf key {key}{_suggest(key)}")
        if key in comments:
            lines.append(f"# {comments[key]}")
        if value is not None:
            lines.append(f"{key}{separator}{_escape(_value_text(spec, value))}")
    return "\n".join(lines) + "\n"


def conf_settings(text: str) -> dict[str, str]:
    """The key/values of a .properties text (the last of a repeated key), to merge into `controller_conf`'s
    settings."""
    return {p.key: p.value for p in parse_properties(text)}


def write_controller_conf(
    path: str | os.PathLike[str], settings: Mapping[str, object], **kw: Unpack[ConfOptions]
) -> str:
    """`controller_conf(settings, **kw)` written to `path` atomically (a temp file renamed over it); the text."""
    text = controller_conf(settings, **kw)
    p = os.fspath(path)
    tmp = p + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, p)
    return text


# --------------------------------------------------------------------------------------------------------------
# docs/config.md's key table, generated from the declarations (tests/cli/test_config_doc.py checks the doc)

KEYS_TABLE_HEADER = ("| key | type | default | meaning | scope |", "|---|---|---|---|---|")
_KIND_TEXT = {
    "bool": "bool",
    "addr": "host:port",
    "addrs": "host:port list",
    "path": "path",
    "secret": "secret",
    "keys": "`;`-separated keys",
    "text": "string, may be empty",
}


def _type_text(s: Setting) -> str:
    if s.type_doc:
        return s.type_doc
    if s.kind in ("int", "long"):
        return f"{s.kind} {s.minimum}..{s.maximum}" if s.maximum is not None else f"{s.kind} >= {s.minimum}"
    return _KIND_TEXT[s.kind]


def keys_table_rows() -> dict[str, str]:
    """key -> its row of docs/config.md's table, in reference order."""
    rows = {}
    for spec in KEYS:
        s = spec.setting
        default = s.default_doc or ("unset" if s.default is None else f"`{s.default}`")
        scope = "**replicated**" if s.scope == REPLICATED else NODE_LOCAL
        rows[s.key] = f"| `{s.key}` | {_type_text(s)} | {default} | {s.doc} | {scope} |"
    return rows


def keys_table() -> str:
    """docs/config.md's key table (header included), one line per key."""
    return "\n".join([*KEYS_TABLE_HEADER, *keys_table_rows().values()])


def update_keys_table(doc_path: str) -> bool:
    """Rewrite the key table of `doc_path` (docs/config.md) from the declarations, keeping the prose around it;
    True if it changed. `python -m cli.config docs/config.md` runs it."""
    with open(doc_path) as f:
        lines = f.read().split("\n")
    start = lines.index(KEYS_TABLE_HEADER[0])
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    new = lines[:start] + keys_table().split("\n") + lines[end:]
    if new == lines:
        return False
    with open(doc_path, "w") as f:
        f.write("\n".join(new))
    return True


def _fault_size(env: str, default: int) -> int:
    """Fault injection only (tools.torture): CONTROLLERD_SEGMENT_BYTES makes small WAL segments, so that a short
    run rolls segments often; CONTROLLERD_SNAPSHOT_CHUNK_BYTES small InstallSnapshot chunks, so that one
    download is many chunks."""
    raw = os.environ.get(env)
    return int(raw) if raw else default


if __name__ == "__main__":  # python -m cli.config docs/config.md: regenerate the key table
    import sys

    for doc in sys.argv[1:] or ["docs/config.md"]:
        print(f"{doc}: {'updated' if update_keys_table(doc) else 'up to date'}")
