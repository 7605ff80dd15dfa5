"""`python -m jepsen check HISTORY`: summary, results.json, exit codes 0 valid / 1 invalid / 2 unknown /
3 malformed input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from jepsen.__main__ import cli
from jepsen.history import write_history
from tests.jepsen import HOp, pathological, r, records, register_history, w

ROOT = Path(__file__).resolve().parents[2]
NEMESIS: list[dict[str, Any]] = [
    {"process": "nemesis", "type": "info", "f": "start", "value": "partition-random-halves", "time": 12},
    {"process": "nemesis", "type": "info", "f": "stop", "value": None, "time": 18},
]


def write(tmp_path: Path, rows: list[dict[str, Any]], name: str = "history.jsonl") -> Path:
    path = tmp_path / name
    ordered: list[dict[str, Any]] = sorted(rows, key=lambda d: d["time"])
    write_history(path, ordered)
    return path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["check", *args])


def test_valid_history(tmp_path: Path) -> None:
    path = write(tmp_path, register_history(3, 300, keys=3, concurrency=5, info_rate=0.02) + NEMESIS)
    res = run(str(path))
    assert res.exit_code == 0, res.output
    assert "linearizability        valid    3 keys" in res.stdout
    assert res.stdout.splitlines()[-2:] == ["verdict: valid", f"results: {tmp_path / 'results.json'}"]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["verdict"] == "valid"
    assert results["workloads"] == ["register"]
    assert results["counts"]["nemesis_events"] == 2
    lin = results["checkers"]["linearizability"]
    assert lin["verdict"] == "valid" and lin["counts"]["keys"] == 3 and lin["failures"] == []


def test_invalid_history_prints_the_counterexample(tmp_path: Path) -> None:
    path = write(tmp_path, records(w(1, 1, 0, 10), w(1, 2, 20, 30), r(2, 1, 40, 50)))
    out = tmp_path / "elsewhere.json"
    res = run(str(path), "--out", str(out))
    assert res.exit_code == 1
    assert "key 'k': cannot linearize lines 5-6" in res.stdout
    assert "smallest failing window (2 ops):" in res.stdout
    assert "write 2" in res.stdout
    assert res.stdout.splitlines()[-1] == f"results: {out}"
    failure = json.loads(out.read_text())["checkers"]["linearizability"]["failures"][0]
    assert failure["op"]["lines"] == [5, 6] and failure["state"] == 2
    assert not (tmp_path / "results.json").exists()


def test_a_shrink_budget_of_zero_keeps_the_verdict_and_says_the_window_is_not_minimal(tmp_path: Path) -> None:
    path = write(tmp_path, records(w(1, 1, 0, 10), w(1, 2, 20, 30), r(2, 1, 40, 50)))
    res = run(str(path), "--shrink-budget", "0")
    assert res.exit_code == 1
    assert "failing window (3 ops; the shrink budget ran out, a smaller one may exist):" in res.stdout
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["options"]["shrink_budget_s"] == 0
    assert results["checkers"]["linearizability"]["failures"][0]["window_minimal"] is False


def test_unknown_when_the_budget_runs_out(tmp_path: Path) -> None:
    path = write(tmp_path, records(*pathological()))
    res = run(str(path), "--budget", "0")
    assert res.exit_code == 2
    assert "key 'k': unknown (time budget exhausted)" in res.stdout
    assert json.loads((tmp_path / "results.json").read_text())["verdict"] == "unknown"


def test_nothing_to_check_is_unknown(tmp_path: Path) -> None:
    res = run(str(write(tmp_path, NEMESIS)))
    assert res.exit_code == 2
    assert "no client operations to check" in res.stdout


def test_malformed_history_exits_3_naming_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text(
        '{"process": 1, "type": "invoke", "f": "write", "key": "k", "value": 1, "time": 0}\n'
        '{"process": 1, "type": "done", "f": "write", "key": "k", "value": 1, "time": 5}\n'
    )
    res = run(str(path))
    assert res.exit_code == 3
    assert "line 2: field 'type': expected one of invoke, ok, fail, info, got 'done'" in res.stderr
    assert not (tmp_path / "results.json").exists()


def test_values_that_fit_no_workload_are_malformed(tmp_path: Path) -> None:
    res = run(str(write(tmp_path, records(HOp(1, "write", 1.5, 0, 10)))))
    assert res.exit_code == 3
    assert "line 1: field 'value'" in res.stderr


def test_usage_errors_exit_3_not_2(tmp_path: Path) -> None:
    assert run(str(tmp_path / "missing.jsonl")).exit_code == 3
    assert run(str(write(tmp_path, NEMESIS)), "--budget", "-1").exit_code == 3
    assert CliRunner().invoke(cli, ["no-such-command"]).exit_code == 3
    assert CliRunner().invoke(cli, ["check", "--help"]).exit_code == 0


def test_all_workloads_in_one_history(tmp_path: Path) -> None:
    state = {"masterBrokerId": 1, "masterEpoch": 1, "syncStateSetEpoch": 1, "syncStateSet": [1]}
    ops = [
        w(1, 1, 0, 10),
        HOp(2, "add", "e1", 0, 10, key="set"),
        HOp(3, "elect-master", {"brokerId": 1}, 0, 10, "ok", state, key="broker-a"),
        HOp(4, "read", None, 20, 30, "ok", ["e1"], key="set"),
        r(5, 1, 20, 30),
        HOp(6, "sync-state-data", None, 20, 30, "ok", {"broker-a": state}, key=None),
    ]
    res = run(str(write(tmp_path, records(*ops))))
    assert res.exit_code == 0, res.output
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["workloads"] == ["register", "set", "controller"]
    assert {k: v["verdict"] for k, v in results["checkers"].items()} == {
        "linearizability": "valid",
        "set": "valid",
        "controller-invariants": "valid",
    }
    # one failing checker fails the whole check
    ops[3] = HOp(4, "read", None, 20, 30, "ok", [], key="set")
    res = run(str(write(tmp_path, records(*ops))))
    assert res.exit_code == 1
    assert "set 'set' lost: 'e1'" in res.stdout


def test_python_dash_m_jepsen(tmp_path: Path) -> None:
    path = write(tmp_path, records(w(1, 1, 0, 10), r(2, 2, 20, 30)))
    proc = subprocess.run(
        [sys.executable, "-m", "jepsen", "check", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1, proc.stderr
    assert "verdict: invalid" in proc.stdout
    usage = subprocess.run(
        [sys.executable, "-m", "jepsen", "check"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert usage.returncode == 3
    assert "Missing argument 'HISTORY'" in usage.stderr


def test_run_refuses_an_unknown_or_repeated_workload_before_building_anything() -> None:
    for spec in ("queue", "register,register", ","):
        res = CliRunner().invoke(cli, ["run", "--workload", spec, "--time-limit", "1"])
        assert res.exit_code == 3, res.output
        assert "--workload" in res.output and "known: all, register, set, controller" in res.output
