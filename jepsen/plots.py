"""Plots of a run, drawn as Jepsen draws them: latency over time (one point per op: ok, fail and info in
different marks, by operation) and throughput over time (completions per second by type), with the nemesis
windows shaded. PNG files through matplotlib's Agg backend (no display needed).

    python -c "from jepsen.plots import plot_run; plot_run('jepsen-runs/<run>/history.jsonl')"
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after choosing the backend

MARKS = {"ok": ("o", "#2b8a3e"), "fail": ("x", "#c92a2a"), "info": ("^", "#e67700")}
NS = 1e9


def load(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def nemesis_windows(records: Iterable[dict[str, Any]], end: float) -> list[tuple[float, float, str]]:
    """(start s, stop s, label) of every fault, from the nemesis start/stop records."""
    out, open_at, label = [], None, ""
    for r in records:
        if r.get("process") != "nemesis":
            continue
        if r["f"] == "start" and open_at is None:
            open_at = r["time"] / NS
            v = r.get("value")
            label = v.get("nemesis", "") if isinstance(v, dict) else str(v)
        elif r["f"] == "stop" and open_at is not None:
            out.append((open_at, r["time"] / NS, label))
            open_at = None
    if open_at is not None:
        out.append((open_at, end, label))
    return out


def completions(records: list[dict[str, Any]]) -> list[tuple[float, float, str, str]]:
    """(invoke time s, latency s, type, f) of every completed client op."""
    pending: dict[Any, dict[str, Any]] = {}
    out = []
    for r in records:
        p = r.get("process")
        if p == "nemesis":
            continue
        if r["type"] == "invoke":
            pending[p] = r
        elif p in pending:
            inv = pending.pop(p)
            out.append((inv["time"] / NS, (r["time"] - inv["time"]) / NS, r["type"], r["f"]))
    return out


def _shade(ax: Any, windows: list[tuple[float, float, str]]) -> None:
    for i, (a, b, label) in enumerate(windows):
        ax.axvspan(a, b, color="#868e96", alpha=0.18, lw=0, label=label if i == 0 else None)


def plot_run(history: str | Path, out_dir: str | Path | None = None, title: str = "") -> list[Path]:
    """Write latency.png and rate.png next to `history` (or into `out_dir`); returns their paths."""
    records = load(history)
    out = Path(out_dir) if out_dir is not None else Path(history).parent
    ops = completions(records)
    end = max((r["time"] for r in records), default=0) / NS
    windows = nemesis_windows(records, end)
    paths = [out / "latency.png", out / "rate.png"]

    fig, ax = plt.subplots(figsize=(11, 5), dpi=100)
    _shade(ax, windows)
    fs = sorted({f for *_, f in ops})
    shades = plt.get_cmap("tab10")
    for k, f in enumerate(fs):
        for t, (marker, _) in MARKS.items():
            pts = [(x, y) for x, y, typ, ff in ops if typ == t and ff == f]
            if pts:
                xs, ys = zip(*pts, strict=True)
                ax.scatter(
                    xs, [y * 1000 for y in ys], s=9, marker=marker, color=shades(k % 10), alpha=0.7, label=f"{f} {t}"
                )
    ax.set_yscale("log")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("latency (ms)")
    ax.set_title(f"latency {title}".strip())
    ax.legend(loc="upper left", fontsize=7, ncol=4, markerscale=2)
    ax.set_xlim(0, max(end, 1))
    fig.tight_layout()
    fig.savefig(paths[0])
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(11, 4), dpi=100)
    _shade(ax, windows)
    buckets: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for t0, lat, typ, _ in ops:
        buckets[typ][int(t0 + lat)] += 1
    seconds = range(int(end) + 1)
    for typ, (_, color) in MARKS.items():
        if typ in buckets:
            ax.plot(list(seconds), [buckets[typ].get(s, 0) for s in seconds], color=color, lw=1.2, label=typ)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("completions / s")
    ax.set_title(f"throughput {title}".strip())
    ax.legend(loc="upper left", fontsize=8)
    ax.set_xlim(0, max(end, 1))
    fig.tight_layout()
    fig.savefig(paths[1])
    plt.close(fig)
    return paths
