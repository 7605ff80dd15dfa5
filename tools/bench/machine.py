"""The machine's own figures that `python -m tools.bench all` divides ours by (issue 25: rows as ratios that hold
on any machine), each measured in the same run, with its file on the disk the benchmark's stores use
(`bench_dir()`: $BENCH_DIR, else the temp directory the stores' TemporaryDirectory lands in):

* `fdatasync_latency`: a file preallocated with posix_fallocate, then N times a 256 B pwrite at the next offset
  and one fdatasync, each pair timed: p50 / p99. What one durable append of a small log entry costs on this
  disk, the floor under a serial Raft commit (the leader's append and a follower's, in parallel, plus loopback).
* `fdatasync_stalls`: the same pair every 2 ms for some seconds: how many took over a bound, and the slowest. The
  disk's own stalls, measured alone, beside the realistic row's tail (tools/bench/realistic_ab.py).
* `write_bandwidth`: 1 MiB writes up to `total` bytes (1 GiB by default), one fsync at the end, timed from the
  first write to the fsync's return (what `dd bs=1M count=1024 conv=fsync` measures); the file is removed.
  The floor under InstallSnapshot, which writes a snapshot's bytes and fsyncs them.

`ratio` and `verdict` are the pure parts the rows are made of."""

from __future__ import annotations

import os
import platform
import statistics
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

MiB = 1 << 20


def describe() -> dict[str, Any]:
    """Which machine a figure came from: the CPU model and count, and the Python that ran the controller (its
    build flags too: an interpreter built without --enable-optimizations runs the same code measurably slower)."""
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    except OSError:
        pass
    flags = str(sysconfig.get_config_var("CONFIG_ARGS") or "")
    return {
        "cpu_model": model,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "python_optimized": "--enable-optimizations" in flags,
        "python_shared": "--enable-shared" in flags,
        "kernel": platform.release(),
    }


def bench_dir() -> str:
    """Where the benchmarks' stores go (tools/bench: TemporaryDirectory(dir=$BENCH_DIR or None))."""
    return os.environ.get("BENCH_DIR") or tempfile.gettempdir()


def percentile(sorted_vals: list[float], q: float) -> float:
    """The nearest-rank percentile `q` (0..1) of an ascending list (not empty)."""
    if not sorted_vals:
        raise ValueError("no values")
    k = min(len(sorted_vals) - 1, max(0, round(q * (len(sorted_vals) - 1))))
    return sorted_vals[k]


@contextmanager
def _preallocated(prefix: str, size: int, directory: str | None) -> Iterator[int]:
    """A scratch file of `size` bytes allocated with posix_fallocate and fsynced (the allocation itself durable
    before the first timed write), in `directory` (default `bench_dir()`); its fd, the file removed after."""
    fd, path = tempfile.mkstemp(prefix=prefix, dir=directory or bench_dir())
    try:
        os.posix_fallocate(fd, 0, size)
        os.fsync(fd)
        yield fd
    finally:
        os.close(fd)
        os.unlink(path)


def fdatasync_latency(directory: str | None = None, n: int = 1000, size: int = 256) -> dict[str, Any]:
    """p50 / p99 (ms) of `n` pwrite(`size` B) + fdatasync pairs into a file preallocated with posix_fallocate
    for all of them, in `directory` (default `bench_dir()`); the file is removed."""
    if n < 1 or size < 1:
        raise ValueError("n and size must be positive")
    payload = os.urandom(size)
    lat: list[float] = []
    with _preallocated("fdatasync-ref-", n * size, directory) as fd:
        for k in range(n):
            t0 = time.perf_counter()
            os.pwrite(fd, payload, k * size)
            os.fdatasync(fd)
            lat.append(time.perf_counter() - t0)
    lat.sort()
    return {
        "writes": n,
        "bytes": size,
        "p50_ms": round(1000 * percentile(lat, 0.50), 4),
        "p99_ms": round(1000 * percentile(lat, 0.99), 4),
        "mean_ms": round(1000 * statistics.fmean(lat), 4),
    }


def fdatasync_stalls(
    seconds: float, over_s: float, directory: str | None = None, pause_s: float = 0.002
) -> dict[str, Any]:
    """The disk's own stalls: for `seconds`, a 256 B pwrite + fdatasync every `pause_s` (a log writer's pace at a
    few hundred batches a second) into a preallocated 1 MiB file, written round; how many pairs took over
    `over_s` and the slowest (ms). Nothing else of the benchmark runs meanwhile, so a stall here is the disk's
    or the host's, not the controller's. The file is removed."""
    if seconds <= 0 or over_s <= 0:
        raise ValueError("seconds and over_s must be positive")
    payload, span = os.urandom(256), MiB
    lat: list[float] = []
    with _preallocated("fdatasync-stalls-", span, directory) as fd:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.perf_counter()
            os.pwrite(fd, payload, (len(lat) * 256) % span)
            os.fdatasync(fd)
            lat.append(time.perf_counter() - t0)
            time.sleep(pause_s)  # the pace of the writes measured, not a wait for anything
    lat.sort()
    return {
        "seconds": seconds,
        "writes": len(lat),
        "p50_ms": round(1000 * percentile(lat, 0.50), 4),
        "over_ms": over_s * 1000,
        "over": sum(x > over_s for x in lat),
        "max_ms": round(1000 * lat[-1], 2),
    }


def write_bandwidth(directory: str | None = None, total: int = 1024 * MiB, block: int = MiB) -> dict[str, Any]:
    """MiB/s of `total` bytes written `block` at a time and fsynced once at the end, in `directory` (default
    `bench_dir()`); the file is removed."""
    if total < block or block < 1:
        raise ValueError("total must hold at least one block")
    buf = os.urandom(block)  # not zeros: nothing on the way may skip or compress them
    blocks = total // block
    fd, path = tempfile.mkstemp(prefix="write-ref-", dir=directory or bench_dir())
    try:
        t0 = time.perf_counter()
        for _ in range(blocks):
            view = memoryview(buf)
            while view:
                view = view[os.write(fd, view) :]
        os.fsync(fd)
        seconds = time.perf_counter() - t0
    finally:
        os.close(fd)
        os.unlink(path)
    written = blocks * block
    return {"bytes": written, "block": block, "seconds": round(seconds, 6), "mib_s": round(written / MiB / seconds, 2)}


def ratio(ours: float, reference: float) -> float:
    """ours / reference; 0.0 when the reference is not positive (nothing to divide by: the row shows 0)."""
    return ours / reference if reference > 0 else 0.0


def verdict(value: float, op: str, threshold: float) -> bool:
    """Whether `value` meets `op threshold` (op: "<=" or ">=")."""
    if op == "<=":
        return value <= threshold
    if op == ">=":
        return value >= threshold
    raise ValueError(f"unknown comparison {op!r}")
