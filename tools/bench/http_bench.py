"""python -m tools.bench http [--seconds S] [--connections C] [--clients P] [--brokers N] [--json FILE] [--quick]

Broker heartbeats through consensus over HTTP against a 3-node `controllerd` group on loopback (fsync on),
and, in the same run with the same load generator, a bare FastAPI POST endpoint that parses the same JSON
body into a pydantic model and answers a constant envelope (`tools/bench/bare_app.py`). The ratio of the
two is the cost of consensus plus the controller; the target is at least 60% of the bare rate.

The load generator is `P` processes, each with `C / P` keep-alive connections speaking minimal HTTP/1.1
over asyncio streams (much cheaper than an HTTP client library, so that the client does not hide the
server's cost; it still shares the machine's cores with the servers, equally in both runs). Every reply
is checked: HTTP 200 and `"code":0`, otherwise it counts as an error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from raft.testing.cluster import free_ports
from tools.bench.group import child_env, wait_http

HEARTBEAT = "/api/v1/controller/heartbeat"
# One request/answer on an open connection: True when the answer is a success.
Exchange = Callable[[asyncio.StreamReader, asyncio.StreamWriter, bytes], Awaitable[bool]]


def _body(i: int) -> bytes:
    b = i % 3
    return json.dumps(
        {
            "clusterName": "DefaultCluster",
            "brokerName": f"broker-{i // 3}",
            "brokerAddr": f"10.1.{i // 250}.{i % 250}:10911",
            "brokerId": b,
            "epoch": 1,
            "maxOffset": 1000 + i,
            "confirmOffset": 1000 + i,
            "heartbeatTimeoutMills": 10000,
            "electionPriority": 1,
        }
    ).encode()


async def _closed_loop(
    host: str,
    port: int,
    requests: list[bytes],
    deadline: float,
    lat: list[float],
    exchange: Exchange,
    tls: ssl.SSLContext | None = None,
) -> int:
    """One connection (over TLS with `tls`), one request in flight until `deadline`: the requests in turn, each
    answer's latency into `lat`; returns how many answers `exchange` found wrong."""
    reader, writer = await asyncio.open_connection(host, port, ssl=tls)
    errors = 0
    k = 0
    try:
        while time.perf_counter() < deadline:
            req = requests[k % len(requests)]
            k += 1
            t0 = time.perf_counter()
            ok = await exchange(reader, writer, req)
            lat.append(time.perf_counter() - t0)
            errors += not ok
    finally:
        writer.close()
    return errors


def _request(host: str, body: bytes) -> bytes:
    """The heartbeat POST carrying `body`, minimal HTTP/1.1 (keep-alive by default)."""
    return (
        f"POST {HEARTBEAT} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def _http_exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, req: bytes) -> bool:
    """HTTP 200 with `"code":0` in the body."""
    writer.write(req)
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    payload = await reader.readexactly(length)
    return head.startswith(b"HTTP/1.1 200") and b'"code":0' in payload


def _frame(i: int) -> bytes:
    """The same heartbeat as `_body(i)`, as a RocketMQ 904 RemotingCommand (ROCKETMQ header, opaque 0)."""
    from api.remoting import codec

    fields = {k: str(v) for k, v in json.loads(_body(i)).items()}
    return codec.encode(codec.RemotingCommand(904, 0, ext_fields=fields, serialize_type=codec.ROCKETMQ))


def _remoting_exchange() -> Exchange:
    """A RemotingCommand answer with code 0."""
    from api.remoting import codec

    async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, frame: bytes) -> bool:
        writer.write(frame)
        total = int.from_bytes(await reader.readexactly(4), "big")
        data = await reader.readexactly(total)
        info = int.from_bytes(data[:4], "big")
        return codec.decode_header(data[4 : 4 + (info & 0xFFFFFF)], info >> 24).code == 0

    return exchange


def _client(
    host: str,
    port: int,
    conns: int,
    seconds: float,
    offset: int,
    brokers: int,
    q: Any,
    proto: str = "http",
    tls: tuple[str, str, str] | None = None,
) -> None:
    exchange: Exchange
    ctx = None
    if tls is not None:  # (CA file, client certificate, key): built here, a spawned process cannot take a context
        ctx = ssl.create_default_context(cafile=tls[0])
        ctx.load_cert_chain(tls[1], tls[2])
    if proto == "http":
        requests, exchange = [_request(host, _body(offset + i)) for i in range(brokers)], _http_exchange
    else:
        requests, exchange = [_frame(offset + i) for i in range(brokers)], _remoting_exchange()

    async def run() -> tuple[list[float], int]:
        lat: list[float] = []
        deadline = time.perf_counter() + seconds
        errs = await asyncio.gather(
            *(
                _closed_loop(host, port, requests[c::conns] or requests, deadline, lat, exchange, ctx)
                for c in range(conns)
            )
        )
        return lat, sum(errs)

    lat, errors = asyncio.run(run())
    q.put((lat, errors))


def drive(
    host: str,
    port: int,
    seconds: float,
    connections: int,
    clients: int,
    brokers: int,
    proto: str = "http",
    tls: tuple[str, str, str] | None = None,
) -> dict[str, Any]:
    """`clients` processes with `connections` closed-loop connections in all, for `seconds`; proto "http" (POST
    heartbeat) or "remoting" (904 frames); over TLS with `tls` = (CA file, client certificate, key)."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    per = max(1, connections // clients)
    procs = [
        ctx.Process(target=_client, args=(host, port, per, seconds, k * brokers, brokers, q, proto, tls))
        for k in range(clients)
    ]
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    results = [q.get(timeout=seconds + 60) for _ in procs]
    elapsed = time.perf_counter() - t0
    for p in procs:
        p.join()
    lat = sorted(x for r in results for x in r[0])
    n = len(lat)
    pct = (lambda p: round(lat[min(n - 1, int(p * n))] * 1000, 2)) if n else (lambda p: None)
    return {
        "requests": n,
        "errors": sum(r[1] for r in results),
        "per_s": round(n / seconds),
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "wall_s": round(elapsed, 1),
    }


_env = child_env  # the names remoting_bench and all.py import
_wait_http = wait_http


def bench_bare(args: argparse.Namespace) -> dict[str, Any]:
    (port,) = free_ports(1)
    proc = subprocess.Popen([sys.executable, "-m", "tools.bench.bare_app", str(port)], env=_env())
    try:
        _wait_http(f"http://127.0.0.1:{port}/livez", 30, [proc])
        drive("127.0.0.1", port, 1.0, args.connections, args.clients, args.brokers)  # warm-up
        return drive("127.0.0.1", port, args.seconds, args.connections, args.clients, args.brokers)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def start_group(root: str, procs: list[subprocess.Popen[bytes]], extra: str = "") -> tuple[str, str]:
    """Three controllerd processes (appended to `procs`), ready; (leader's HTTP address, its remoting address).
    `extra`: more controller.conf lines for every node."""
    ports = free_ports(9)
    rafts, https, rpcs = ([f"127.0.0.1:{p}" for p in ports[k : k + 3]] for k in (0, 3, 6))
    addrs = f"jRaftControllerRPCAddr={','.join(rpcs)}\ncontrollerHttpAddr={','.join(https)}\n"
    for i in range(3):
        conf = os.path.join(root, f"n{i}.conf")
        with open(conf, "w") as f:
            f.write(
                f"controllerType=jRaft\njRaftServerId={rafts[i]}\njRaftInitConf={','.join(rafts)}\n{addrs}"
                f"controllerStorePath={root}/n{i}\n{extra}"
            )
        log = open(os.path.join(root, f"n{i}.log"), "wb")  # noqa: SIM115 - the child's
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "cli.controllerd", "--type", "jraft", "-c", conf, "--log-format", "json"],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_env(),
            )
        )
    for h in https:
        _wait_http(f"http://{h}/readyz", 60, procs)
    leader = rafts.index(httpx.get(f"http://{https[0]}/api/v1/raft/status", timeout=5).json()["body"]["leaderId"])
    return https[leader], rpcs[leader]


def stop_group(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        p.wait(30)


def parse_args(name: str, argv: list[str], doc: str) -> argparse.Namespace:
    """The load options every heartbeat benchmark takes (`--quick`: a tiny smoke run)."""
    ap = argparse.ArgumentParser(prog=f"python -m tools.bench {name}", description=doc.split("\n\n")[1])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--clients", type=int, default=2, help="load-generator processes")
    ap.add_argument("--brokers", type=int, default=3000, help="distinct broker identities per client process")
    ap.add_argument("--json", default=f"bench-{name}.json")
    ap.add_argument("--quick", action="store_true", help="tiny run for a smoke test")
    args = ap.parse_args(argv)
    if args.quick:
        args.seconds, args.connections, args.clients, args.brokers = 1.0, 4, 1, 30
    return args


def bench_controller(args: argparse.Namespace, root: str) -> dict[str, Any]:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        http, _ = start_group(root, procs)
        host, port = http.rsplit(":", 1)
        drive(host, int(port), 1.0, args.connections, args.clients, args.brokers)  # warm-up: registers brokers
        out = drive(host, int(port), args.seconds, args.connections, args.clients, args.brokers)
        st = httpx.get(f"http://{host}:{port}/api/v1/raft/status", timeout=5).json()["body"]
        out["commit_index"] = st["commitIndex"]
        return out
    finally:
        stop_group(procs)


def main(argv: list[str]) -> int:
    args = parse_args("http", argv, __doc__ or "")
    with tempfile.TemporaryDirectory(prefix="bench-http-") as root:
        controller = bench_controller(args, root)
    bare = bench_bare(args)
    ratio = controller["per_s"] / bare["per_s"] if bare["per_s"] else 0.0
    rows = [("controller heartbeat (3 nodes, consensus, fsync)", controller), ("bare FastAPI POST", bare)]
    print(f"{'endpoint':<50} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
    for name, r in rows:
        print(f"{name:<50} {r['per_s']:>8} {r['p50_ms']!s:>8} {r['p99_ms']!s:>8} {r['errors']:>7}")
    print(f"controller / bare = {ratio:.0%} (target >= 60%)")
    doc = {
        "benchmark": "http",
        "seconds": args.seconds,
        "connections": args.connections,
        "clients": args.clients,
        "controller": controller,
        "bare": bare,
        "ratio": round(ratio, 3),
        "target_ratio": 0.6,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=2)
    print(f"wrote {args.json}")
    return 0 if controller["errors"] == 0 and bare["errors"] == 0 else 1
