"""Snapshots in the running Node: triggers, log truncation, loading at start with fallback, refusing to
start, crashes at each step of a save, and InstallSnapshot to a wiped follower (in one event loop, an in-process
group: in-memory log, meta store and transport, whose hub carries the InstallSnapshot frames; the snapshot
stores on disk under tmp_path, as the crash and corruption tests need). The ports are only addresses."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from raft.node import Node
from raft.node.snapshots import StoreNotRebuildableError
from raft.options import NodeOptions, SnapshotOptions
from raft.testing.group import InProcessGroup
from raft.testing.kvnode import KvStateMachine
from snapshot.storage import CRASH_POINTS, FileSnapshotStorage, SimulatedCrash
from tests.raft.helpers import FAST, put, run


def snap_opts(**kw: Any) -> SnapshotOptions:
    base: dict[str, Any] = {"threshold_entries": 0, "interval_s": 0, "log_margin": 5}
    return SnapshotOptions(**{**base, **kw})


GROUPS: dict[Path, InProcessGroup] = {}


def group(root: Path) -> InProcessGroup:
    """The in-process group under `root`, kept as the disk would be: making a node again restarts it."""
    return GROUPS.setdefault(root, InProcessGroup())


def free_ports(n: int) -> list[int]:
    """Port numbers for the members' addresses: nothing listens on them in an in-process group."""
    return list(range(20001, 20001 + n))


def make(root: Path, ids: list[str], ports: dict[str, int], snap: SnapshotOptions) -> dict[str, Node]:
    peers = {i: ("127.0.0.1", ports[i]) for i in ports}
    g = group(root)
    return {
        i: g.node(NodeOptions(i, str(root / i), peers, b"s", raft=FAST, snapshot=snap), KvStateMachine()) for i in ids
    }


def single(root: Path, port: int, snap: SnapshotOptions) -> Node:
    return make(root, ["n1"], {"n1": port}, snap)["n1"]


async def fill(node: Node, lo: int, hi: int) -> int:
    last = 0
    for k in range(lo, hi, 50):
        idx = await asyncio.gather(*(node.apply(put(f"k{i}", i)) for i in range(k, min(hi, k + 50))))
        last = max(idx)
    return last


def kv(node: Node) -> dict[str, Any]:
    fsm = node.fsm
    assert isinstance(fsm, KvStateMachine)
    return fsm.data


def test_threshold_trigger_truncates_log_and_restart_loads_snapshot(tmp_path: Path) -> None:
    port = free_ports(1)[0]

    async def main() -> None:
        n = single(tmp_path, port, snap_opts(threshold_entries=100, max_reserved=2))
        await n.start()
        await n.wait_for_leader(10)
        for k in range(4):  # one save per 100 entries (the next save waits for the running one)
            await fill(n, k * 100, k * 100 + 100)
            await n._wait_for(lambda: not n._snapshots().manager.saving)
        await fill(n, 400, 450)
        st = n.status()
        assert st.snapshot.saves == 4
        snaps = [m.last_included_index for m in n.snapshots()]
        assert len(snaps) == 2 and snaps[0] > snaps[1]  # retention keeps 2
        # The log reaches back to the previous snapshot (fallback), but no further.
        await n._wait_for(lambda: n.driver.log is not None and n.driver.log.first_index() == snaps[1] + 1)
        before = dict(kv(n))
        await n.stop()

        m = single(tmp_path, port, snap_opts(threshold_entries=100, max_reserved=2))
        await m.start()
        assert m.status().snapshot.index == snaps[0]
        assert m.applied_index >= snaps[0]
        await m.wait_for_leader(10)
        await m.wait_applied(st.commit, 10)
        assert kv(m) == before and len(before) == 450
        await m.stop()

    run(main, 90)


def test_on_demand_snapshot_and_nothing_new_returns_none(tmp_path: Path) -> None:
    port = free_ports(1)[0]

    async def main() -> None:
        n = single(tmp_path, port, snap_opts())
        await n.start()
        await n.wait_for_leader(10)
        last = await fill(n, 0, 30)
        meta = await n.snapshot()
        assert meta is not None and meta.last_included_index == n.applied_index >= last
        assert meta.voters == ("n1",) and {f.name for f in meta.files} == {"data"}
        assert await n.snapshot() is None  # nothing applied since
        await n.stop()

    run(main, 90)


def corrupt_data(root: Path, index: int) -> None:
    data = root / "n1" / "snapshot" / f"snapshot_{index:020d}" / "data"
    raw = bytearray(data.read_bytes())
    raw[-3] ^= 0xFF
    data.write_bytes(bytes(raw))


def test_corrupt_newest_snapshot_falls_back_to_previous_and_replays(tmp_path: Path) -> None:
    port = free_ports(1)[0]

    async def main() -> None:
        n = single(tmp_path, port, snap_opts())
        await n.start()
        await n.wait_for_leader(10)
        await fill(n, 0, 100)
        older = await n.snapshot()
        await fill(n, 100, 200)
        newest = await n.snapshot()
        await fill(n, 200, 230)
        assert older and newest
        await n._wait_for(
            lambda: n.driver.log is not None and n.driver.log.first_index() == older.last_included_index + 1
        )
        before, commit = dict(kv(n)), n.status().commit
        await n.stop()

        corrupt_data(tmp_path, newest.last_included_index)
        m = single(tmp_path, port, snap_opts())
        await m.start()
        assert m.status().snapshot.index == older.last_included_index
        quarantined = list((tmp_path / "n1" / "snapshot").glob("snapshot_*.corrupt-1"))
        assert [p.name.split(".")[0] for p in quarantined] == [f"snapshot_{newest.last_included_index:020d}"]
        await m.wait_for_leader(10)
        await m.wait_applied(commit, 10)
        assert kv(m) == before
        await m.stop()

    run(main, 90)


def test_refuses_to_start_when_no_snapshot_loads_and_log_was_truncated(tmp_path: Path) -> None:
    port = free_ports(1)[0]

    async def main() -> None:
        n = single(tmp_path, port, snap_opts())
        await n.start()
        await n.wait_for_leader(10)
        metas = []
        for k in range(3):
            await fill(n, k * 50, k * 50 + 50)
            metas.append(await n.snapshot())
        assert metas[1] is not None
        first = metas[1].last_included_index + 1  # the log reaches back to the previous snapshot
        await n._wait_for(lambda: n.driver.log is not None and n.driver.log.first_index() == first)
        await n.stop()
        for meta in n.snapshots():
            corrupt_data(tmp_path, meta.last_included_index)
        m = single(tmp_path, port, snap_opts())
        with pytest.raises(
            StoreNotRebuildableError, match=rf"no snapshot loads and the log starts at index {first}.*quarantined"
        ):
            await m.start()
        await m.stop()

    run(main, 90)


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_crash_at_each_save_step_keeps_a_loadable_snapshot_and_every_entry(tmp_path: Path, point: str) -> None:
    port = free_ports(1)[0]

    async def main() -> None:
        n = single(tmp_path, port, snap_opts())
        await n.start()
        await n.wait_for_leader(10)
        await fill(n, 0, 60)
        first = await n.snapshot()
        await fill(n, 60, 120)
        storage = n._snapshots().storage
        assert isinstance(storage, FileSnapshotStorage)
        storage._fail_at = point
        try:
            await n.snapshot()
        except SimulatedCrash:
            pass
        committed, before = n.status().commit, dict(kv(n))
        await n.stop()  # the save thread died at `point`: the disk is as a crash there leaves it

        m = single(tmp_path, port, snap_opts())
        await m.start()
        assert m.status().snapshot.index >= first.last_included_index if first else False
        await m.wait_for_leader(10)
        await m.wait_applied(committed, 10)
        assert kv(m) == before and len(before) == 120
        assert not (tmp_path / "n1" / "snapshot" / "temp").exists() or not os.listdir(
            tmp_path / "n1" / "snapshot" / "temp"
        )
        await m.stop()

    run(main, 90)


def test_install_snapshot_to_wiped_follower(tmp_path: Path) -> None:
    ids = ["n1", "n2", "n3"]
    ports = dict(zip(ids, free_ports(3), strict=True))
    opts = snap_opts(threshold_entries=200, chunk_bytes=4096, window=3)

    async def main() -> None:
        nodes = make(tmp_path, ids, ports, opts)
        for n in nodes.values():
            await n.start()
        try:
            leaders = await asyncio.gather(*(n.wait_for_leader(10) for n in nodes.values()))
            ld = nodes[leaders[0]]
            victim = next(i for i in ids if i != ld.id)
            await nodes[victim].stop()
            shutil.rmtree(tmp_path / victim)  # the follower loses everything
            group(tmp_path).wipe(victim)
            await fill(ld, 0, 1000)
            await ld._wait_for(lambda: ld.status().first_index > 1)
            nodes[victim] = make(tmp_path, [victim], ports, opts)[victim]
            await nodes[victim].start()
            commit = ld.status().commit
            await nodes[victim].wait_applied(commit, 30)
            st = nodes[victim].status()
            assert (
                st.snapshot.installs == 1 and st.snapshot.download is not None and st.snapshot.download.completed == 1
            )
            assert kv(nodes[victim]) == kv(ld) and len(kv(ld)) == 1000
            # The follower's log now starts right after the installed snapshot.
            assert st.first_index == st.snapshot.index + 1
            # It keeps replicating normally afterwards.
            idx = await ld.apply(put("after", 1))
            await nodes[victim].wait_applied(idx, 10)
            assert kv(nodes[victim])["after"] == 1
            # The transfer ended and released its pin on the leader's snapshot.
            await asyncio.wait_for(ld._wait_for(lambda: ld.status().snapshot.sending == {}), 5)
            storage = ld._snapshots().storage
            assert all(storage.refcount(i) == 0 for i in storage.list())
        finally:
            for n in nodes.values():
                await n.stop()

    run(main, 90)


def test_a_new_member_installed_from_a_snapshot_learns_the_addresses_it_carries(tmp_path: Path) -> None:
    """Issue 12, bug 5: the addresses of the configuration travel with a snapshot (the SNAP message's meta and
    the meta file). n5, configured with n1-n3 only, installs a snapshot taken after n4 joined: the
    configuration it installs names n4's address, and so does its own copy of the snapshot."""
    ids = ["n1", "n2", "n3", "n4", "n5"]
    ports = dict(zip(ids, free_ports(5), strict=True))
    addr = {i: ("127.0.0.1", ports[i]) for i in ids}
    boot = ("n1", "n2", "n3")
    opts = snap_opts(threshold_entries=200, chunk_bytes=4096, window=3)

    def node(i: str, known: tuple[str, ...]) -> Node:
        peers = {p: addr[p] for p in known}
        return group(tmp_path).node(
            NodeOptions(i, str(tmp_path / i), peers, b"s", voters=boot, raft=FAST, snapshot=opts), KvStateMachine()
        )

    async def main() -> None:
        nodes = {i: node(i, boot) for i in boot}
        nodes["n4"] = node("n4", (*boot, "n4"))
        nodes["n5"] = node("n5", (*boot, "n5"))
        for n in nodes.values():
            await n.start()
        try:
            leaders = await asyncio.gather(*(nodes[i].wait_for_leader(10) for i in boot))
            ld = nodes[leaders[0]]
            await ld.add_peer("n4", addr["n4"], http_address="127.0.0.1:14", remoting_address="127.0.0.1:24")
            await fill(ld, 0, 600)
            await ld._wait_for(lambda: ld.status().first_index > 1)
            await ld.add_peer("n5", addr["n5"])
            n5 = nodes["n5"]
            await n5.wait_applied(ld.status().commit, 30)
            assert n5.status().snapshot.installs == 1
            n4 = ("n4", f"127.0.0.1:{ports['n4']}", "127.0.0.1:14", "127.0.0.1:24")
            assert n5.core is not None and n5.core.snapshot.conf.address("n4") == n4
            (meta,) = [m for m in n5.snapshots() if m.last_included_index == n5.core.snapshot.index]
            assert n4 in meta.addresses and n5.remoting_address("n4") == "127.0.0.1:24"
        finally:
            for n in nodes.values():
                await n.stop()

    run(main, 90)
