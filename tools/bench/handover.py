"""python -m tools.bench handover [--count N] [--batches 1,10,50,200] [--reps R] [--json FILE] [--quick]

What a remoting front end in a process of its own would take off the Raft process and what it would add, per
broker heartbeat, measured before anyone builds it (issue 25; docs/performance.md says what the figures decided).
In one run, each figure the median of `--reps` repetitions, CPU time (user + system) of the process doing it:

- moved: the front end's own work on a heartbeat, which would leave the Raft process: a Java broker's 904 frame
  split out of the byte stream, its header decoded and its 1202 item read (codec.FrameDecoder, codec.decode,
  headers.heartbeat_item), and its answer framed (codec.AnswerTemplate), in this process;
- added, per batch size (the heartbeats of one loop turn: tens at 10,000 brokers): the hand-over between the
  two processes over a Unix socket, each side's CPU. The front end packs (connection, opaque, item) for each
  heartbeat of the batch with msgpack and writes it; the core reads and unpacks it, packs the batch's answers
  (connection, opaque, code) and writes them back; the front end reads and unpacks those.

Neither figure includes the reads and writes on the brokers' connections, which stay with the front end. The
Raft process's CPU per heartbeat to compare them with is the realistic row of `python -m tools.bench peers`
(leader CPU per acknowledged heartbeat)."""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import struct
import time
from typing import Any

import msgpack

from api.remoting import codec
from api.remoting import headers as H
from statemachine import codes as C
from tools.bench import machine

LENGTH = struct.Struct(">I")
# What a Java broker's BrokerHeartbeatRequestHeader carries (RocketMQ 5.5, Long.toString / Integer.toString).
EXT = {
    "clusterName": "DefaultCluster",
    "brokerAddr": "127.0.0.1:30911",
    "brokerName": "broker-a",
    "brokerId": "1",
    "epoch": "2",
    "maxOffset": "123456789",
    "confirmOffset": "123456000",
    "heartbeatTimeoutMills": "10000",
    "electionPriority": "2147483647",
}
READ = 64  # frames per read of the byte stream: one loop turn's data on a busy connection


def stream(count: int) -> list[bytes]:
    """`count` 904 frames with opaques 1..count, joined READ at a time, as reads of a connection would give them."""
    frames = [
        codec.encode(codec.RemotingCommand(H.BROKER_HEARTBEAT, opaque, ext_fields=EXT))
        for opaque in range(1, count + 1)
    ]
    return [b"".join(frames[i : i + READ]) for i in range(0, count, READ)]


def moved_us(count: int) -> float:
    """CPU microseconds per heartbeat of the front end's own work (see the module's docstring)."""
    reads = stream(count)
    answer = codec.AnswerTemplate.of(codec.RemotingCommand(H.BROKER_HEARTBEAT, 0).response(C.SUCCESS))
    assert answer is not None
    decoder = codec.FrameDecoder()
    out = 0
    t0 = time.process_time()
    for data in reads:
        for frame in decoder.feed(data):
            cmd = codec.decode(frame)
            item = H.heartbeat_item(cmd.ext_fields)
            assert item is not None, cmd.ext_fields
            H.identity(item)
            out += len(answer.frame(cmd.opaque))
    took = time.process_time() - t0
    assert out > 0 and decoder.pending == 0
    return took / count * 1e6


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def _core(s: socket.socket) -> None:
    """The Raft process's side: each batch unpacked and answered, until the front end closes; then its CPU."""
    t0 = time.process_time()
    served = 0
    while True:
        try:
            (n,) = LENGTH.unpack(recv_exact(s, 4))
        except EOFError:
            break
        batch = msgpack.unpackb(recv_exact(s, n), use_list=False)
        out = msgpack.packb([(conn, opaque, 0) for conn, opaque, _item in batch])
        s.sendall(LENGTH.pack(len(out)) + out)
        served += len(batch)
    s.sendall(json.dumps({"cpu_s": time.process_time() - t0, "served": served}).encode())
    s.shutdown(socket.SHUT_WR)


def handover_us(count: int, batch: int) -> tuple[float, float]:
    """CPU microseconds per heartbeat of the hand-over in batches of `batch`: (front end, core)."""
    item = H.heartbeat_item(EXT)
    assert item is not None
    front, core = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:  # the core
        code = 1
        try:
            front.close()
            _core(core)
            code = 0
        finally:
            os._exit(code)
    core.close()
    try:
        sent = 0
        t0 = time.process_time()
        while sent < count:
            n = min(batch, count - sent)
            out = msgpack.packb([(7, sent + k, item) for k in range(n)])
            front.sendall(LENGTH.pack(len(out)) + out)
            (size,) = LENGTH.unpack(recv_exact(front, 4))
            answers = msgpack.unpackb(recv_exact(front, size), use_list=False)
            assert len(answers) == n and answers[-1][1] == sent + n - 1
            sent += n
        front_s = time.process_time() - t0
        front.shutdown(socket.SHUT_WR)
        report = json.loads(b"".join(iter(lambda: front.recv(4096), b"")))
    finally:
        front.close()
        _, status = os.waitpid(pid, 0)
    if status != 0 or report["served"] != count:
        raise RuntimeError(f"handover: the core process ended with status {status} after {report}")
    return front_s / count * 1e6, report["cpu_s"] / count * 1e6


def spread(values: list[float]) -> dict[str, Any]:
    return {"median": round(statistics.median(values), 3), "range": [round(min(values), 3), round(max(values), 3)]}


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tools.bench handover", description=__doc__.split("\n\n")[1])
    p.add_argument("--count", type=int, default=200_000, help="heartbeats per measurement (default 200000)")
    p.add_argument(
        "--batches",
        type=lambda v: [int(x) for x in v.split(",") if x],
        default=[1, 10, 50, 200],
        help="heartbeats per hand-over (default 1,10,50,200)",
    )
    p.add_argument("--reps", type=int, default=3, help="repetitions of each measurement (default 3)")
    p.add_argument("--json", default="bench-handover.json", help="write the figures here")
    p.add_argument("--quick", action="store_true", help="tiny input, one repetition: a smoke run, figures mean nothing")
    a = p.parse_args(argv)
    if a.quick:
        a.count, a.reps = 2000, 1
    if a.count < 1 or a.reps < 1 or not a.batches or min(a.batches) < 1:
        p.error("--count, --reps and every --batches size must be at least 1")
    return a


def main(argv: list[str]) -> int:
    a = parse(argv)
    doc: dict[str, Any] = {
        "benchmark": "handover",
        "machine": machine.describe(),
        "loadavg_before": list(os.getloadavg()),
        "settings": {"count": a.count, "batches": a.batches, "reps": a.reps},
    }
    moved: list[float] = []
    runs: dict[int, list[tuple[float, float]]] = {b: [] for b in a.batches}
    for _ in range(a.reps):  # each repetition measures every figure once, one after the other
        moved.append(moved_us(a.count))
        for b in a.batches:
            runs[b].append(handover_us(a.count, b))
    doc["loadavg_after"] = list(os.getloadavg())
    doc["moved_us"] = spread(moved)
    doc["rows"] = [
        {
            "batch": b,
            "front_us": spread([f for f, _ in runs[b]]),
            "core_us": spread([c for _, c in runs[b]]),
            "both_us": spread([f + c for f, c in runs[b]]),
        }
        for b in a.batches
    ]
    m = doc["moved_us"]
    print(f"load average {doc['loadavg_before'][0]:.2f} before, {doc['loadavg_after'][0]:.2f} after; {a.reps} reps")
    print(f"moved off the Raft process: {m['median']:.2f} us CPU per heartbeat [{m['range'][0]}-{m['range'][1]}]")
    print(f"{'hand-over, per heartbeat (us CPU)':<36} {'front end':>12} {'core':>12} {'both':>12}")
    for r in doc["rows"]:
        cells = [f"{r[k]['median']:.2f}" for k in ("front_us", "core_us", "both_us")]
        print(f"{'batch of ' + str(r['batch']):<36} {cells[0]:>12} {cells[1]:>12} {cells[2]:>12}")
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"JSON: {a.json}")
    return 0
