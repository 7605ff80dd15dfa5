"""The peers benchmark's charts and `--from`, offline: from the JSON of a recorded run (docs/), never a timing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.bench import peers

RUN = Path(__file__).resolve().parents[3] / "docs" / "bench-peers-2026-11-27-alone.json"


def test_a_chart_per_row_from_a_recorded_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(RUN.read_text())
    systems = ["ours", "jraft", "dledger"]  # the recorded run's, whichever this machine has
    assert peers.summarize(doc["rounds"], systems, *peers.curve_of(doc)) == doc["rows"]  # the rounds' medians

    code = peers.main(["--from", str(RUN), "--charts", str(tmp_path / "charts"), "--json", str(tmp_path / "x.json")])

    assert code == 0 and not (tmp_path / "x.json").exists()  # --from runs nothing and overwrites nothing
    pngs = sorted((tmp_path / "charts").iterdir())
    assert [p.name for p in pngs] == sorted(peers.chart_name(r) for r in doc["rows"])
    assert len(pngs) == len(doc["rows"])
    for p in pngs:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", p
    out = capsys.readouterr().out
    assert "3 round(s)" in out and "heartbeat throughput, acknowledged (/s)" in out and "3.81x" in out


def test_each_row_names_the_figure_it_charts() -> None:
    doc = json.loads(RUN.read_text())
    for row in doc["rows"]:
        path = peers.path_of(row)
        values = sorted(v for r in doc["rounds"] if r["system"] == "ours" and (v := peers.get(r, path)) is not None)
        assert row["systems"]["ours"]["range"] == [round(values[0], 3), round(values[-1], 3)], row["name"]


def test_the_run_with_every_row(tmp_path: Path) -> None:
    """docs/bench-peers-2026-11-28.json: the curve's sizes, the kills, the restart, 1M heartbeats and real brokers'
    failover, each a row with a chart, for the three systems."""
    doc = json.loads((RUN.parent / "bench-peers-2026-11-28.json").read_text())
    systems = ["ours", "jraft", "dledger"]
    assert peers.summarize(doc["rounds"], systems, *peers.curve_of(doc)) == doc["rows"]
    names = {row["name"] for row in doc["rows"]}
    every = {name for name, *_ in peers.row_defs(*peers.curve_of(doc))}
    older = {"controller failover: 1004 + 904 answered"}  # the one-kill row of older runs
    newer = {n for n in every if "the NameServer routes to it" in n}  # rows added after this run
    derived = {n for n in every if "per acknowledged heartbeat" in n}  # added since, from figures it has
    assert names == every - older - newer - derived
    again = json.loads(json.dumps(doc))
    peers.rederive(again, systems)  # what `--from` shows: the rows derived since as well
    assert {row["name"] for row in again["rows"]} == every - older - newer
    assert [row for row in again["rows"] if row["name"] in names] == doc["rows"]
    for row in doc["rows"]:
        # JRaftController answered no heartbeat inside the 30,000-broker step's window: no latency to give
        none = {"jraft"} if row["name"] == "realistic load at 30,000 brokers: heartbeat p99" else set()
        assert set(row["systems"]) == set(systems) - none, row["name"]
    assert len(peers.charts(doc, str(tmp_path))) == len(doc["rows"])
    for r in doc["rounds"]:
        assert r["failover_kills"]["kills"] == 20 and r["broker_failover"]["master_s"]["runs"] == 10, r["system"]
        assert r["million_disk"]["heartbeats"] >= 999_000 and r["restart"]["caught_up_s"] > 0, r["system"]
