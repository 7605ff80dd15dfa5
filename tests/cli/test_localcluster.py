"""`controllerd local-cluster` (make run) as real processes: SIGINT and SIGHUP stop every node even when the
supervisor was started with SIGINT ignored (a background job of a non-interactive shell), one node is
stopped and restarted through the control socket, a node that fails to start has its error printed, and the
simulated broker groups beside the nodes register, heartbeat (both shown on the terminal) and elect their
masters (then stop with the cluster).
One-node clusters on free loopback ports: each test is bounded by its own deadlines."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.remoting.client import RemotingClient
from api.remoting.headers import GET_METADATA_INFO
from cli.localcluster import REMOTING_OFFSET, LocalNode, last_errors, socket_path
from raft.storage.dirlock import DataDirLock
from raft.testing.cluster import free_port_base

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("controllerd")]

ROOT = Path(__file__).resolve().parents[2]
CONTROLLERD = [sys.executable, "-m", "cli.controllerd"]


@pytest.fixture
def data() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="lc") as d:  # short: the control socket lives in it
        yield os.path.join(d, "data")


def supervisor(
    data: str, *, ignore_sigint: bool = False, http_port: int | None = None, brokers: bool = False
) -> subprocess.Popen[str]:
    # raft on base, HTTP on base + 1 and remoting on HTTP + REMOTING_OFFSET: all three must be free
    base = free_port_base((0, 1, 1 + REMOTING_OFFSET))
    args = [
        *CONTROLLERD,
        "local-cluster",
        "--data",
        data,
        "--nodes",
        "1",
        "--raft-port",
        str(base),
        "--http-port",
        str(http_port or base + 1),
        "--election-ms",
        "300",
        *(["--broker-groups", "2"] if brokers else ["--no-brokers"]),
    ]
    if ignore_sigint:  # what `cmd &` in a script does: the job starts with SIGINT ignored
        args = ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *args]
    return subprocess.Popen(
        args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


@contextlib.contextmanager
def running(data: str, **kw: Any) -> Iterator[subprocess.Popen[str]]:
    """`supervisor(data, **kw)`, stopped on the way out (`cleanup`) if the test did not stop it."""
    proc = supervisor(data, **kw)
    try:
        yield proc
    finally:
        cleanup(proc)


def stop(proc: subprocess.Popen[str], sig: int) -> tuple[str, str]:
    """Signal the supervisor's process group; its (stdout, stderr) once it has exited."""
    os.killpg(proc.pid, sig)
    return proc.communicate(timeout=60)


def read_until(proc: subprocess.Popen[str], marker: str, timeout: float = 60) -> list[str]:
    """stdout lines up to the one containing `marker` (the supervisor prints it once the cluster is ready)."""
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if marker in line:
            return lines
    proc.terminate()  # the supervisor stops its nodes (a kill would leave them running)
    try:
        err = proc.communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        err = ""
    raise AssertionError(f"no {marker!r} from the supervisor: {lines} {err}")


def node_pid(lines: list[str]) -> int:
    row = next(line for line in lines if line.startswith("  n1  pid "))
    return int(row.split()[2])


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def cleanup(proc: subprocess.Popen[str]) -> None:
    """However a test ended: stop the supervisor (SIGTERM stops its nodes)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()


def cleanup_nodes(pids: list[int]) -> None:
    """Kill any node a failed test left behind (a supervisor that died of a signal cannot stop its nodes: they
    run in their own sessions)."""
    for pid in pids:
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)


def control(data: str, *verb: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CONTROLLERD, "local-cluster", "--data", data, *verb], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


async def metadata(address: str) -> dict[str, str]:
    """GET_METADATA_INFO (1005) over RocketMQ remoting, as mqadmin getControllerMetaData asks it."""
    host, port = address.rsplit(":", 1)
    client = await RemotingClient.connect(host, int(port))
    try:
        return (await client.request(GET_METADATA_INFO)).ext_fields
    finally:
        client.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP])
def test_a_signal_to_the_process_group_stops_every_node_even_with_sigint_ignored(data: str, sig: int) -> None:
    pids: list[int] = []
    with contextlib.ExitStack() as stack:
        stack.callback(lambda: cleanup_nodes(pids))  # a supervisor killed by the signal cannot stop its nodes
        proc = stack.enter_context(running(data, ignore_sigint=True))
        lines = read_until(proc, "Ctrl-C stops the cluster.")
        pid = node_pid(lines)
        pids.append(pid)
        assert any(line.strip() == f"data {data}/n1  log {data}/logs/n1.log" for line in lines)
        # The generated file is a RocketMQ controller.conf: no controllerHttpAddr, so HTTP is on the remoting
        # port - 1000, and brokers find the group over remoting on jRaftControllerRPCAddr.
        conf = Path(data, "conf", "n1.conf").read_text()
        assert "\ncontrollerHttpAddr" not in conf and "\njRaftControllerRPCAddr = " in conf
        node = next(line.split() for line in lines if line.startswith("  n1  pid "))
        http, remoting = node[3].removeprefix("http://"), node[5]
        assert int(remoting.rsplit(":")[1]) - 1000 == int(http.rsplit(":")[1])
        assert asyncio.run(metadata(remoting))["controllerLeaderAddress"] == remoting
        out, err = stop(proc, sig)  # `kill -INT -PGID`, or the terminal hanging up
    assert proc.returncode == 0, err
    assert out.rstrip().endswith("stopped.")
    assert f"{signal.Signals(sig).name}: stopping the cluster" in err
    assert gone(pid)
    assert not os.path.exists(socket_path(data))


def test_one_node_is_stopped_started_and_restarted_through_the_control_socket(data: str) -> None:
    with running(data) as proc:
        first = node_pid(read_until(proc, "Ctrl-C stops the cluster."))
        status = control(data, "status")
        assert status.returncode == 0, status.stderr
        assert status.stdout.splitlines()[0].startswith(f"  n1  pid {first}  http://127.0.0.1:")
        assert status.stdout.splitlines()[0].endswith("<- leader")

        restarted = control(data, "restart", "n1")
        assert restarted.returncode == 0, restarted.stderr
        assert restarted.stdout.splitlines()[:2] == ["n1 stopped (exit 0)", "n1 started, ready"]
        second = int(restarted.stdout.splitlines()[2].split()[2])
        assert second != first and gone(first)

        stopped = control(data, "stop", "n1")
        assert (stopped.returncode, stopped.stdout) == (0, "n1 stopped (exit 0)\n")
        assert gone(second)
        again = control(data, "stop", "n1")
        assert (again.returncode, again.stdout) == (1, "n1 is not running\n")
        assert control(data, "status").stdout.splitlines()[0].startswith("  n1  stopped  http://")
        unknown = control(data, "restart", "n7")
        assert (unknown.returncode, unknown.stdout) == (1, "no node 'n7'; the nodes are n1\n")
        started = control(data, "start", "n1")
        assert started.returncode == 0 and started.stdout.startswith("n1 started, ready\n")

        stop(proc, signal.SIGTERM)
    assert proc.returncode == 0
    late = control(data, "status")
    assert late.returncode == 1 and "no local cluster is running on" in late.stderr


def test_a_node_that_cannot_start_has_its_last_error_lines_printed(data: str) -> None:
    held = DataDirLock(os.path.join(data, "n1"))  # as if another controllerd used n1's data directory
    try:
        proc = supervisor(data)
        out, err = proc.communicate(timeout=60)
    finally:
        held.release()
    assert proc.returncode == 1
    assert "the cluster did not start (stopped: n1 (exit 1))" in err
    assert f"n1 exited (exit 1); its last log lines ({data}/logs/n1.log):" in err
    assert f"is locked by process {os.getpid()}" in err.split("its last log lines", 1)[1]


def test_ports_in_use_are_named_before_any_node_starts(data: str) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()  # e.g. another `make run` on other data: it would answer /readyz in n1's place
    try:
        port = taken.getsockname()[1]
        proc = supervisor(data, http_port=port)
        out, err = proc.communicate(timeout=60)
    finally:
        taken.close()
    assert proc.returncode == 1
    assert out == ""  # never "is running"
    assert err.startswith(
        "the cluster did not start: its ports are in use (another local cluster, or another program):"
    )
    assert f"    n1 HTTP 127.0.0.1:{port}: Address already in use\n" in err
    assert not os.path.exists(os.path.join(data, "logs", "n1.log"))  # no node was started


def test_last_errors_reads_only_this_runs_error_lines(tmp_path: Path) -> None:
    log = tmp_path / "n1.log"
    old = '{"level":"error","msg":"from an earlier run"}\n'
    log.write_text(
        old + "controllerd: warning: x.conf: jRaftClusterSecret is not set\n"
        '{"level":"info","msg":"starting"}\n'
        '{"level":"error","msg":"the controller failed","exc":"Traceback ...\\nOSError: disk full"}\n'
        "Traceback (most recent call last):\n"
    )
    node = LocalNode("n1", "r", "h", "c", str(log), "d", log_offset=len(old))
    assert last_errors(node) == [
        "error: the controller failed (OSError: disk full)",
        "Traceback (most recent call last):",
    ]
    log.write_text('{"level":"info","msg":"starting"}\n{"level":"warning","msg":"slow disk"}\n')
    assert last_errors(LocalNode("n1", "r", "h", "c", str(log), "d"), limit=1) == ["warning: slow disk"]


def test_a_node_killed_by_a_signal_is_reported_as_such_not_as_a_negative_exit_code(tmp_path: Path) -> None:
    node = LocalNode("n1", "r", "h", "c", str(tmp_path / "n1.log"), "d")
    node.proc = subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    node.proc.wait(timeout=30)
    assert node.how == "killed by SIGKILL"  # `kill -9 <pid>`, the README's crash; not "exit -9"
    node.proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(2)"])
    node.proc.wait(timeout=30)
    assert node.how == "exit 2"


def test_the_simulated_brokers_register_elect_masters_and_stop_with_the_cluster(data: str) -> None:
    with running(data, brokers=True) as proc:
        lines = read_until(proc, "Ctrl-C stops the cluster.")
        http = next(line.split("http://")[1].split()[0] for line in lines if line.startswith("  n1  pid "))
        assert f"Status page: http://{http}/ui/  (on every node)" in lines
        assert any(line.startswith("Simulated brokers: 2 broker sets of 3") for line in lines)
        # The terminal shows them registering and then heartbeating (the first summary, once every broker's
        # heartbeat was answered).
        shown = read_until(proc, "heartbeats: 6 of 6 brokers answered", timeout=30)
        for name in ("broker-a", "broker-b"):
            assert sum(f" {name}/" in line and ": registered as id " in line for line in shown) == 3, shown
        log = os.path.join(data, "logs", "brokers.log")
        deadline = time.monotonic() + 30
        masters: dict[str, object] = {}
        while time.monotonic() < deadline and len(masters) < 2:
            # Polled at the sim's pace: its brokers heartbeat every second.
            r = httpx.get(f"http://{http}/api/v1/admin/broker-sets", timeout=5).json()
            table = (r.get("body") or {}).get("replicasInfoTable") or {}
            masters = {
                n: s["masterBrokerId"]
                for n, s in table.items()
                if s["masterBrokerId"] is not None
                and sum(x["alive"] for x in s["inSyncReplicas"] + s["notInSyncReplicas"]) == 3
            }
            if len(masters) < 2:
                time.sleep(0.2)
        assert set(masters) == {"broker-a", "broker-b"}, open(log).read()
        sim_pid = int(
            subprocess.run(["pgrep", "-f", f"tools.brokersim .*{data}"], capture_output=True, text=True).stdout.split()[
                0
            ]
        )
        # They speak RocketMQ remoting to the jRaftControllerRPCAddr entries, as real brokers.
        with open(f"/proc/{sim_pid}/cmdline", "rb") as f:
            argv = f.read().decode().split("\0")
        remotings = [line.split("remoting ")[1].split()[0] for line in lines if " pid " in line and "remoting " in line]
        assert "--remoting" in argv and argv[argv.index("-a") + 1] == ",".join(remotings), argv
        stop(proc, signal.SIGINT)
    assert proc.returncode == 0
    assert gone(sim_pid)
    assert "registered as id" in open(log).read()
