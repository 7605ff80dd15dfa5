"""Disk full on a real, size-limited file system (tmpfs mounts the test makes and removes; needs root): the
leader refuses writes with 503 (never a 200 for a write it could not sync), reads go on, a snapshot that
cannot be written leaves no half files, and writes resume by themselves once space is freed."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess

import httpx
import pytest

from tests.daemon.cluster import ControllerdCluster

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("torture-disk"),
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting tmpfs needs root"),
]

# The tests check that the same leader goes on (no restart, no hand-over): 1000 ms, not 300, which a loaded
# 2-core machine (a fresh clone, 2026-11-30) missed once, moving the leadership mid-test.
ELECTION_MS = 1000
# The hard floor these tests are about (controllerMinFreeDiskMB: 503 below it), and the NOSPACE alarm off: its
# default (controllerAlarmFreeDiskMB 64) is above the whole 24 MiB mount, so its first check (every 5 s) raised it
# and refused every write with code 1. Fast, the first write came before that check; in a fresh clone on a starved
# machine (2026-12-01) it came after it.
FLOOR = "controllerMinFreeDiskMB=8\ncontrollerAlarmFreeDiskMB=0\n"


def _free(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _fill(path: str, leave: int) -> None:
    """Write a filler file until at most `leave` bytes are free."""
    with open(os.path.join(path, f"filler-{leave}"), "wb") as f:
        try:
            while _free(path) > leave:
                f.write(b"\0" * min(1 << 20, max(4096, _free(path) - leave)))
                f.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC


def _put(client: httpx.Client, c: ControllerdCluster, i: int, key: str) -> httpx.Response:
    return client.put(c.url(i, f"/api/v1/kv/t/{key}"), json={"value": key})


@pytest.fixture
def mounts(tmp_path):
    points = [str(tmp_path / f"disk{i}") for i in range(3)]
    mounted = []
    try:
        for p in points:
            os.makedirs(p)
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", p], check=True)
            mounted.append(p)
        yield points
    finally:
        for p in mounted:
            subprocess.run(["umount", "-l", p], check=False)


def test_disk_full_503_reads_go_on_no_half_snapshot_and_recovery(tmp_path, mounts):
    stores = [os.path.join(m, "store") for m in mounts]
    c = ControllerdCluster(
        str(tmp_path / "run"),
        election_ms=ELECTION_MS,
        stores=stores,
        extra=FLOOR + "statemachineSnapshotThreshold=0\n",
    )
    c.start_all()
    try:
        leader = c.index_of(c.wait_ready())
        disk = mounts[leader]
        with httpx.Client(timeout=10) as client:
            assert _put(client, c, leader, "before").json()["code"] == 0
            _fill(disk, 4 << 20)  # below the 8 MiB reserve
            answers: list[httpx.Response] = []  # free space is re-read every 100 ms: write until the refusals start
            while len(answers) < 2000 and (not answers or answers[-1].status_code == 200):
                answers.append(_put(client, c, leader, f"full{len(answers)}"))
            answers += [_put(client, c, leader, f"full{len(answers)}") for _ in range(5)]
            refused = [r for r in answers if r.status_code == 503]
            assert refused, [r.text for r in answers[:3]]
            assert "disk nearly full" in refused[0].text and disk in refused[0].text, refused[0].text
            # Every 200 (within the first 100 ms of cached free space) was a real, synced write.
            synced = [f"full{n}" for n, r in enumerate(answers) if r.status_code == 200]
            assert all(r.status_code in (200, 503) for r in answers)
            r = client.get(c.url(leader, "/api/v1/kv/t/before"))
            assert r.status_code == 200 and r.json()["body"]["value"] == "before"  # reads go on
            # No space at all: a snapshot cannot be written, and leaves nothing half-written behind.
            _fill(disk, 0)
            before = sorted(os.listdir(os.path.join(stores[leader], "snapshot")))
            r = client.post(c.url(leader, "/api/v1/raft/snapshot"))
            assert r.status_code != 200 or r.json()["code"] != 0, r.text
            assert c.procs[leader].poll() is None  # a failed snapshot does not stop the node
            snap_dir = os.path.join(stores[leader], "snapshot")
            assert sorted(n for n in os.listdir(snap_dir) if n != "temp") == [n for n in before if n != "temp"]
            with contextlib.suppress(FileNotFoundError):
                assert os.listdir(os.path.join(snap_dir, "temp")) == []
            for f in os.listdir(disk):  # space comes back: writes resume without a restart
                if f.startswith("filler"):
                    os.unlink(os.path.join(disk, f))
            for n in range(5000):  # free space is re-read every 100 ms
                r = _put(client, c, leader, f"after{n}")
                if r.status_code == 200:
                    break
                assert r.status_code == 503
            assert r.status_code == 200 and r.json()["code"] == 0, r.text
            assert c.procs[leader].poll() is None and c.index_of(c.wait_ready()) == leader
            for key in ["before", *synced, f"after{n}"]:
                assert client.get(c.url(leader, f"/api/v1/kv/t/{key}")).json()["body"]["value"] == key
    finally:
        c.stop_all()


def _status(client: httpx.Client, c: ControllerdCluster, i: int) -> dict:
    return client.get(c.url(i, "/api/v1/raft/status")).json()["body"]


def _big(key: str) -> str:
    return key + "x" * (64 << 10)


def test_a_follower_whose_disk_fills_pauses_and_catches_up_by_itself(tmp_path, mounts):
    # Before: the follower's next WAL write failed with ENOSPC, an I/O error that stopped it for good.
    stores = [os.path.join(m, "store") for m in mounts]
    c = ControllerdCluster(str(tmp_path / "run"), election_ms=ELECTION_MS, stores=stores, extra=FLOOR)
    for i in range(3):
        c.start(i, {"CONTROLLERD_UNSAFE_LOCAL_READS": "1"})  # the follower answers reads from its own state
    try:
        leader = c.index_of(c.wait_ready())
        full = next(i for i in range(3) if i != leader)
        with httpx.Client(timeout=10) as client:
            assert _put(client, c, leader, "before").json()["code"] == 0
            assert c.wait_applied(full, _status(client, c, leader)["commitIndex"], 30)
            _fill(mounts[full], 4 << 20)  # below the 8 MiB reserve
            keys = [f"k{n}" for n in range(80)]
            for key in keys:  # the leader and the other follower are a quorum; 5 MiB would not fit there
                r = client.put(c.url(leader, f"/api/v1/kv/t/{key}"), json={"value": _big(key)})
                assert r.json()["code"] == 0, r.text
            commit = _status(client, c, leader)["commitIndex"]
            assert c.procs[full].poll() is None, c.tail(full)  # paused, not stopped
            st = _status(client, c, full)
            assert st["appliedIndex"] < commit and st["leaderId"] == c.rafts[leader]  # behind, no election
            r = client.get(c.url(full, "/api/v1/kv/t/before"))
            assert r.status_code == 200 and r.json()["body"]["value"] == "before"  # reads go on
            with open(c.log_path(full)) as f:
                assert "not taking entries from leader" in f.read()
            for f in os.listdir(mounts[full]):  # space comes back: it catches up without a restart
                if f.startswith("filler"):
                    os.unlink(os.path.join(mounts[full], f))
            assert c.wait_applied(full, commit, 30), c.tail(full)
            for key in keys:
                assert client.get(c.url(full, f"/api/v1/kv/t/{key}")).json()["body"]["value"] == _big(key)
            assert c.procs[full].poll() is None
            with open(c.log_path(full)) as f:
                assert "disk space is back" in f.read()
    finally:
        c.stop_all()
