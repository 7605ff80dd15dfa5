"""The local default binds to loopback: `rmq-audit DATA` with no master and no SPARK_LOCAL_IP (Spark alone would
take the machine's first non-loopback interface, and 0.0.0.0 for its UI) holds no socket, listening or
connected, on any other address: its Python, the JVM it starts and that JVM's Python workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.testdata.cluster_data import build_cluster_data
from tests.tools.audit.spark_cluster import BIN, SocketLog, base_env, run_watched
from tools.audit.model import EXIT_OK

pytestmark = pytest.mark.slow


def test_local_default_connects_to_nothing_but_loopback(tmp_path: Path) -> None:
    build_cluster_data(tmp_path / "data")
    env = base_env()
    del env["SPARK_LOCAL_IP"]  # the audit's own default, not the test's
    sockets = SocketLog()
    p = run_watched([str(BIN / "rmq-audit"), "--no-plots", "--out", "out", "data"], env, tmp_path, 240, sockets)
    assert p.returncode == EXIT_OK, p.stderr[-4000:]
    assert "Spark UI http://127.0.0.1:" in p.stderr
    listening = {s for s in sockets.seen if s[0] == "LISTEN"}
    assert listening and len({s[3] for s in sockets.seen}) >= 2  # the JVM and the Python side were watched
    assert sockets.not_loopback() == []
