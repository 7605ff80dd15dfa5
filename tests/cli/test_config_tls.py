"""The TLS keys of controller.conf (RocketMQ's names, cli/config.py) and controllerd's start-up warning about an
open remoting port (docs/security.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.config import ConfigError, parse_config, tls_settings
from cli.controllerd import main, open_remoting_warning
from tests.cli.test_config import LOOPBACK, REMOTE
from tools.pki import CA


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return CA(tmp_path_factory.mktemp("pki"))


def tls_lines(ca: CA, tmp: Path, **over: str) -> str:
    pair = ca.issue("controller", password="pw")
    keys = {
        "tls.server.mode": "enforcing",
        "tls.config.file": str(tmp / "absent.properties"),
        "tls.test.mode.enable": "false",
        "tls.server.certPath": pair.cert,
        "tls.server.keyPath": pair.key,
        "tls.server.keyPassword": "pw",
        "tls.server.need.client.auth": "require",
        "tls.server.authClient": "true",
        "tls.server.trustCertPath": ca.path,
    } | over
    return "".join(f"{k}={v}\n" for k, v in keys.items())


def test_the_keys_map_onto_the_settings_and_the_password_is_never_printed(ca: CA, tmp_path: Path) -> None:
    cfg, _ = parse_config(LOOPBACK + tls_lines(ca, tmp_path), "n.conf")
    s = tls_settings(cfg)
    assert (s.mode, s.need_client_auth, s.auth_client, s.key_password) == ("enforcing", "require", True, "pw")
    assert s.where("tls.server.mode") == "n.conf:4"
    conf = tmp_path / "n.conf"
    conf.write_text(LOOPBACK + tls_lines(ca, tmp_path))
    printed = CliRunner().invoke(main, ["--type", "jraft", "-c", str(conf), "-p"])
    assert printed.exit_code == 0 and "tls.server.mode=enforcing" in printed.output
    assert "=pw" not in printed.output and "# tls.server.keyPassword: set in" in printed.output


@pytest.mark.parametrize(
    ("over", "error"),
    [
        ({"tls.server.mode": "on"}, r"n\.conf:4: tls\.server\.mode=on: must be one of disabled, permissive, enforcing"),
        ({"tls.server.need.client.auth": "always"}, r"tls\.server\.need\.client\.auth=always: must be one of none"),
        ({"tls.server.keyPassword": "wrong"}, r"cannot load the certificate and key .*keyPassword set"),
        (
            {"tls.server.certPath": "/nonexistent.pem"},
            r"tls\.server\.certPath=/nonexistent\.pem \(n\.conf:7\): no such",
        ),
        ({"tls.server.authClient": "false"}, r"tls\.server\.authClient=false .*would not be verified"),
    ],
)
def test_bad_tls_settings_fail_check_config_naming_the_key(
    ca: CA, tmp_path: Path, over: dict[str, str], error: str
) -> None:
    with pytest.raises(ConfigError, match=error):
        parse_config(LOOPBACK + tls_lines(ca, tmp_path, **over), "n.conf")
    conf = tmp_path / "n.conf"
    conf.write_text(LOOPBACK + tls_lines(ca, tmp_path, **over))
    checked = CliRunner().invoke(main, ["check-config", "-c", str(conf)])
    assert checked.exit_code == 2, checked.output


def test_certificates_ignored_in_test_mode_are_warned_about(ca: CA, tmp_path: Path) -> None:
    cfg, warnings = parse_config(LOOPBACK + tls_lines(ca, tmp_path, **{"tls.test.mode.enable": "true"}), "n.conf")
    assert cfg.tls_test_mode
    assert [w for w in warnings if w.startswith("n.conf:7: tls.server.certPath is ignored while tls.test.mode")]


def test_a_non_loopback_remoting_port_without_client_certificates_is_warned_about(ca: CA, tmp_path: Path) -> None:
    open_cfg, _ = parse_config(REMOTE, "n.conf")
    assert "non-loopback 10.0.0.2:9770" in open_remoting_warning(open_cfg)
    optional, _ = parse_config(REMOTE + tls_lines(ca, tmp_path, **{"tls.server.need.client.auth": "optional"}))
    assert open_remoting_warning(optional)  # a client without a certificate still gets in
    required, _ = parse_config(REMOTE + tls_lines(ca, tmp_path))
    assert open_remoting_warning(required) == ""
    users = tmp_path / "users.properties"
    users.write_text("user.ops.secretKey=s\nuser.ops.role=admin\n")
    signed, _ = parse_config(REMOTE + f"controllerAclFile={users}\n")
    assert open_remoting_warning(signed) == ""
    users.write_text("user.ops.role=admin\n")
    with pytest.raises(ConfigError, match=rf"controllerAclFile=.*cannot use it: {users}:1: user ops has no secretKey"):
        parse_config(REMOTE + f"controllerAclFile={users}\n")
    loopback, _ = parse_config(LOOPBACK)
    assert open_remoting_warning(loopback) == ""
