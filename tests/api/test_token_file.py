"""controllerAdminTokenFile: the token stays out of the config and the process list, two tokens are accepted
during a rotation, and a change of the file takes effect without a restart."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from api.http.app import create_app
from api.service.settings import ApiSettings, read_token_file
from cli.config import ConfigError, parse_config
from tests.api.harness import Node

pytestmark = pytest.mark.anyio
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _rewrite(path, text: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)  # a new inode: the change is seen even within one mtime tick


async def test_rotation_accepts_two_tokens_then_only_the_new_one(node: Node, tmp_path) -> None:
    path = tmp_path / "token"
    _rewrite(path, "old-token\n")
    app = create_app(node.service, ApiSettings(admin_token_file=str(path)))
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://x") as client:

            async def status(token: str | None) -> int:
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                return (await client.get("/api/v1/raft/status", headers=headers)).status_code

            assert [await status(t) for t in ("old-token", "new-token", None)] == [200, 401, 401]
            _rewrite(path, "old-token\n  new-token  \n\n")
            assert [await status(t) for t in ("old-token", "new-token")] == [200, 200]
            _rewrite(path, "new-token\n")
            assert [await status(t) for t in ("old-token", "new-token")] == [401, 200]
            os.unlink(path)  # fail closed: an unreadable file accepts nobody
            assert await status("new-token") == 401
    finally:
        node.service.listeners.remove(app.state.gateway.metrics.on_result)


def test_token_file_errors_name_the_file_never_the_token(tmp_path) -> None:
    path = tmp_path / "token"
    path.write_text("a\nb\nsecret-c\n")
    with pytest.raises(ValueError, match="3 tokens; at most 2") as e:
        read_token_file(str(path))
    assert "secret-c" not in str(e.value)
    path.write_text("\n \n")
    with pytest.raises(ValueError, match="no token"):
        read_token_file(str(path))
    base = "jRaftServerId=localhost:9880\n"
    with pytest.raises(ConfigError, match="controllerAdminTokenFile.*cannot use it"):
        parse_config(base + f"controllerAdminTokenFile={tmp_path}/missing\n", "c.conf")
    path.write_text("t1\n")
    with pytest.raises(ConfigError, match="set only one of them"):
        parse_config(base + f"controllerAdminTokenFile={path}\ncontrollerAdminToken=t2\n", "c.conf")


def print_config(conf: Path) -> subprocess.CompletedProcess[str]:
    """`controllerd -c CONF -p`: the effective configuration, printed."""
    return subprocess.run(
        [sys.executable, "-m", "cli.controllerd", "--type", "jraft", "-c", str(conf), "-p"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def test_print_config_and_logs_never_show_the_tokens(tmp_path) -> None:
    token = tmp_path / "token"
    token.write_text("file-token-7f3a\n")
    conf = tmp_path / "c.conf"
    conf.write_text(f"controllerAdminTokenFile={token}\njRaftClusterSecret=peer-secret-91bc\n")
    out = print_config(conf)
    assert out.returncode == 0, out.stderr
    assert f"controllerAdminTokenFile={token}" in out.stdout
    for secret in ("file-token-7f3a", "peer-secret-91bc"):
        assert secret not in out.stdout + out.stderr
    conf.write_text("controllerAdminToken=inline-token-55\njRaftClusterSecret=peer-secret-91bc\n")
    out = print_config(conf)
    assert out.returncode == 0 and "inline-token-55" not in out.stdout + out.stderr
