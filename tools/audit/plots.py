"""The audit's PNG plots (matplotlib, Agg): log growth with snapshot points per node, findings by check."""

from __future__ import annotations

import io
from typing import Any

from raft.storage.walscan import LiveLog


def _figure() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_growth(
    nodes: list[Any], by_node: dict[int, list[Any]], logs: dict[int, LiveLog], names: dict[int, str]
) -> bytes:
    """Cumulative log data (each segment's extent: bytes holding entries) against the index each segment starts at, per node; snapshots as markers."""
    plt = _figure()
    fig, ax = plt.subplots(figsize=(9, 5))
    for n in nodes:
        xs, ys = growth_series(by_node.get(n.nid, []))
        line = ax.plot(xs, ys, label=names[n.nid])[0]
        snaps = sorted(n.snapshots)
        if snaps and xs:
            ax.scatter(snaps, [_interp(s, xs, ys) for s in snaps], color=line.get_color(), marker="D", zorder=3)
    ax.set_xlabel("log index")
    ax.set_ylabel("log data (MB, cumulative; not preallocated file size)")
    ax.set_title("log growth per node (diamonds: snapshots)")
    ax.legend(loc="upper left")
    return _png(plt, fig)


def growth_series(outs: list[Any]) -> tuple[list[float], list[float]]:
    """(log index, cumulative MB) at each segment's first and last entry: the MB are each segment's data
    extent (the bytes holding entries), not its file size, which preallocation sets at 64 MiB."""
    xs: list[float] = []
    ys: list[float] = []
    total = 0
    for o in outs:
        spans = o.scan.spans
        if not spans:
            continue
        xs.append(spans[0].first_index)
        ys.append(total / 1e6)
        total += o.scan.valid_end + o.scan.torn_bytes
        xs.append(spans[-1].first_index + spans[-1].count - 1)
        ys.append(total / 1e6)
    return xs, ys


def _interp(x: float, xs: list[float], ys: list[float]) -> float:
    for k in range(1, len(xs)):
        if xs[k - 1] <= x <= xs[k]:
            span = xs[k] - xs[k - 1]
            return ys[k - 1] + (ys[k] - ys[k - 1]) * ((x - xs[k - 1]) / span if span else 0)
    return ys[-1] if x > xs[-1] else ys[0]


def plot_findings(checks: list[dict[str, Any]]) -> bytes:
    plt = _figure()
    fig, ax = plt.subplots(figsize=(9, 5))
    labels = [c["check"] + (" (skipped)" if c["status"] == "skipped" else "") for c in checks]
    ax.barh(
        labels,
        [c["findings"] for c in checks],
        color=["#c0392b" if c["status"] == "fail" else "#7f8c8d" for c in checks],
    )
    ax.set_xlabel("findings")
    ax.set_title("findings by check")
    ax.invert_yaxis()
    fig.tight_layout()
    return _png(plt, fig)


def _png(plt: Any, fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()
