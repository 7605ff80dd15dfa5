"""Latency histograms the node keeps for its metrics (fsync of a log batch, proposal to commit).

Plain bucket counters, cheap enough for every batch, readable from any thread as a consistent copy. The
HTTP layer exports them as Prometheus histograms; raft itself depends on no metrics library.
"""

from __future__ import annotations

import bisect
import threading

# Seconds: 100 µs .. 10 s, roughly ×2.5 per step (etcd's wal_fsync buckets start at 1 ms; ours start lower
# because a batch fsync on a fast disk takes a few hundred microseconds).
BUCKETS_S: tuple[float, ...] = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)


class LatencyHistogram:
    __slots__ = ("_counts", "_lock", "_sum", "buckets")

    def __init__(self, buckets: tuple[float, ...] = BUCKETS_S) -> None:
        self.buckets = buckets
        self._counts = [0] * (len(buckets) + 1)  # the last one is +Inf
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        i = bisect.bisect_left(self.buckets, seconds)
        with self._lock:
            self._counts[i] += 1
            self._sum += seconds

    def snapshot(self) -> dict[str, object]:
        """{"buckets": [[upper bound, cumulative count], ..., ["+Inf", total]], "sum": s, "count": n}."""
        with self._lock:
            counts, total = list(self._counts), self._sum
        out: list[list[object]] = []
        acc = 0
        for bound, c in zip((*self.buckets, "+Inf"), counts, strict=True):
            acc += c
            out.append([bound, acc])
        return {"buckets": out, "sum": total, "count": acc}
