"""python -m tools.bench snapshot [--sizes 10,100] [--entries 1000000] [--json FILE] [--quick]

Snapshot benchmarks on the real code paths, fsync on, with the test state machine
(raft.testing.kvnode.KvStateMachine: a dict of key -> ~1 KiB text values that lz4 compresses to about
half). Sizes are the raw state in MiB; MB/s is 10^6 raw (msgpack) bytes per second.

1. save and load of the snapshot subsystem (FileSnapshotStorage: create, fill, finish, commit; open with
   CRC verification, then decode into a fresh state machine), page cache warm and dropped;
2. the apply stall of a save (SnapshotManager.save hand-over, p99 over several saves) and the gaps
   between apply batches on the calling thread while the save runs on its own thread, versus idle;
3. restart of a one-node Node: full log replay of --entries puts versus the same log plus a snapshot
   (each in a fresh process);
4. InstallSnapshot to a wiped follower over loopback: 3 in-process Nodes on one event loop, then 3
   kvnode processes.

Targets (from the issue) are shown next to each value; a miss is reported, never an error."""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack

from raft.core.messages import Entry
from raft.node import Node
from raft.options import NodeOptions, RaftOptions, SnapshotOptions
from raft.testing.cluster import ProcessCluster, free_ports
from raft.testing.kvnode import KV_SECTION, KvStateMachine
from snapshot.manager import SnapshotManager
from snapshot.rw import SnapshotReader
from snapshot.storage import DATA_FILE, FileSnapshotStorage

MiB = 1 << 20
MB = 1_000_000
ITEM_VALUE_BYTES = 1008  # + a 12-char key and msgpack headers: ~1 KiB per item
INSTALL_VALUE_BYTES = 32 * 1024  # kvnode reads JSON lines of at most 64 KiB (asyncio stream limit)
RESTART_VALUE_BYTES = 64
APPLY_BATCH = 16  # entries per on_apply call in the stall experiment
REPO = Path(__file__).resolve().parents[2]

# metric -> (comparison, threshold, sizes it applies to (None = every size)); from the issue.
TARGETS: dict[str, tuple[str, float, tuple[float, ...] | None]] = {
    "save_ms": ("<=", 100.0, (10,)),
    "load_mb_s": (">=", 300.0, None),
    "stall_p99_ms": ("<=", 5.0, (10,)),
    "restart_speedup": (">=", 20.0, None),
    "restart_speedup_net": (">=", 20.0, None),
    "install_mib_s": (">=", 100.0, None),
    "install_mib_s_processes": (">=", 100.0, None),
}


# --- data -------------------------------------------------------------------------------------------------


def text_value(rng: random.Random, n: int) -> str:
    """`n` characters of controller-like metadata (JSON records with random ids and numbers): lz4
    finds the repeated field names but not the random parts, so it compresses to about half."""
    parts: list[str] = []
    size = 0
    while size < n:
        a = rng.getrandbits(32)
        p = (
            f'{{"broker":"broker-{a & 63}","addr":"10.{(a >> 6) & 255}.{(a >> 14) & 255}.{(a >> 22) & 255}:10911",'
            f'"topic":"Topic-{rng.randrange(5000):05d}","queue":{a >> 28},"offset":{rng.getrandbits(40)},'
            f'"id":"{rng.randbytes(16).hex()}"}}'
        )
        parts.append(p)
        size += len(p)
    return "".join(parts)[:n]


def build_state(size_bytes: int, seed: int = 1) -> KvStateMachine:
    rng = random.Random(seed)
    fsm = KvStateMachine()
    for i in range(max(1, size_bytes // 1024)):
        fsm.data[f"key-{i:08d}"] = text_value(rng, ITEM_VALUE_BYTES)
    fsm.applied = len(fsm.data)
    return fsm


def put(key: str, value: Any) -> bytes:
    return msgpack.packb([key, value])


def pct(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(p * len(s)))]


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def drop_cache(path: Path) -> None:
    """Evict a (fsynced, so clean) file from the page cache; no root needed."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


# --- 1. save and load -------------------------------------------------------------------------------------


def bench_save_load(fsm: KvStateMachine, root: Path, reps: int) -> dict[str, Any]:
    storage = FileSnapshotStorage(root / "save-load", max_reserved=3, known_types={KV_SECTION: "kv"})
    runs: list[dict[str, float]] = []
    raw = disk = 0
    for rep in range(reps):
        index = rep + 1
        gc.collect()
        t0 = time.perf_counter()
        pending = storage.create(index, 1, ("n1",), (), created_at=time.time())
        w = pending.writer()
        fsm.on_snapshot_save(w)
        t1 = time.perf_counter()
        written = w.finish()
        t2 = time.perf_counter()
        pending.commit()
        t3 = time.perf_counter()
        raw = sum(s.raw_length for s in written.sections)
        disk = dir_bytes(storage.path(index))
        loads = {}
        for cache in ("cold", "warm"):
            if cache == "cold":
                drop_cache(storage.path(index) / DATA_FILE)
            fresh = KvStateMachine()
            gc.collect()
            t4 = time.perf_counter()
            snap = storage.open(index)  # meta, layout and every file's CRC32C
            t5 = time.perf_counter()
            fresh.on_snapshot_load(snap)  # section CRC, lz4, msgpack, dict
            t6 = time.perf_counter()
            snap.close()
            if fresh.data != fsm.data:
                raise RuntimeError("the loaded state differs from the saved one")
            loads[cache] = (t5 - t4, t6 - t5)
            del fresh
        runs.append(
            {
                "fill_s": t1 - t0,
                "finish_s": t2 - t1,
                "commit_s": t3 - t2,
                "save_s": t3 - t0,
                "open_s": loads["warm"][0],
                "decode_s": loads["warm"][1],
                "load_s": sum(loads["warm"]),
                "load_cold_s": sum(loads["cold"]),
            }
        )
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    return {
        "items": len(fsm.data),
        "raw_bytes": raw,
        "disk_bytes": disk,
        "compression": disk / raw,
        "reps": reps,
        "median": med,
        "save_ms": med["save_s"] * 1000,
        "save_mb_s": raw / med["save_s"] / MB,
        "load_ms": med["load_s"] * 1000,
        "load_mb_s": raw / med["load_s"] / MB,
        "load_cold_mb_s": raw / med["load_cold_s"] / MB,
        "runs": runs,
    }


# --- 2. stall and apply gaps --------------------------------------------------------------------------------


def apply_loop(fsm: KvStateMachine, batches: list[list[Entry]], stop: Callable[[], bool], t_last: float) -> list[float]:
    """Apply batches back to back until stop(); the gaps between the ends of consecutive batches (the
    first one measured from t_last)."""
    gaps: list[float] = []
    i = 0
    n = len(batches)
    while not stop():
        fsm.on_apply(batches[i % n])
        i += 1
        now = time.perf_counter()
        gaps.append(now - t_last)
        t_last = now
    return gaps


def bench_stall(fsm: KvStateMachine, root: Path, saves: int) -> dict[str, Any]:
    storage = FileSnapshotStorage(root / "stall", max_reserved=3, known_types={KV_SECTION: "kv"})
    mgr = SnapshotManager(storage, None, name="bench-save")  # saves only on demand
    rng = random.Random(2)
    keys = list(fsm.data)
    index = fsm.applied
    batches = []
    for _ in range(256):  # overwrites of existing keys with fresh ~1 KiB values
        batch = []
        for _ in range(APPLY_BATCH):
            index += 1
            batch.append(Entry(1, index, 0, put(rng.choice(keys), text_value(rng, ITEM_VALUE_BYTES))))
        batches.append(batch)
    during: list[float] = []
    idle: list[float] = []
    stalls: list[float] = []
    save_s: list[float] = []
    try:
        for s in range(saves):
            gc.collect()
            t0 = time.perf_counter()
            snap_index = 1_000_000_000 + s  # unique; the entries' indexes repeat as the batches cycle
            fut = mgr.save(
                snap_index, 1, ("n1",), (), fsm.on_snapshot_save, now=time.monotonic(), created_at=time.time()
            )
            during += apply_loop(fsm, batches, fut.done, t0)
            fut.result()
            stalls.append(mgr.stats.last_stall_s)
            save_s.append(mgr.stats.last_duration_s)
            # The same loop for as long, with no save running.
            t1 = time.perf_counter()
            # apply_loop calls the predicate before this iteration ends, so it sees this iteration's t1
            idle += apply_loop(fsm, batches, lambda: time.perf_counter() - t1 >= save_s[-1], t1)  # noqa: B023
    finally:
        mgr.close()

    def summary(gaps: list[float]) -> dict[str, float]:
        total = sum(gaps)
        return {
            "batches": len(gaps),
            "p50_ms": pct(gaps, 0.50) * 1000,
            "p99_ms": pct(gaps, 0.99) * 1000,
            "max_ms": max(gaps, default=0.0) * 1000,
            "entries_per_s": len(gaps) * APPLY_BATCH / total if total else 0.0,
        }

    d, i = summary(during), summary(idle)
    return {
        "saves": saves,
        "stall_p50_ms": pct(stalls, 0.50) * 1000,
        "stall_p99_ms": pct(stalls, 0.99) * 1000,
        "stall_max_ms": max(stalls) * 1000,
        "save_under_load_ms": statistics.median(save_s) * 1000,
        "apply_batch_entries": APPLY_BATCH,
        "gaps_idle": i,
        "gaps_during_save": d,
        "apply_rate_during_save_pct": 100 * d["entries_per_s"] / i["entries_per_s"] if i["entries_per_s"] else 0.0,
        "stalls_ms": [x * 1000 for x in stalls],
    }


# --- 3. restart: snapshot versus full replay ----------------------------------------------------------------


def node_options(
    node_id: str, data_dir: Path, peers: dict[str, tuple[str, int]], election_ms: int, log_margin: int
) -> NodeOptions:
    return NodeOptions(
        node_id=node_id,
        data_dir=str(data_dir),
        peers=peers,
        secret=b"x",
        raft=RaftOptions(election_timeout_ms=election_ms),
        # threshold_log_bytes=0 too: its default (64 MiB) would snapshot on its own while we build the log.
        snapshot=SnapshotOptions(threshold_entries=0, threshold_log_bytes=0, interval_s=0, log_margin=log_margin),
    )


def restart_values(n: int = 4096) -> list[str]:
    rng = random.Random(3)
    return [rng.randbytes(RESTART_VALUE_BYTES // 2).hex() for _ in range(n)]


async def build_log(
    data_dir: Path, entries: int, keys: int, election_ms: int, concurrency: int = 1000
) -> dict[str, Any]:
    """`entries` puts over `keys` keys (put i writes key i % keys), `concurrency` proposals at a time."""
    port = free_ports(1)[0]
    node = Node(node_options("n1", data_dir, {"n1": ("127.0.0.1", port)}, election_ms, 1000), KvStateMachine())
    values = restart_values()
    await node.start()
    try:
        await node.wait_for_leader(30)
        t0 = time.perf_counter()
        last = 0
        for lo in range(0, entries, concurrency):
            futs = [
                node.apply(put(f"k{i % keys:08d}", values[i % len(values)]))
                for i in range(lo, min(entries, lo + concurrency))
            ]
            await asyncio.gather(*futs)
        last = node.applied_index
        elapsed = time.perf_counter() - t0
    finally:
        await node.stop()
    return {"last_index": last, "build_s": elapsed, "build_entries_per_s": entries / elapsed}


async def snapshot_twice(node: Node) -> Any:
    """Snapshot, one more put, snapshot again, and wait for the log prefix to go. The node keeps the whole
    log after its first snapshot (to fall back on); the second truncates it up to the first: the steady
    state of a node that has been running for a while."""
    await node.snapshot()
    await node.apply(put("__between__", ""))
    meta = await node.snapshot()
    assert meta is not None
    for _ in range(1000):  # the prefix truncation runs on the log writer thread after the commit
        if node.status().first_index > 1:
            break
        await asyncio.sleep(0.01)
    else:
        raise RuntimeError(f"the log prefix was not truncated after two snapshots: {node.status()}")
    return meta


async def add_snapshot(data_dir: Path, election_ms: int, last: int) -> dict[str, Any]:
    """Restart on `data_dir` (a full replay), take two snapshots (so the log prefix is truncated), stop."""
    port = free_ports(1)[0]
    node = Node(node_options("n1", data_dir, {"n1": ("127.0.0.1", port)}, election_ms, 1000), KvStateMachine())
    t0 = time.perf_counter()
    await node.start()
    try:
        await node.wait_for_leader(600)
        await node.wait_applied(last, 600)
        replay_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        meta = await snapshot_twice(node)
        snap_s = time.perf_counter() - t1
        st = node.status()
    finally:
        await node.stop()
    return {
        "in_process_replay_s": replay_s,
        "two_snapshots_s": snap_s,
        "snapshot_index": meta.last_included_index,
        "snapshot_bytes": sum(f.size for f in meta.files),
        "first_index": st.first_index,
        "last_index": st.last_index,
        "applied": st.applied,
    }


class _TimedKv(KvStateMachine):
    """Records when applying starts and how long it and a snapshot load take, and when leadership starts."""

    def __init__(self) -> None:
        super().__init__()
        self.apply_s = 0.0
        self.load_s = 0.0
        self.first_apply_at: float | None = None
        self.leader_at: float | None = None

    def on_leader_start(self, term: int) -> None:
        if self.leader_at is None:
            self.leader_at = time.perf_counter()

    def on_apply(self, entries: list[Entry]) -> list[Any]:
        t0 = time.perf_counter()
        if self.first_apply_at is None:
            self.first_apply_at = t0
        try:
            return super().on_apply(entries)
        finally:
            self.apply_s += time.perf_counter() - t0

    def on_snapshot_load(self, reader: SnapshotReader) -> None:
        t0 = time.perf_counter()
        super().on_snapshot_load(reader)
        self.load_s += time.perf_counter() - t0


async def _restart(data_dir: Path, election_ms: int, last: int) -> dict[str, Any]:
    port = free_ports(1)[0]
    fsm = _TimedKv()
    node = Node(node_options("n1", data_dir, {"n1": ("127.0.0.1", port)}, election_ms, 1000), fsm)
    t0 = time.perf_counter()
    await node.start()
    t1 = time.perf_counter()
    try:
        await node.wait_for_leader(600)
        await node.wait_applied(last, 600)
        t2 = time.perf_counter()
        st = node.status()
    finally:
        await node.stop()
    total, start = t2 - t0, t1 - t0
    # Committed entries are applied only once this node leads again (the commit index is not persisted)
    # and its noop commits. Until then it waits for the (randomized) election timeout: the same random
    # constant for both kinds of restart, measured here per run up to the first apply (replay) or, with
    # nothing to apply, up to the leadership callback (which follows the noop).
    ready_at = fsm.first_apply_at or fsm.leader_at or t2
    election = ready_at - t1
    return {
        "total_s": total,
        "start_s": start,  # open (recover) the log, load the snapshot, read the log after it
        "election_s": election,  # the election timeout, the vote and the noop written
        "after_s": total - start - election,  # applying: the state machine's part and the node's
        "snapshot_load_s": fsm.load_s,
        "apply_s": fsm.apply_s,  # the state machine's on_apply only
        "keys": len(fsm.data),
        "snapshot_index": st.snapshot.index,
        "log_first_index": st.first_index,
    }


def _restart_child(argv: list[str]) -> None:
    """Entry point of the restart subprocess: prints one JSON line."""
    data_dir, election_ms, last = Path(argv[0]), int(argv[1]), int(argv[2])
    print(json.dumps(asyncio.run(_restart(data_dir, election_ms, last))), flush=True)


def restart_in_child(data_dir: Path, election_ms: int, last: int) -> dict[str, Any]:
    code = "import sys; from tools.bench.snapshot_bench import _restart_child; _restart_child(sys.argv[1:])"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-c", code, str(data_dir), str(election_ms), str(last)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"restart subprocess failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _copy_sparse(src: str, dst: str) -> None:
    """A copy that keeps the hole of a preallocated WAL segment, so that both data dirs are as a node leaves
    them (shutil's copy writes the zeros out: recovery then reads them, docs/log-format.md)."""
    subprocess.run(["cp", "--sparse=always", "--preserve=mode,timestamps", src, dst], check=True)


def bench_restart(root: Path, entries: int, keys: int, election_ms: int, snapshot_reps: int) -> dict[str, Any]:
    log_dir, snap_dir = root / f"restart-log-{keys}", root / f"restart-snapshot-{keys}"
    build = asyncio.run(build_log(log_dir, entries, keys, election_ms))
    last = build["last_index"]
    shutil.copytree(log_dir, snap_dir, copy_function=_copy_sparse)
    snap = asyncio.run(add_snapshot(snap_dir, election_ms, last))
    gc.collect()
    replay = restart_in_child(log_dir, election_ms, last)
    from_snap = [restart_in_child(snap_dir, election_ms, snap["applied"]) for _ in range(snapshot_reps)]
    for r, want in ((replay, keys), *((r, keys + 1) for r in from_snap)):  # + the put between the snapshots
        if r["keys"] != want:
            raise RuntimeError(f"restart rebuilt {r['keys']} keys, expected {want}")
    s = sorted(from_snap, key=lambda r: r["total_s"])[len(from_snap) // 2]  # the median run
    out = {
        "entries": entries,
        "keys": keys,
        "value_bytes": RESTART_VALUE_BYTES,
        "election_timeout_ms": election_ms,
        "build": build,
        "snapshot": snap,
        "replay": replay,
        "from_snapshot": s,
        "from_snapshot_runs": from_snap,
        "speedup": replay["total_s"] / s["total_s"],
        "speedup_net": (replay["total_s"] - replay["election_s"]) / (s["total_s"] - s["election_s"]),
    }
    shutil.rmtree(log_dir, ignore_errors=True)
    shutil.rmtree(snap_dir, ignore_errors=True)
    return out


# --- 4. InstallSnapshot ---------------------------------------------------------------------------------------


def install_values(size_bytes: int, seed: int = 4) -> list[str]:
    rng = random.Random(seed)
    return [text_value(rng, INSTALL_VALUE_BYTES) for _ in range(max(1, size_bytes // INSTALL_VALUE_BYTES))]


INSTALL_ELECTION_MS = 500


async def _install_in_process(root: Path, values: list[str]) -> dict[str, Any]:
    ids = ["n1", "n2", "n3"]
    ports = dict(zip(ids, free_ports(3), strict=True))
    peers = {i: ("127.0.0.1", p) for i, p in ports.items()}

    def make(i: str) -> Node:
        return Node(node_options(i, root / i, peers, INSTALL_ELECTION_MS, 0), KvStateMachine())

    nodes = {i: make(i) for i in ids}
    for n in nodes.values():
        await n.start()
    try:
        leaders = await asyncio.gather(*(n.wait_for_leader(30) for n in nodes.values()))
        ld = nodes[leaders[0]]
        for lo in range(0, len(values), 16):
            await asyncio.gather(*(ld.apply(put(f"v{i:06d}", values[i])) for i in range(lo, min(len(values), lo + 16))))
        meta = await snapshot_twice(ld)
        victim = next(i for i in ids if i != ld.id)
        await nodes[victim].stop()
        shutil.rmtree(root / victim)
        await ld.apply(put("after", "x"))
        commit = ld.status().commit
        node = nodes[victim] = make(victim)
        t0 = time.perf_counter()
        await node.start()
        t_dl = t_done = None
        while True:
            st = node.status()
            now = time.perf_counter()
            if t_dl is None and st.snapshot.downloading is not None:
                t_dl = now
            if st.snapshot.installs >= 1 and st.applied >= commit:
                t_done = now
                break
            if now - t0 > 120:
                raise TimeoutError(f"no InstallSnapshot within 120 s: {st.snapshot}")
            await asyncio.sleep(0.002)
        if len(node.fsm.data) != len(values) + 2:  # type: ignore[attr-defined]
            raise RuntimeError("the installed state differs from the leader's")
        return {
            "snapshot_bytes": sum(f.size for f in meta.files),
            "received_bytes": st.snapshot.download.received if st.snapshot.download else 0,
            "total_s": t_done - t0,
            "download_s": t_done - (t_dl or t0),
        }
    finally:
        for n in nodes.values():
            await n.stop()


class _Conn:
    """One persistent JSON-lines connection to a kvnode client port."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.file = self.sock.makefile("rb")

    def call(self, req: dict[str, Any]) -> dict[str, Any]:
        self.sock.sendall(json.dumps(req).encode() + b"\n")
        resp = json.loads(self.file.readline())
        if not resp.get("ok"):
            raise RuntimeError(f"{req['op']} failed: {resp}")
        return resp

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def _install_processes(root: Path, values: list[str]) -> dict[str, Any]:
    # --log-margin 0: no log kept below the previous snapshot, so a wiped follower needs a snapshot.
    cluster = ProcessCluster(str(root), n=3, election_ms=INSTALL_ELECTION_MS, extra_args=("--log-margin", "0"))
    try:
        cluster.start_all()
        leader = cluster.wait_leader(timeout=30)
        port = cluster.client_ports[leader]
        conns = [_Conn(port) for _ in range(8)]
        try:
            errors: list[BaseException] = []

            def worker(k: int) -> None:
                try:
                    for i in range(k, len(values), len(conns)):
                        conns[k].call({"op": "put", "k": f"v{i:06d}", "v": values[i]})
                except BaseException as e:  # noqa: BLE001 - re-raised on the main thread
                    errors.append(e)

            threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(conns))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                raise errors[0]
            conns[0].call({"op": "snapshot"})  # twice, as in snapshot_twice()
            conns[0].call({"op": "put", "k": "__between__", "v": ""})
            snap_index = conns[0].call({"op": "snapshot"})["index"]
            for _ in range(1000):
                if conns[0].call({"op": "status"})["status"]["first_index"] > 1:
                    break
                time.sleep(0.01)
            else:
                raise RuntimeError("the leader's log prefix was not truncated after two snapshots")
            victim = next(i for i in cluster.ids if i != leader)
            cluster.kill(victim)
            shutil.rmtree(os.path.join(cluster.root, victim))
            commit = conns[0].call({"op": "put", "k": "after", "v": "x"})["index"]
        finally:
            for c in conns:
                c.close()
        cluster.start(victim)  # returns once the node has started (READY)
        t0 = time.perf_counter()
        conn = _Conn(cluster.client_ports[victim])
        try:
            t_dl = None
            while True:
                resp = conn.call({"op": "status"})
                st, now = resp["status"], time.perf_counter()
                if t_dl is None and st["snapshot"]["downloading"] is not None:
                    t_dl = now
                if st["snapshot"]["installs"] >= 1 and st["applied"] >= commit:
                    break
                if now - t0 > 120:
                    raise TimeoutError(f"no InstallSnapshot within 120 s: {st['snapshot']}")
                time.sleep(0.002)
        finally:
            conn.close()
        if resp["keys"] != len(values) + 2:
            raise RuntimeError("the installed state differs from the leader's")
        return {
            "snapshot_index": snap_index,
            "received_bytes": st["snapshot"]["download"]["received"],
            "total_s": now - t0,
            "download_s": now - (t_dl or t0),
        }
    finally:
        cluster.stop_all()


def bench_install(root: Path, size_bytes: int, processes: bool) -> dict[str, Any]:
    values = install_values(size_bytes)
    out: dict[str, Any] = {"entries": len(values), "value_bytes": INSTALL_VALUE_BYTES}
    inproc = asyncio.run(_install_in_process(root / "install-inproc", values))
    inproc["mib_s"] = inproc["received_bytes"] / inproc["total_s"] / MiB
    inproc["download_mib_s"] = inproc["received_bytes"] / inproc["download_s"] / MiB
    out["in_process"] = inproc
    if processes:
        proc = _install_processes(root / "install-proc", values)
        proc["mib_s"] = proc["received_bytes"] / proc["total_s"] / MiB
        proc["download_mib_s"] = proc["received_bytes"] / proc["download_s"] / MiB
        out["processes"] = proc
    return out


# --- report ---------------------------------------------------------------------------------------------------


def row(
    metric: str, label: str, size: float | None, value: float, unit: str, fmt: str = ".1f", case: str | None = None
) -> dict[str, Any]:
    target = TARGETS.get(metric)
    applies = target is not None and (target[2] is None or size in target[2])
    ok = None
    if applies:
        assert target is not None
        ok = value <= target[1] if target[0] == "<=" else value >= target[1]
    return {
        "metric": metric,
        "label": label,
        "size_mib": size,
        "case": case if case is not None else (None if size is None else f"{size:g} MiB"),
        "value": value,
        "unit": unit,
        "text": f"{value:{fmt}}",
        "target": f"{target[0]} {target[1]:g}" if applies and target else None,
        "ok": ok,
    }


def text_row(
    metric: str, label: str, size: float | None, text: str, detail: dict[str, Any], case: str | None = None
) -> dict[str, Any]:
    out = row(metric, label, size, 0.0, "", case=case)
    out.update(value=detail, text=text)
    return out


def gaps_text(g: dict[str, float]) -> str:
    return f"{g['p50_ms']:.3f} / {g['p99_ms']:.3f} / {g['max_ms']:.1f}"


def parts_text(r: dict[str, float]) -> str:
    return f"{r['start_s']:.3f} / {r['election_s']:.3f} / {r['after_s']:.3f}"


def print_table(rows: list[dict[str, Any]], header: str) -> None:
    print(header)
    cols = ("metric", "case", "value", "target", "ok")
    table = [
        (
            r["label"],
            r["case"] or "",
            r["text"],
            r["target"] or "",
            "" if r["ok"] is None else ("yes" if r["ok"] else "MISS"),
        )
        for r in rows
    ]
    widths = [max(len(c), *(len(t[k]) for t in table)) for k, c in enumerate(cols)]
    print("  " + "  ".join(f"{c:<{w}}" for c, w in zip(cols, widths, strict=True)))
    for t in table:
        print(f"  {t[0]:<{widths[0]}}  {t[1]:<{widths[1]}}  {t[2]:>{widths[2]}}  {t[3]:<{widths[3]}}  {t[4]}")


def parse_sizes(text: str) -> list[float]:
    sizes = [float(s) for s in text.split(",") if s.strip()]
    if not sizes or any(s <= 0 for s in sizes):
        raise argparse.ArgumentTypeError(f"sizes must be positive MiB values, got {text!r}")
    return [int(s) if s == int(s) else s for s in sizes]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tools.bench snapshot", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes", type=parse_sizes, default=[10, 100], help="state sizes in MiB (default 10,100)")
    p.add_argument("--entries", type=int, default=1_000_000, help="log entries for the restart comparison")
    p.add_argument("--json", dest="json_path", help="write the results here")
    p.add_argument("--quick", action="store_true", help="fewer repetitions")
    p.add_argument("--no-processes", action="store_true", help="skip InstallSnapshot between real processes")
    args = p.parse_args(argv)
    if args.entries < 1:
        p.error("--entries must be positive")
    t_start = time.perf_counter()
    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    details: dict[str, Any] = {"sizes": {}}
    with tempfile.TemporaryDirectory(prefix="snapshot-bench-", dir=os.environ.get("BENCH_DIR") or None) as tmp:
        root = Path(tmp)
        for size in args.sizes:
            big = size >= 50
            reps = 1 if args.quick else (3 if big else 5)
            saves = (2 if big else 5) if args.quick else (5 if big else 20)
            t0 = time.perf_counter()
            fsm = build_state(int(size * MiB))
            build_s = time.perf_counter() - t0
            sdir = root / f"state-{size:g}"
            sl = bench_save_load(fsm, sdir, reps)
            st = bench_stall(fsm, sdir, saves)
            del fsm
            gc.collect()
            inst = bench_install(sdir, int(size * MiB), processes=not args.no_processes)
            shutil.rmtree(sdir, ignore_errors=True)
            details["sizes"][f"{size:g}"] = {"state_build_s": build_s, "save_load": sl, "stall": st, "install": inst}
            rows += [
                row("save_ms", f"save ms (create+fill+finish+commit, median of {reps})", size, sl["save_ms"], "ms"),
                row("save_mb_s", "save MB/s (raw msgpack bytes)", size, sl["save_mb_s"], "MB/s"),
                row("raw_mib", "raw section MiB", size, sl["raw_bytes"] / MiB, "MiB", ".2f"),
                row("disk_mib", "on-disk MiB (lz4 + meta)", size, sl["disk_bytes"] / MiB, "MiB", ".2f"),
                row("load_ms", "load ms (open+verify CRCs+decode)", size, sl["load_ms"], "ms"),
                row("load_mb_s", "load MB/s, page cache warm", size, sl["load_mb_s"], "MB/s"),
                row("load_cold_mb_s", "load MB/s, page cache dropped", size, sl["load_cold_mb_s"], "MB/s"),
                row(
                    "stall_p99_ms",
                    f"apply stall (hand-over) p99 ms, {saves} saves",
                    size,
                    st["stall_p99_ms"],
                    "ms",
                    ".2f",
                ),
                row("stall_p50_ms", "apply stall (hand-over) p50 ms", size, st["stall_p50_ms"], "ms", ".2f"),
                row("stall_max_ms", "apply stall (hand-over) max ms", size, st["stall_max_ms"], "ms", ".2f"),
                text_row(
                    "gaps_idle",
                    f"apply gap p50/p99/max ms, no save ({APPLY_BATCH}/batch)",
                    size,
                    gaps_text(st["gaps_idle"]),
                    st["gaps_idle"],
                ),
                text_row(
                    "gaps_during_save",
                    "apply gap p50/p99/max ms, during save",
                    size,
                    gaps_text(st["gaps_during_save"]),
                    st["gaps_during_save"],
                ),
                row(
                    "apply_rate_during_save_pct",
                    "apply rate during save, % of idle",
                    size,
                    st["apply_rate_during_save_pct"],
                    "%",
                    ".0f",
                ),
                row("save_under_load_ms", "save ms while applying (median)", size, st["save_under_load_ms"], "ms"),
                row(
                    "install_mib_s",
                    "InstallSnapshot MiB/s, in-process (restart->caught up)",
                    size,
                    inst["in_process"]["mib_s"],
                    "MiB/s",
                ),
                row(
                    "install_download_mib_s",
                    "  from download start to caught up",
                    size,
                    inst["in_process"]["download_mib_s"],
                    "MiB/s",
                ),
            ]
            if "processes" in inst:
                rows += [
                    row(
                        "install_mib_s_processes",
                        "InstallSnapshot MiB/s, 3 processes (restart->caught up)",
                        size,
                        inst["processes"]["mib_s"],
                        "MiB/s",
                    ),
                    row(
                        "install_download_mib_s_processes",
                        "  from download start to caught up",
                        size,
                        inst["processes"]["download_mib_s"],
                        "MiB/s",
                    ),
                ]
        details["restart"] = {}
        # Every key written once (the snapshot holds as many items as the log has entries: its worst
        # case), and each key written 100 times (a controller's tables: far fewer keys than commands).
        for keys in dict.fromkeys((args.entries, max(1, args.entries // 100))):
            rs = bench_restart(root, args.entries, keys, election_ms=100, snapshot_reps=1 if args.quick else 3)
            details["restart"][f"{keys}_keys"] = rs
            case = f"{keys:,} keys"
            rows += [
                row(
                    "restart_replay_s",
                    f"restart, full replay of {args.entries:,} puts, s",
                    None,
                    rs["replay"]["total_s"],
                    "s",
                    ".3f",
                    case=case,
                ),
                text_row(
                    "restart_replay_parts",
                    "  start (open+read log) / election+noop / apply, s",
                    None,
                    parts_text(rs["replay"]),
                    rs["replay"],
                    case=case,
                ),
                row(
                    "restart_snapshot_s",
                    "restart from snapshot, s",
                    None,
                    rs["from_snapshot"]["total_s"],
                    "s",
                    ".3f",
                    case=case,
                ),
                text_row(
                    "restart_snapshot_parts",
                    "  start (open log+load snap) / election+noop / rest, s",
                    None,
                    parts_text(rs["from_snapshot"]),
                    rs["from_snapshot"],
                    case=case,
                ),
                row("restart_speedup", "restart speed-up, raw (x)", None, rs["speedup"], "x", case=case),
                row(
                    "restart_speedup_net",
                    "restart speed-up, election+noop taken off each (x)",
                    None,
                    rs["speedup_net"],
                    "x",
                    case=case,
                ),
            ]
    details["wall_s"] = time.perf_counter() - t_start
    details["loadavg_1m_before_after"] = [load_before[0], os.getloadavg()[0]]
    header = (
        f"snapshot: KvStateMachine, ~1 KiB text values (lz4 to ~50%), fsync on; MB = 10^6 B; {os.cpu_count()} CPUs, "
        f"load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after; wall {details['wall_s']:.0f} s"
    )
    print_table(rows, header)
    report = {
        "workload": vars(args),
        "targets": {k: f"{v[0]} {v[1]:g}" for k, v in TARGETS.items()},
        "rows": rows,
        "details": details,
    }
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(report, f, indent=2)
    return 0
