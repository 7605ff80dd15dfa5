"""tools/cluster.py's wait_ready on a node that is slow to answer: a request that timed out is asked again,
even when no node logs anything after it (fresh run of 2026-11-30: a group that was ready went quiet, and
wait_ready, waiting for a log line that never came, reported it not ready 23 s later)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tools.cluster import ControllerdCluster


class SlowFirst(BaseHTTPRequestHandler):
    """/readyz: the first request is never answered (until the test ends), later ones are 200;
    /api/v1/raft/status names a leader."""

    release = threading.Event()
    readyz = 0

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/readyz":
            type(self).readyz += 1
            if type(self).readyz == 1:
                self.release.wait(30)  # the client gives up after its 2 s timeout first
            body = b"{}"
        else:
            body = json.dumps({"body": {"leaderId": "127.0.0.1:1"}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    SlowFirst.release, SlowFirst.readyz = threading.Event(), 0
    s = ThreadingHTTPServer(("127.0.0.1", 0), SlowFirst)
    s.daemon_threads = True
    t = threading.Thread(target=s.serve_forever, daemon=True)
    t.start()
    try:
        yield s
    finally:
        SlowFirst.release.set()
        s.shutdown()
        s.server_close()


def test_a_request_that_timed_out_is_asked_again_without_a_log_line(
    tmp_path: Path, server: ThreadingHTTPServer
) -> None:
    c = ControllerdCluster(str(tmp_path), n=1)
    c.https[0] = f"127.0.0.1:{server.server_address[1]}"
    alive = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"])  # runs, logs nothing
    c.procs[0] = alive
    try:
        assert c.wait_ready(timeout=15) == "127.0.0.1:1"
    finally:
        alive.kill()
        alive.wait()
    assert SlowFirst.readyz >= 2
