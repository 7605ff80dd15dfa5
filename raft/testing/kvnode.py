"""A Raft node process with a tiny key/value state machine, for real-process tests and benchmarks.

    python -m raft.testing.kvnode --id n1 --data DIR --peers n1=127.0.0.1:7001,n2=... --client-port 7101

The client port speaks JSON lines: {"op": "put", "k": .., "v": ..}, {"op": "get", "k": ..},
{"op": "status"}, {"op": "leader", "timeout": T}, {"op": "wait_applied", "index": I, "timeout": T},
{"op": "fill", "prefix": P, "n": N, "size": B}, {"op": "snapshot"}, {"op": "isolate"} (drop all raft traffic), and {"op": "bench", "seconds": S, "concurrency": C, "size": B} which drives proposals
from C coroutines inside this (leader) process and reports committed/s and latency percentiles.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import random
import time
from collections.abc import Iterator
from typing import Any

import msgpack

from raft.core.messages import Entry
from raft.node import BaseStateMachine, Node
from raft.options import NodeOptions, RaftOptions, SnapshotOptions
from raft.status import RaftException
from raft.transport import TcpTransport
from snapshot.rw import SnapshotReader, SnapshotWriter, load_managers

KV_SECTION = 1


def _encode_pieces(applied: int, items: list[tuple[str, Any]]) -> Iterator[bytes]:
    """The kv section, msgpack [applied, [[key, value], ...]], in pieces of 1024 items."""
    packer = msgpack.Packer()
    yield packer.pack_array_header(2) + packer.pack(applied) + packer.pack_array_header(len(items))
    for lo in range(0, len(items), 1024):
        yield b"".join(packer.pack(kv) for kv in items[lo : lo + 1024])


class KvStateMachine(BaseStateMachine):
    """Puts of msgpack [key, value]; one snapshot section holding [applied, [[key, value], ...]] in the
    table's insertion order (the same on every replica: it is the log order)."""

    section_names = {KV_SECTION: "kv"}

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.applied = 0

    # SnapshotAbleMetadataManager
    def section_type(self) -> int:
        return KV_SECTION

    def encode_snapshot(self) -> bytes:
        return b"".join(_encode_pieces(self.applied, list(self.data.items())))

    def load_snapshot(self, body: bytes) -> None:
        applied, items = msgpack.unpackb(body)
        self.data = {k: v for k, v in items}
        self.applied = applied

    def on_snapshot_save(self, writer: SnapshotWriter) -> None:
        # Hand over a point-in-time view (values are immutable) and encode it on the writer thread, in
        # pieces: applying stalls only for the copy.
        items, applied = list(self.data.items()), self.applied
        writer.add_section_lazy(KV_SECTION, lambda: _encode_pieces(applied, items))

    def on_snapshot_load(self, reader: SnapshotReader) -> None:
        load_managers(reader, [self])

    def on_apply(self, entries: list[Entry]) -> list[Any]:
        out: list[Any] = []
        data = self.data
        for e in entries:
            if e.data[:1] == b"\x00":  # benchmark payload: counted, not stored
                out.append(e.index)
                continue
            k, v = msgpack.unpackb(e.data)
            data[k] = v
            out.append(e.index)
        self.applied = entries[-1].index
        return out


def parse_peers(text: str) -> dict[str, tuple[str, int]]:
    peers = {}
    for item in text.split(","):
        name, _, addr = item.partition("=")
        host, _, port = addr.rpartition(":")
        peers[name] = (host, int(port))
    return peers


def _error(exc: RaftException, node: Node) -> dict[str, Any]:
    return {"ok": False, "error": exc.code.name, "message": str(exc), "leader": exc.leader or node.leader_id()}


async def bench(node: Node, seconds: float, concurrency: int, size: int) -> dict[str, Any]:
    payload = b"\x00" + os.urandom(size - 1)
    lat: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds
    hard = deadline + 30.0  # a window with no commit at all (an election under load) is extended, not reported
    before = node.writer.stats() if node.writer else None

    async def proposer() -> None:
        nonlocal errors
        while time.perf_counter() < deadline or (not lat and time.perf_counter() < hard):
            t0 = time.perf_counter()
            try:
                await node.apply(payload)
            except RaftException:
                errors += 1
                await asyncio.sleep(0.01)
                continue
            lat.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    await asyncio.gather(*(proposer() for _ in range(concurrency)))
    elapsed = time.perf_counter() - t0
    after = node.writer.stats() if node.writer else None
    lat.sort()

    def pct(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else float("nan")  # no sample: no figure

    out = {
        "committed": len(lat),
        "seconds": elapsed,
        "rate": len(lat) / elapsed,
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "errors": errors,
    }
    if before and after:
        fsyncs = after.fsyncs - before.fsyncs
        batches = after.batches - before.batches
        out["fsyncs_per_s"] = fsyncs / elapsed
        out["mean_batch"] = (after.entries - before.entries) / batches if batches else 0.0
    return out


async def serve(args: argparse.Namespace) -> None:
    peers = parse_peers(args.peers)
    opts = NodeOptions(
        node_id=args.id,
        data_dir=args.data,
        peers=peers,
        secret=args.secret.encode(),
        voters=tuple(args.voters.split(",")) if args.voters else (),
        raft=RaftOptions(
            election_timeout_ms=args.election_ms, lease_read=args.lease_read, unsafe_tick_lease=args.unsafe_tick_lease
        ),
        snapshot=SnapshotOptions(
            threshold_entries=args.snapshot_threshold,
            log_margin=args.log_margin,
            chunk_bytes=args.chunk_bytes,
            throttle_bytes_per_s=args.throttle,
            sync_every_bytes=args.sync_every,
            interval_s=0,
        ),
    )
    fsm = KvStateMachine()
    node = Node(opts, fsm)
    await node.start()

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            try:
                req = json.loads(line)
                resp = await handle(req)
            except RaftException as exc:
                resp = _error(exc, node)
            except (ValueError, KeyError, TypeError) as exc:
                resp = {"ok": False, "error": "EINVAL", "message": str(exc)}
            except TimeoutError:
                resp = {"ok": False, "error": "ETIMEDOUT", "message": "condition not reached in time"}
            writer.write(json.dumps(resp).encode() + b"\n")
            await writer.drain()
        writer.close()

    async def handle(req: dict[str, Any]) -> dict[str, Any]:
        op = req["op"]
        if op == "put":
            index = await node.apply(msgpack.packb([req["k"], req["v"]]))
            return {"ok": True, "index": index}
        if op == "get":
            await node.read_index()
            return {"ok": True, "value": fsm.data.get(req["k"])}
        if op == "leader":  # wait (bounded) until a leader with a committed entry of its term is known
            return {"ok": True, "leader": await node.wait_for_leader(float(req["timeout"]))}
        if op == "wait_applied":
            return {"ok": True, "applied": await node.wait_applied(int(req["index"]), float(req["timeout"]))}
        if op == "fill":  # n puts of `size`-char hex values (half-compressible), keys prefix0.., 256 at a time
            prefix, n, size = req["prefix"], int(req["n"]), int(req["size"])
            last = 0
            for lo in range(0, n, 256):
                futs = [
                    node.apply(msgpack.packb([f"{prefix}{i}", random.Random(i).randbytes(size // 2 + 1).hex()[:size]]))
                    for i in range(lo, min(n, lo + 256))
                ]
                last = max(await asyncio.gather(*futs))
            return {"ok": True, "index": last}
        if op == "wait_download":  # until this node has received `bytes` of snapshot chunks
            want, dl = int(req["bytes"]), node.driver.snapshots.downloader if node.driver.snapshots else None
            assert dl is not None
            await asyncio.wait_for(node._wait_for(lambda: dl.bytes_received >= want), float(req["timeout"]))
            return {"ok": True, "received": dl.bytes_received}
        if op == "snapshot":
            meta = await node.snapshot()
            return {"ok": True, "index": meta.last_included_index if meta else None}
        if op == "isolate":  # fault injection: from now on every raft message in or out is dropped
            transport = node.transport
            assert isinstance(transport, TcpTransport)
            transport._on_messages = lambda msgs: None
            transport.send = lambda msgs: None  # type: ignore[method-assign]
            return {"ok": True}
        if op == "status":
            return {"ok": True, "status": dataclasses.asdict(node.status()), "keys": len(fsm.data)}
        if op == "bench":
            return {"ok": True, **await bench(node, float(req["seconds"]), int(req["concurrency"]), int(req["size"]))}
        raise ValueError(f"unknown op {op!r}")

    server = await asyncio.start_server(client, "127.0.0.1", args.client_port, limit=64 << 20)
    print(f"READY {args.id}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--id", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--peers", required=True)
    p.add_argument("--voters", default="")
    p.add_argument("--client-port", type=int, required=True)
    p.add_argument("--secret", default="test-cluster-secret")
    p.add_argument("--election-ms", type=int, default=1000)
    p.add_argument("--uvloop", action="store_true")
    p.add_argument("--lease-read", action="store_true", help="answer reads from the leader lease")
    p.add_argument("--unsafe-tick-lease", action="store_true", help="fault injection: the old tick-counted lease")
    p.add_argument("--snapshot-threshold", type=int, default=0)
    p.add_argument("--log-margin", type=int, default=1000)
    p.add_argument("--chunk-bytes", type=int, default=1 << 20)
    p.add_argument("--throttle", type=int, default=0, help="InstallSnapshot bytes/s limit on the leader")
    p.add_argument("--sync-every", type=int, default=16 << 20, help="InstallSnapshot checkpoint interval (bytes)")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if os.environ.get("RAFT_SWITCH_INTERVAL"):
        import sys

        sys.setswitchinterval(float(os.environ["RAFT_SWITCH_INTERVAL"]))
    if args.uvloop:
        import uvloop

        uvloop.install()
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
