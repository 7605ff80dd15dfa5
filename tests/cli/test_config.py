"""cli.config (the .properties parser, validation, mapping onto the raft options) and the controllerd CLI."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from api.service.settings import pairs
from cli.config import (
    BY_KEY,
    DEV_CLUSTER_SECRET,
    KEYS,
    ConfigError,
    ControllerConfig,
    effective_items,
    http_address,
    http_addresses,
    load_config,
    metrics_export,
    parse_config,
    parse_properties,
    remoting_address,
    remoting_addresses,
    replicated_defaults,
    to_node_options,
    to_service_options,
)
from cli.controllerd import LENIENT_HINT, main
from raft.testing.cluster import free_ports
from statemachine.commands import CONFIG_KEYS, config_value_ok, update_controller_config

LOOPBACK = """\
jRaftServerId=127.0.0.1:9881
jRaftInitConf=127.0.0.1:9880,127.0.0.1:9881,127.0.0.1:9882
jRaftControllerRPCAddr=127.0.0.1:9770,127.0.0.1:9771,127.0.0.1:9772
"""

REMOTE = """\
jRaftServerId=10.0.0.2:9880
jRaftInitConf=10.0.0.1:9880,10.0.0.2:9880,10.0.0.3:9880
jRaftControllerRPCAddr=10.0.0.1:9770,10.0.0.2:9770,10.0.0.3:9770
controllerAdminToken=admin-token-1234
jRaftClusterSecret=cluster-secret-5678
controllerHttpAddr=10.0.0.1:8080,10.0.0.2:8080,10.0.0.3:8080
"""


def props(text: str) -> list[tuple[str, str, int]]:
    return [(p.key, p.value, p.line) for p in parse_properties(text, "t.conf")]


# ---------------------------------------------------------------------------------------------------------------
# java.util.Properties syntax


def test_separators_comments_blank_lines_and_trimming() -> None:
    text = "# comment\n! also a comment\n\n   \na=1\n  b : 2  \nc\t3\nd   =   4\ne\nf=\ng = x = y\n"
    assert props(text) == [("a", "1", 5), ("b", "2", 6), ("c", "3", 7), ("d", "4", 8), ("e", "", 9), ("f", "", 10)] + [
        ("g", "x = y", 11)
    ]


def test_continuation_lines_keep_the_first_line_number() -> None:
    text = "a=1\njRaftInitConf=h:1,\\\n      h:2,\\\n\th:3\nb=2\n"
    assert props(text) == [("a", "1", 1), ("jRaftInitConf", "h:1,h:2,h:3", 2), ("b", "2", 5)]


def test_even_backslashes_do_not_continue_and_comments_never_continue() -> None:
    text = "a=x\\\\\nb=y\n# comment \\\nc=z\n"
    assert props(text) == [("a", "x\\", 1), ("b", "y", 2), ("c", "z", 4)]


def test_escapes() -> None:
    text = "k=tab\\there\\nnl\\\\bs\\=eq\\:colon\\u00e9\\u4e2d\\q\nkey\\=with\\:sep\\ space = v\n"
    assert props(text) == [
        ("k", "tab\there\nnl\\bs=eq:colon\u00e9\u4e2dq", 1),
        ("key=with:sep space", "v", 2),
    ]


def test_an_escaped_trailing_space_is_kept() -> None:
    assert props("k=v\\ \n") == [("k", "v ", 1)]


def test_xml_comment_block_is_skipped() -> None:
    text = "<!--\n  Licensed to the Apache Software Foundation\n  key=value inside\n-->\na=1\n<!-- one line -->\nb=2\n"
    assert props(text) == [("a", "1", 5), ("b", "2", 7)]


@pytest.mark.parametrize(
    ("text", "line"),
    [("a=1\nb=\\u12\n", 2), ("a=\\uZZZZ\n", 1), ("\n\nbad\\u00=1\n", 3)],
)
def test_malformed_unicode_escape_names_file_and_line(text: str, line: int) -> None:
    with pytest.raises(ConfigError) as ei:
        parse_properties(text, "t.conf")
    assert ei.value.line == line
    assert str(ei.value).startswith(f"t.conf:{line}: malformed \\uXXXX escape")


def test_unterminated_xml_comment_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"^t\.conf:2: unterminated XML comment"):
        parse_properties("a=1\n<!-- licence\nb=2\n", "t.conf")


# ---------------------------------------------------------------------------------------------------------------
# Typed config and defaults


def test_defaults_are_rocketmqs_and_the_snapshot_threshold_is_ours() -> None:
    cfg, warnings = parse_config("", "empty.conf")
    assert cfg.controller_type == "jRaft"
    assert cfg.group_id == "jRaft-Controller"
    assert cfg.server_id == "localhost:9880"
    assert cfg.init_conf == ("localhost:9880", "localhost:9881", "localhost:9882")
    assert cfg.rpc_addrs == ("localhost:9770", "localhost:9771", "localhost:9772")
    assert cfg.store_path == os.path.expanduser("~/jRaftController")
    assert (cfg.election_timeout_ms, cfg.snapshot_interval_secs, cfg.snapshot_threshold) == (1000, 3600, 10_000)
    assert (cfg.max_snapshot_reserved, cfg.scan_not_active_broker_ms, cfg.scan_wait_timeout_ms) == (3, 5000, 1000)
    assert (cfg.enable_elect_unclean_master, cfg.elect_master_max_retry_count, cfg.notify_broker_role_changed) == (
        False,
        3,
        True,
    )
    assert cfg.config_black_list == ("configBlackList", "configStorePath")
    assert cfg.admin_token is None and cfg.cluster_secret is None
    assert cfg.remoting_max_frame_bytes == 16 * 1024 * 1024  # RocketMQ's frameMaxLength
    # A stock RocketMQ controller.conf sets no controllerHttpAddr: HTTP on each remoting port - 1000.
    assert cfg.http_addrs == ("localhost:8770", "localhost:8771", "localhost:8772")
    assert cfg.sources["controllerHttpAddr"] == "default: each jRaftControllerRPCAddr port - 1000"
    assert all(src == "default" for key, src in cfg.sources.items() if key != "controllerHttpAddr")
    assert [w for w in warnings if "jRaftClusterSecret is not set" in w]


def test_key_table_matches_the_dataclass() -> None:
    fields = {f.name for f in dataclasses.fields(ControllerConfig)} - {"path", "sources"}
    assert {s.attr for s in KEYS} == fields
    assert len(BY_KEY) == len(KEYS)
    assert {s.key for s in KEYS if s.replicated} == set(CONFIG_KEYS)


def test_values_are_typed_and_sources_name_the_line() -> None:
    text = LOOPBACK + (
        "controllerStorePath=/var/lib/ctl\n"
        "jRaftElectionTimeoutMs=+1500\n"
        "enableElectUncleanMaster=TRUE\n"
        "notifyBrokerRoleChanged=False\n"
        "electMasterMaxRetryCount=0\n"
        "statemachineSnapshotThreshold=0\n"
        "configBlackList=a; b;;c\n"
    )
    cfg, _ = parse_config(text, "n.conf")
    assert cfg.store_path == "/var/lib/ctl"
    assert cfg.election_timeout_ms == 1500
    assert cfg.enable_elect_unclean_master is True and cfg.notify_broker_role_changed is False
    assert cfg.elect_master_max_retry_count == 0 and cfg.snapshot_threshold == 0
    assert cfg.config_black_list == ("a", "b", "c")
    assert cfg.sources["jRaftServerId"] == "n.conf:1"
    assert cfg.sources["enableElectUncleanMaster"] == "n.conf:6"
    assert cfg.line("enableElectUncleanMaster") == 6 and cfg.line("jRaftGroupId") is None


# ---------------------------------------------------------------------------------------------------------------
# Every validation error names key, value, file and line


BAD_VALUES = [
    ("jRaftElectionTimeoutMs", "abc", "not an integer"),
    ("jRaftElectionTimeoutMs", "1_000", "not an integer"),
    ("jRaftElectionTimeoutMs", "0x10", "not an integer"),
    ("jRaftElectionTimeoutMs", "", "not an integer"),
    ("jRaftElectionTimeoutMs", "10", "must be >= 20"),
    ("jRaftSnapshotIntervalSecs", "-1", "must be >= 0"),
    ("jRaftSnapshotTrailingLogs", "-5", "must be >= 0"),
    ("statemachineSnapshotThreshold", "-5", "must be >= 0"),
    ("maxSnapshotReservedNum", "0", "must be >= 1"),
    ("scanNotActiveBrokerInterval", "0", "must be >= 1"),
    ("electMasterMaxRetryCount", "-1", "must be >= 0"),
    ("controllerThreadPoolNums", "2147483648", "must be <= 2147483647 (a Java int)"),
    ("enableElectUncleanMaster", "yes", "must be true or false (case-insensitive)"),
    ("notifyBrokerRoleChanged", "1", "must be true or false (case-insensitive)"),
    ("jRaftGroupId", "my group", "must be non-empty without whitespace"),
    ("controllerType", "DLedger", "only jRaft is implemented"),
    ("jRaftServerId", "localhost", "expected host:port"),
    ("jRaftServerId", "127.0.0.1:0", "port '0' is not in 1..65535"),
    ("jRaftServerId", "127.0.0.1:99999", "port '99999' is not in 1..65535"),
    ("jRaftServerId", "bad_host:9880", "'bad_host' is not a valid host name or IPv4 address"),
    ("jRaftServerId", "::1:9880", "IPv6 hosts must be bracketed"),
    ("jRaftServerId", "999.0.0.1:9880", "'999.0.0.1' is not a valid IPv4 address"),
    ("jRaftServerId", "127.0.0.1:9883", "not one of jRaftInitConf"),
    ("jRaftInitConf", "127.0.0.1:9880,127.0.0.1:9881,127.0.0.1:9881", "duplicate address 127.0.0.1:9881"),
    ("jRaftInitConf", "127.0.0.1:9880,,127.0.0.1:9881", "without empty entries"),
    ("jRaftInitConf", "127.0.0.1:9880,127.0.0.1:x", "entry '127.0.0.1:x': port 'x' is not in 1..65535"),
    ("jRaftControllerRPCAddr", "127.0.0.1:9770,127.0.0.1:9771", "has 2 entries but jRaftInitConf has 3"),
    ("jRaftControllerRPCAddr", "127.0.0.1:9770,127.0.0.1:9880,127.0.0.1:9772", "is also a raft address"),
    ("jRaftReadOnlyOption", "LeaseBased", "must be one of ReadOnlySafe, ReadOnlyLeaseBased"),
    ("jRaftMaxClockDriftPercent", "100", "must be below 100"),
    ("jRaftCheckQuorum", "yes", "must be true or false"),
    ("controllerRemotingMaxFrameBytes", "65535", "must be >= 65536"),
    ("controllerRemotingMaxFrameBytes", "1073741825", "must be <= 1073741824"),
    ("controllerRemotingMaxFrameBytes", "16M", "not an integer"),
]


@pytest.mark.parametrize(("key", "value", "reason"), BAD_VALUES)
def test_bad_value_names_key_value_file_and_line(tmp_path: Path, key: str, value: str, reason: str) -> None:
    # The bad key is on line 5, after the loopback trio and a comment; a later duplicate would override.
    lines = [ln for ln in LOOPBACK.splitlines() if not ln.startswith(key + "=")]
    lines = lines + ["# the key under test"]
    while len(lines) < 4:
        lines.append("# padding")
    path = tmp_path / "node.conf"
    path.write_text("\n".join([*lines, f"{key}={value}", ""]))
    with pytest.raises(ConfigError) as ei:
        load_config(path)
    e = ei.value
    assert (e.key, e.value, e.path, e.line) == (key, value, str(path), 5)
    assert str(e).startswith(f"{path}:5: {key}={value}: ")
    assert reason in str(e)
    assert "\n" not in str(e)


def test_error_on_a_default_value_says_so() -> None:
    # jRaftServerId is not in the file: its default localhost:9880 is not one of these peers.
    text = "jRaftInitConf=127.0.0.1:1,127.0.0.1:2,127.0.0.1:3\njRaftControllerRPCAddr=127.0.0.1:4,127.0.0.1:5,127.0.0.1:6\n"
    with pytest.raises(ConfigError) as ei:
        parse_config(text, "n.conf")
    assert ei.value.line is None
    assert str(ei.value) == (
        "n.conf: jRaftServerId=localhost:9880 (default; not set in the file): "
        "not one of jRaftInitConf (127.0.0.1:1,127.0.0.1:2,127.0.0.1:3)"
    )


def test_an_empty_secret_is_an_error_and_never_echoed() -> None:
    with pytest.raises(ConfigError, match=r"^n\.conf:4: controllerAdminToken=: must not be empty"):
        parse_config(LOOPBACK + "controllerAdminToken=\n", "n.conf")


def test_ipv6_addresses_must_be_bracketed_and_map_onto_peers() -> None:
    text = (
        "jRaftServerId=[::1]:9880\njRaftInitConf=[::1]:9880,[::1]:9881\njRaftControllerRPCAddr=[::1]:9770,[::1]:9771\n"
    )
    cfg, _ = parse_config(text, "v6.conf")
    assert remoting_address(cfg) == ("::1", 9770) and http_address(cfg) == ("::1", 8770)
    assert cfg.http_addrs == ("[::1]:8770", "[::1]:8771")
    assert to_node_options(cfg).peers == {"[::1]:9880": ("::1", 9880), "[::1]:9881": ("::1", 9881)}


def test_unreadable_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.conf: cannot read config file: No such file"):
        load_config(tmp_path / "missing.conf")
    p = tmp_path / "latin1.conf"
    p.write_bytes(b"a=1\nb=caf\xe9\n")
    with pytest.raises(ConfigError, match=r"latin1\.conf:2: not UTF-8 \(byte 0xe9\)"):
        load_config(p)


# ---------------------------------------------------------------------------------------------------------------
# Warnings


def test_unknown_ignored_and_duplicate_keys_are_warnings_naming_file_and_line(caplog: pytest.LogCaptureFixture) -> None:
    text = LOOPBACK + "jraftElectionTimeoutMs=500\njRaftElectionTimeotMs=500\nfoo=bar\nmetricsInDelta=true\n"
    text += "controllerDLegerPeers=n0-127.0.0.1:1\njRaftGroupId=a\njRaftGroupId=b\n"
    with caplog.at_level(logging.WARNING, logger="controllerd.config"):
        cfg, warnings = parse_config(text, "n.conf")
    assert cfg.election_timeout_ms == 1000 and cfg.group_id == "b"
    assert warnings[:6] == [
        "n.conf:4: unknown key jraftElectionTimeoutMs (did you mean jRaftElectionTimeoutMs? keys are case-sensitive);"
        " ignored",
        "n.conf:5: unknown key jRaftElectionTimeotMs (did you mean jRaftElectionTimeoutMs?); ignored",
        "n.conf:6: unknown key foo; ignored",
        "n.conf:7: key metricsInDelta has no effect here (RocketMQ metrics exporter key this controller does not"
        " read); ignored",
        "n.conf:8: key controllerDLegerPeers has no effect here (DLedger only); ignored",
        "n.conf:10: duplicate key jRaftGroupId overrides line 9",
    ]
    assert [r.getMessage() for r in caplog.records] == warnings


def test_type_flag_wins_over_the_file_with_a_warning() -> None:
    cfg, warnings = parse_config(LOOPBACK + "controllerType=DLedger\n", "n.conf", controller_type="jraft")
    assert cfg.controller_type == "jRaft" and cfg.sources["controllerType"] == "--type"
    assert "n.conf:4: controllerType=DLedger overridden by --type jraft" in warnings
    with pytest.raises(ConfigError, match="unsupported --type 'dledger'"):
        parse_config(LOOPBACK, "n.conf", controller_type="dledger")


# ---------------------------------------------------------------------------------------------------------------
# Security rules


def test_loopback_without_secret_uses_the_dev_secret_with_a_warning() -> None:
    cfg, warnings = parse_config(LOOPBACK, "n.conf")
    assert cfg.cluster_secret is None and cfg.secret_bytes == DEV_CLUSTER_SECRET
    assert to_node_options(cfg).secret == DEV_CLUSTER_SECRET
    assert any(w.startswith("n.conf: jRaftClusterSecret is not set; every address is loopback") for w in warnings)


@pytest.mark.parametrize(
    ("text", "key", "line", "reason"),
    [
        (REMOTE.replace("controllerAdminToken=admin-token-1234\n", ""), "jRaftServerId", 1, "binds non-loopback host"),
        (
            # raft address loopback, HTTP address public
            "jRaftServerId=127.0.0.1:9880\njRaftInitConf=127.0.0.1:9880\njRaftControllerRPCAddr=0.0.0.0:9770\n",
            "jRaftControllerRPCAddr",
            3,
            "binds non-loopback host 0.0.0.0 (0.0.0.0:9770) but controllerAdminToken is not set",
        ),
        (
            # this node loopback, a peer remote: the token is not needed, the cluster secret is
            "jRaftServerId=127.0.0.1:9880\njRaftInitConf=127.0.0.1:9880,10.0.0.9:9880\n"
            "jRaftControllerRPCAddr=127.0.0.1:9770,127.0.0.1:9771\n",
            "jRaftInitConf",
            2,
            "non-loopback address 10.0.0.9:9880 but jRaftClusterSecret is not set",
        ),
        (
            REMOTE.replace("jRaftClusterSecret=cluster-secret-5678\n", ""),
            "jRaftInitConf",
            2,
            "non-loopback address 10.0.0.1:9880 but jRaftClusterSecret is not set",
        ),
    ],
)
def test_non_loopback_needs_token_and_secret(text: str, key: str, line: int, reason: str) -> None:
    with pytest.raises(ConfigError) as ei:
        parse_config(text, "n.conf")
    assert (ei.value.key, ei.value.line) == (key, line)
    assert str(ei.value).startswith(f"n.conf:{line}: {key}=")
    assert reason in str(ei.value)


def test_rpc_addr_is_remoting_and_http_is_controller_http_addr_or_remoting_port_minus_1000() -> None:
    cfg, _ = parse_config(REMOTE, "n.conf")
    assert http_address(cfg) == ("10.0.0.2", 8080) and remoting_address(cfg) == ("10.0.0.2", 9770)
    assert remoting_addresses(cfg)["10.0.0.3:9880"] == "10.0.0.3:9770"
    assert to_service_options(cfg).remoting_addresses == remoting_addresses(cfg)
    assert (
        to_service_options(cfg).http_addresses
        == http_addresses(cfg)
        == dict(zip(cfg.init_conf, cfg.http_addrs, strict=True))
    )
    # Without controllerHttpAddr (RocketMQ's controller.conf): remoting there, HTTP on each port - 1000, no warning.
    cfg, warnings = parse_config(LOOPBACK, "n.conf")
    assert remoting_address(cfg) == ("127.0.0.1", 9771) and http_address(cfg) == ("127.0.0.1", 8771)
    assert http_addresses(cfg)["127.0.0.1:9882"] == "127.0.0.1:8772"
    assert not [w for w in warnings if "controllerHttpAddr" in w]
    # The default must be a port and must not clash; the error says to set the key.
    with pytest.raises(
        ConfigError,
        match=r"controllerHttpAddr= \(default; not set in the file\): its default .*"
        r"entry 127.0.0.1:1000 has no port - 1000; set controllerHttpAddr",
    ):
        parse_config(LOOPBACK.replace("127.0.0.1:9770,", "127.0.0.1:1000,"), "n.conf")
    clash = LOOPBACK.replace("127.0.0.1:9772\n", "127.0.0.1:10880\n")  # - 1000 is node 0's raft address
    with pytest.raises(
        ConfigError,
        match=r"127.0.0.1:9880 is also a raft or remoting address \(each "
        r"jRaftControllerRPCAddr port - 1000\); set controllerHttpAddr",
    ):
        parse_config(clash, "n.conf")
    assert parse_config(clash + "controllerHttpAddr=127.0.0.1:1,127.0.0.1:2,127.0.0.1:3\n", "n.conf")[0]
    with pytest.raises(ConfigError, match="controllerHttpAddr.*has 1 entries"):
        parse_config(LOOPBACK + "controllerHttpAddr=127.0.0.1:8080\n", "n.conf")
    with pytest.raises(ConfigError, match="127.0.0.1:9770 is also a raft or remoting address"):
        parse_config(LOOPBACK + "controllerHttpAddr=127.0.0.1:9770,127.0.0.1:8081,127.0.0.1:8082\n", "n.conf")


def test_remote_cluster_with_token_and_secret_is_valid() -> None:
    cfg, warnings = parse_config(REMOTE, "n.conf")
    assert warnings == []
    assert cfg.admin_token == "admin-token-1234" and cfg.secret_bytes == b"cluster-secret-5678"


# ---------------------------------------------------------------------------------------------------------------
# Mapping onto the layers


def test_to_node_options() -> None:
    text = LOOPBACK + (
        "controllerStorePath=/data/n1\njRaftElectionTimeoutMs=300\njRaftSnapshotIntervalSecs=60\n"
        "statemachineSnapshotThreshold=500\nmaxSnapshotReservedNum=5\njRaftClusterSecret=s3cret\n"
        "jRaftSnapshotTrailingLogs=20\n"
    )
    cfg, _ = parse_config(text, "n.conf")
    opts = to_node_options(cfg)
    assert opts.node_id == "127.0.0.1:9881"
    assert opts.peers == {f"127.0.0.1:{p}": ("127.0.0.1", p) for p in (9880, 9881, 9882)}
    assert opts.data_dir == "/data/n1"
    assert opts.secret == b"s3cret"
    assert opts.voters == ()
    assert opts.raft.election_timeout_ms == 300 and opts.raft.heartbeat() == 30
    assert (opts.snapshot.threshold_entries, opts.snapshot.interval_s, opts.snapshot.max_reserved) == (500, 60.0, 5)
    assert opts.snapshot.log_margin == 20
    assert to_node_options(parse_config(LOOPBACK, "n.conf")[0]).snapshot.log_margin == 1000
    assert http_address(cfg) == ("127.0.0.1", 8771)
    assert http_addresses(cfg)["127.0.0.1:9882"] == "127.0.0.1:8772"


def test_lease_reads_without_check_quorum_are_refused_naming_the_line() -> None:
    text = LOOPBACK + "jRaftReadOnlyOption=ReadOnlyLeaseBased\njRaftCheckQuorum=false\n"
    with pytest.raises(ConfigError) as ei:
        parse_config(text, "n.conf")
    assert (ei.value.key, ei.value.line) == ("jRaftCheckQuorum", 5)
    assert "ReadOnlyLeaseBased needs jRaftCheckQuorum=true" in str(ei.value)
    # Without lease reads, check quorum may be off.
    cfg, _ = parse_config(LOOPBACK + "jRaftCheckQuorum=false\n", "n.conf")
    assert not to_node_options(cfg).raft.check_quorum and not to_node_options(cfg).raft.lease_read


def test_lease_read_options_map_onto_the_raft_options() -> None:
    default = to_node_options(parse_config(LOOPBACK, "n.conf")[0]).raft
    assert not default.lease_read and default.check_quorum and default.max_clock_drift == 0.01
    cfg, _ = parse_config(LOOPBACK + "jRaftReadOnlyOption=ReadOnlyLeaseBased\njRaftMaxClockDriftPercent=50\n", "n.conf")
    r = to_node_options(cfg).raft
    assert r.lease_read and r.check_quorum and r.max_clock_drift == 0.5


def test_fault_injection_switches_come_only_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Jepsen harness's switches are env vars, never controller.conf keys, and off by default."""
    cfg, _ = parse_config(LOOPBACK, "n.conf")
    monkeypatch.delenv("CONTROLLERD_FSYNC_SIDECAR", raising=False)
    monkeypatch.delenv("CONTROLLERD_UNSAFE_LOCAL_READS", raising=False)
    monkeypatch.delenv("CONTROLLERD_UNSAFE_TICK_LEASE", raising=False)
    opts = to_service_options(cfg)
    assert not opts.unsafe_local_reads and not opts.node.log.fsync_sidecar and not opts.node.raft.unsafe_tick_lease
    monkeypatch.setenv("CONTROLLERD_FSYNC_SIDECAR", "1")
    monkeypatch.setenv("CONTROLLERD_UNSAFE_LOCAL_READS", "1")
    monkeypatch.setenv("CONTROLLERD_UNSAFE_TICK_LEASE", "1")
    opts = to_service_options(cfg)
    assert opts.unsafe_local_reads and opts.node.log.fsync_sidecar and opts.node.raft.unsafe_tick_lease


def test_replicated_defaults_are_a_valid_1009() -> None:
    cfg, _ = parse_config(LOOPBACK + "enableElectUncleanMaster=true\nelectMasterMaxRetryCount=7\n", "n.conf")
    rep = replicated_defaults(cfg)
    assert rep == {"enableElectUncleanMaster": True, "electMasterMaxRetryCount": 7, "notifyBrokerRoleChanged": True}
    assert all(config_value_ok(k, v) for k, v in rep.items())
    update_controller_config(0, rep)  # the state machine's own encoder accepts it


def test_effective_items_redact_secrets_and_name_sources() -> None:
    items = {k: (v, src) for k, v, src in effective_items(parse_config(REMOTE, "n.conf")[0])}
    assert list(items) == [s.key for s in KEYS]
    assert items["controllerAdminToken"] == ("****", "n.conf:4")
    assert items["jRaftClusterSecret"] == ("****", "n.conf:5")
    assert items["jRaftInitConf"] == ("10.0.0.1:9880,10.0.0.2:9880,10.0.0.3:9880", "n.conf:2")
    assert items["enableElectUncleanMaster"] == ("false", "default")
    assert items["configBlackList"] == ("configBlackList;configStorePath", "default")


# ---------------------------------------------------------------------------------------------------------------
# controllerd


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_cli_check_config_ok_prints_warnings_and_exits_0(tmp_path: Path) -> None:
    p = tmp_path / "n.conf"
    p.write_text(LOOPBACK + "bogusKey=1\n")
    code, out, err = run("check-config", "--lenient", "-c", str(p))
    assert code == 0
    assert out == (
        f"{p}: OK\n  node 127.0.0.1:9881: RocketMQ remoting (brokers' controllerAddr, mqadmin -a) on "
        "127.0.0.1:9771, HTTP (rmqctl -a) on 127.0.0.1:8771 (default: each jRaftControllerRPCAddr port - 1000)\n"
    )
    assert f"controllerd: warning: {p}:4: unknown key bogusKey; ignored" in err


def test_cli_check_config_error_exits_2_with_the_message_on_stderr(tmp_path: Path) -> None:
    p = tmp_path / "n.conf"
    p.write_text(LOOPBACK + "maxSnapshotReservedNum=zero\n")
    code, out, err = run("check-config", "-c", str(p))
    assert code == 2 and out == ""
    assert err.splitlines()[-1] == f"controllerd: config error: {p}:4: maxSnapshotReservedNum=zero: not an integer"


def test_cli_check_config_reports_every_error_and_every_warning(tmp_path: Path) -> None:
    p = tmp_path / "n.conf"
    p.write_text(
        "jRaftServerId=127.0.0.1:9889\njRaftInitConf=127.0.0.1:9880,127.0.0.1:9881\n"
        "jRaftControllerRPCAddr=127.0.0.1:9770,127.0.0.1:9771\nmaxSnapshotReservedNum=zero\n"
        "enableElectUncleanMaster=on\nbogusKey=1\nscanNotActiveBrokerIntervl=5\n"
    )
    code, out, err = run("check-config", "-c", str(p))
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"controllerd: config error: {p}:6: unknown key bogusKey",
        f"controllerd: config error: {p}:7: unknown key scanNotActiveBrokerIntervl (did you mean scanNotActiveBrokerInterval?)",
        f"controllerd: warning: {p}: jRaftClusterSecret is not set; every address is loopback, so the public "
        "development secret is used (set jRaftClusterSecret before binding any other address)",
        f"controllerd: config error: {p}:4: maxSnapshotReservedNum=zero: not an integer",
        f"controllerd: config error: {p}:5: enableElectUncleanMaster=on: must be true or false (case-insensitive); "
        "RocketMQ's Boolean.parseBoolean would read it as false",
        f"controllerd: config error: {p}:1: jRaftServerId=127.0.0.1:9889: not one of jRaftInitConf "
        "(127.0.0.1:9880,127.0.0.1:9881)",
        f"controllerd: config error: {LENIENT_HINT}",
    ]
    code, _, err = run("check-config", "--lenient", "-c", str(p))
    assert code == 2 and err.splitlines()[0] == f"controllerd: warning: {p}:6: unknown key bogusKey; ignored"
    with pytest.raises(ConfigError) as raised:
        load_config(p)
    assert len(raised.value.errors) == 3 and str(raised.value).count("\n") == 2


def test_cli_check_config_strict_makes_warnings_fatal(tmp_path: Path) -> None:
    p = tmp_path / "n.conf"
    p.write_text(REMOTE + "bogusKey=1\n")
    assert run("check-config", "--lenient", "-c", str(p))[0] == 0
    code, out, err = run("check-config", "--strict", "-c", str(p))
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"controllerd: warning: {p}:7: unknown key bogusKey; ignored",
        "controllerd: config error: 1 warning(s), fatal with --strict",
    ]
    p.write_text(REMOTE)
    assert run("check-config", "--strict", "-c", str(p)) == (
        0,
        f"{p}: OK\n  node 10.0.0.2:9880: RocketMQ remoting "
        "(brokers' controllerAddr, mqadmin -a) on 10.0.0.2:9770, "
        "HTTP (rmqctl -a) on 10.0.0.2:8080\n",
        "",
    )


def test_cli_check_config_fails_on_a_misspelt_key_naming_key_line_and_the_nearest_key(tmp_path: Path) -> None:
    # Issue 23: `jRaftElectionTimeoutMS` was warned about and ignored, check-config said OK and the node ran on
    # the default election timeout. It is an error now; --lenient keeps RocketMQ's ignoring, with a warning.
    p = tmp_path / "n.conf"
    p.write_text(LOOPBACK + "jRaftElectionTimeoutMS=3000\n")
    code, out, err = run("check-config", "-c", str(p))
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"controllerd: config error: {p}:4: unknown key jRaftElectionTimeoutMS "
        "(did you mean jRaftElectionTimeoutMs? keys are case-sensitive)",
        f"controllerd: warning: {p}: jRaftClusterSecret is not set; every address is loopback, so the public "
        "development secret is used (set jRaftClusterSecret before binding any other address)",
        f"controllerd: config error: 1 unknown key(s). {LENIENT_HINT}",
    ]
    code, out, err = run("check-config", "--lenient", "-c", str(p))
    assert code == 0 and out.startswith(f"{p}: OK\n")
    assert err.splitlines()[0] == (
        f"controllerd: warning: {p}:4: unknown key jRaftElectionTimeoutMS "
        "(did you mean jRaftElectionTimeoutMs? keys are case-sensitive); ignored"
    )
    assert run("check-config", "--lenient", "--strict", "-c", str(p))[0] == 2  # a usage error


def test_a_node_started_with_an_unknown_key_names_it_in_its_boot_line(tmp_path: Path) -> None:
    # A real start: the node ignores the key as RocketMQ does, and its last start-up line says so.
    raft, remoting, http = free_ports(3)
    p = tmp_path / "n.conf"
    p.write_text(
        f"jRaftServerId=127.0.0.1:{raft}\njRaftInitConf=127.0.0.1:{raft}\n"
        f"jRaftControllerRPCAddr=127.0.0.1:{remoting}\ncontrollerHttpAddr=127.0.0.1:{http}\n"
        f"controllerStorePath={tmp_path / 'data'}\njRaftElectionTimeoutMS=3000\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.controllerd", "--type", "jraft", "-c", str(p), "--log-format", "json"],
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.stderr is not None
    boot: dict[str, Any] | None = None
    try:
        deadline = time.monotonic() + 60
        while boot is None and time.monotonic() < deadline:  # readline returns "" at EOF (the node died)
            line = proc.stderr.readline()
            if not line:
                break
            if line.startswith("{") and "boot success" in line:
                boot = json.loads(line)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert boot is not None, "no boot line"
    assert boot["level"] == "warning"
    assert boot["msg"].endswith(
        f"; IGNORED 1 unknown key(s) of {p}, their settings are NOT in effect: jRaftElectionTimeoutMS at line 6 "
        "(did you mean jRaftElectionTimeoutMs? keys are case-sensitive) (`controllerd check-config` fails on them)"
    )


def test_cli_print_config_reads_back_as_the_same_config_with_sources_as_comments(tmp_path: Path) -> None:
    p = tmp_path / "n.conf"
    p.write_text(LOOPBACK + "controllerStorePath=/data/#ctl \\\\x\ncontrollerAdminToken=admin-token-1234\n")
    code, out, err = run("--type", "jraft", "-c", str(p), "-p")
    assert code == 0
    printed = tmp_path / "printed.conf"
    printed.write_text(out)
    assert run("check-config", "-c", str(printed))[0] == 0  # the output is a valid config
    original, again = load_config(p)[0], load_config(printed)[0]
    same = {f.name for f in dataclasses.fields(ControllerConfig)} - {"path", "sources", "admin_token"}
    assert {k: getattr(again, k) for k in same} == {k: getattr(original, k) for k in same}
    assert original.store_path == "/data/#ctl \\x"
    lines = out.splitlines()
    assert lines[lines.index("jRaftServerId=127.0.0.1:9881") - 1] == f"# {p}:1"
    assert lines[lines.index("jRaftGroupId=jRaft-Controller") - 1] == "# default"
    assert f"# controllerAdminToken: set in {p}:5, not printed" in lines
    assert (
        "# jRaftClusterSecret: not set (the public development secret is used: every address is loopback); "
        "source: dev-default (loopback only)" in lines
    )
    assert "admin-token-1234" not in out and DEV_CLUSTER_SECRET.decode() not in out


def test_cli_print_config_never_prints_secrets(tmp_path: Path) -> None:
    p = tmp_path / "n.conf"
    p.write_text(REMOTE)
    code, out, err = run("--type", "jraft", "-c", str(p), "-p")
    assert code == 0 and err == ""
    keys = [ln.split("=", 1)[0] for ln in out.splitlines() if not ln.startswith("#")]
    assert keys == [s.key for s in KEYS if s.kind != "secret"]
    assert "jRaftServerId=10.0.0.2:9880" in out.splitlines()
    assert f"# controllerAdminToken: set in {p}:4, not printed" in out.splitlines()
    assert "admin-token-1234" not in out and "cluster-secret-5678" not in out


def test_cli_usage_errors_exit_2(tmp_path: Path) -> None:
    p = tmp_path / "n.conf"
    p.write_text(LOOPBACK)
    code, _, err = run("--type", "dledger", "-c", str(p), "-p")
    assert code == 2 and "'dledger': only 'jraft' is implemented" in err
    code, _, err = run("--type", "jraft")
    assert code == 2 and "starting a node needs -c FILE" in err
    code, _, err = run("check-config")
    assert code == 2 and "check-config needs -c FILE" in err
    code, out, _ = run("--help")
    assert code == 0 and "controllerd local-cluster" in out and "Exit codes: 0 ok, 1 the node failed" in out


def test_installed_console_script(tmp_path: Path) -> None:
    """The [project.scripts] entry point exists and returns the documented exit codes."""
    script = Path(sys.executable).with_name("controllerd")
    good, bad = tmp_path / "good.conf", tmp_path / "bad.conf"
    good.write_text(LOOPBACK)
    bad.write_text(LOOPBACK + "enableElectUncleanMaster=on\n")
    ok = subprocess.run([script, "check-config", "-c", good], capture_output=True, text=True, timeout=30)
    assert ok.returncode == 0, ok.stderr
    ko = subprocess.run([script, "check-config", "-c", bad], capture_output=True, text=True, timeout=30)
    assert ko.returncode == 2
    assert f"{bad}:4: enableElectUncleanMaster=on: must be true or false" in ko.stderr


def test_a_line_with_an_empty_key_is_a_warning() -> None:
    _, warnings = parse_config(LOOPBACK + "=orphan value\n", "n.conf")
    assert "n.conf:4: line with an empty key (value 'orphan value'); ignored" in warnings


def test_the_shipped_3_node_samples_validate_and_pair_up() -> None:
    root = Path(__file__).resolve().parents[2] / "conf" / "jraft"
    cfgs = [load_config(root / f"controller-n{i}.conf")[0] for i in (1, 2, 3)]
    assert [c.server_id for c in cfgs] == list(cfgs[0].init_conf)
    assert all(c.init_conf == cfgs[0].init_conf and c.rpc_addrs == cfgs[0].rpc_addrs for c in cfgs)
    assert all(c.admin_token and c.cluster_secret for c in cfgs)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_the_sample_configs_parse_without_a_warning_remoting_on_rpc_addr_http_on_controller_http_addr(n: int) -> None:
    path = Path(__file__).resolve().parents[2] / "conf" / "jraft" / f"controller-n{n}.conf"
    cfg, warnings = load_config(str(path))
    assert warnings == []
    assert remoting_address(cfg) == (f"10.0.0.{n}", 9770) and http_address(cfg) == (f"10.0.0.{n}", 8080)


# ---------------------------------------------------------------------------------------------------------------
# Metrics exporter keys (RocketMQ's ControllerConfig names)


def test_metrics_exporter_keys_by_name_or_number() -> None:
    cfg, _ = parse_config(LOOPBACK, "n.conf")
    assert (cfg.metrics_exporter_type, cfg.metrics_prom_port, cfg.metrics_prom_host) == ("DISABLE", 5557, "")
    for value, name in (("PROM", "PROM"), ("2", "PROM"), ("LOG", "LOG"), ("3", "LOG"), ("0", "DISABLE")):
        cfg, _ = parse_config(LOOPBACK + f"metricsExporterType={value}\n", "n.conf")
        assert cfg.metrics_exporter_type == name
    text = "metricsExporterType=1\nmetricsGrpcExporterTarget=http://127.0.0.1:4317\nmetricsGrpcExporterHeader=a:b,c:d\n"
    cfg, _ = parse_config(LOOPBACK + text + "metricsLabel=dc:east,,rack:r1\nmetricsPromExporterPort=9555\n", "n.conf")
    export = metrics_export(cfg)
    assert export.exporter_type == "OTLP_GRPC" and export.headers() == {"a": "b", "c": "d"}
    assert pairs(cfg.metrics_label, "metricsLabel") == {"dc": "east", "rack": "r1"} and export.prom_port == 9555


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "metricsExporterType=PROMETHEUS\n",
            r"n\.conf:4: metricsExporterType=PROMETHEUS: unknown metrics exporter type",
        ),
        ("metricsExporterType=7\n", r"metricsExporterType=7: unknown metrics exporter type '7'; one of DISABLE \(0\)"),
        ("metricsExporterType=OTLP_GRPC\n", r"metricsGrpcExporterTarget= \(default.*needs an OTLP/gRPC endpoint"),
        ("metricsLabel=dc\n", r"n\.conf:4: metricsLabel=dc: metricsLabel: 'dc' is not key:value"),
        ("metricsLabel=a-b:1\n", r"metricsLabel=a-b:1: metrics label 'a-b' is not a valid Prometheus label name"),
        ("metricsGrpcExporterHeader=x:1:2\n", r"metricsGrpcExporterHeader: 'x:1:2' is not key:value"),
        ("metricsPromExporterPort=70000\n", r"metricsPromExporterPort=70000: must be <= 65535"),
    ],
)
def test_bad_metrics_exporter_keys_are_errors_naming_key_and_line(text: str, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        parse_config(LOOPBACK + text, "n.conf")


def test_snapshot_log_bytes_and_the_store_quota_reach_the_options() -> None:
    text = "statemachineSnapshotLogBytes=1048576\ncontrollerStoreQuotaBytes=8589934592\ncontrollerAlarmFreeDiskMB=0\n"
    cfg, _ = parse_config(LOOPBACK + text, "n.conf")
    opts = to_service_options(cfg)
    assert opts.node.snapshot.threshold_log_bytes == 1 << 20
    assert (opts.store_quota_bytes, opts.alarm_free_disk_mb) == (8 << 30, 0)  # a quota past a Java int: a long
    assert (opts.corrupt_check_entries, opts.corrupt_check_interval_ms) == (10_000, 60_000)
    default = to_service_options(parse_config(LOOPBACK, "n.conf")[0])
    assert (default.node.snapshot.threshold_log_bytes, default.store_quota_bytes) == (64 << 20, 2 << 30)
    with pytest.raises(ConfigError, match=r"controllerAlarmFreeDiskMB=8: must be above controllerMinFreeDiskMB \(16\)"):
        parse_config(LOOPBACK + "controllerAlarmFreeDiskMB=8\n", "n.conf")
    with pytest.raises(ConfigError, match=r"statemachineSnapshotLogBytes=-1: must be >= 0"):
        parse_config(LOOPBACK + "statemachineSnapshotLogBytes=-1\n", "n.conf")


def test_autopilot_keys_reach_the_node_options() -> None:
    text = "jRaftAutopilot=true\njRaftAutopilotStabilizationSecs=20\njRaftAutopilotDeadServerSecs=90\njRaftAutopilotMinQuorum=5\n"
    ap = to_node_options(parse_config(LOOPBACK + text, "n.conf")[0]).autopilot
    assert (ap.enabled, ap.stabilization_s, ap.dead_server_s, ap.min_quorum) == (True, 20.0, 90.0, 5)
    off = to_node_options(parse_config(LOOPBACK, "n.conf")[0]).autopilot
    assert (off.enabled, off.stabilization_s, off.dead_server_s, off.min_quorum) == (False, 10.0, 60.0, 3)
    with pytest.raises(ConfigError, match=r"n\.conf:4: jRaftAutopilotMinQuorum=0: must be >= 1"):
        parse_config(LOOPBACK + "jRaftAutopilotMinQuorum=0\n", "n.conf")
