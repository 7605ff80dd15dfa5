"""Run the right checkers over a history and render `results.json` and the one-screen summary."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from jepsen.checker import controller, linearizable, sets
from jepsen.checker.linearizable import describe_op
from jepsen.checker.wgl import INVALID, UNKNOWN, VALID, combine
from jepsen.checker.workloads import CONTROLLER, REGISTER, SET, classify
from jepsen.history import History, Op


@dataclass(frozen=True, slots=True)
class CheckOptions:
    budget_s: float = linearizable.DEFAULT_BUDGET_S  # the linearizability checker's time budget
    max_configs: int = linearizable.DEFAULT_MAX_CONFIGS  # ... and its memory budget, in cached configurations
    shrink_budget_s: float = linearizable.DEFAULT_SHRINK_BUDGET_S  # shrinking counterexamples, after the verdicts


def check_history(history: History, options: CheckOptions | None = None) -> dict[str, Any]:
    """Every checker that applies to `history`, as the `results.json` object. Raises HistoryError when
    an op's values do not fit its workload."""
    options = options or CheckOptions()
    started = time.monotonic()
    by_workload = classify(history.ops)
    checkers: dict[str, Any] = {}
    if REGISTER in by_workload:
        lin = linearizable.check_register(
            by_workload[REGISTER],
            budget_s=options.budget_s,
            shrink_budget_s=options.shrink_budget_s,
            max_configs=options.max_configs,
        )
        checkers[linearizable.NAME] = lin.to_json()
    if SET in by_workload:
        checkers[sets.NAME] = sets.check_set(by_workload[SET])
    if CONTROLLER in by_workload:
        checkers[controller.NAME] = controller.check_controller(by_workload[CONTROLLER])
    verdict = combine(c["verdict"] for c in checkers.values()) if checkers else UNKNOWN
    return {
        "verdict": verdict,
        "history": history.path,
        "counts": {
            "records": len(history.records),
            "ops": len(history.ops),
            "nemesis_events": len(history.nemesis),
        },
        "workloads": list(by_workload),
        "options": {
            "budget_s": options.budget_s,
            "max_configs": options.max_configs,
            "shrink_budget_s": options.shrink_budget_s,
        },
        "checkers": checkers,
        "elapsed_s": round(time.monotonic() - started, 3),
    }


EXIT_VALID, EXIT_INVALID, EXIT_UNKNOWN, EXIT_MALFORMED = 0, 1, 2, 3
EXIT_CODE = {VALID: EXIT_VALID, INVALID: EXIT_INVALID, UNKNOWN: EXIT_UNKNOWN}


def summary(results: dict[str, Any]) -> list[str]:
    """The one-screen text summary."""
    c = results["counts"]
    lines = [
        f"history: {results['history']} ({c['records']} records, {c['ops']} ops, {c['nemesis_events']} nemesis events)"
    ]
    if not results["checkers"]:
        lines.append("no client operations to check")
    for name, res in results["checkers"].items():
        lines.append(f"{name:<22} {res['verdict']:<8} {_counts_line(name, res)}")
        lines.extend("    " + line for line in _details(name, res))
    lines.append(f"verdict: {results['verdict']}")
    return lines


def _counts_line(name: str, res: dict[str, Any]) -> str:
    c = res["counts"]
    if name == linearizable.NAME:
        return (
            f"{c['keys']} keys ({c['invalid_keys']} invalid, {c['unknown_keys']} unknown), "
            f"{c['ops']} ops, {c['configs']} configurations, {res['elapsed_s']} s"
        )
    if name == sets.NAME:
        return (
            f"{c['attempted']} attempted, {c['acknowledged']} acknowledged, lost {c['lost']}, "
            f"unexpected {c['unexpected']}, stale {c['stale']}, recovered {c['recovered']}"
        )
    return (
        f"{c['observations']} observations of {c['broker_sets']} broker-sets; violations: single master "
        f"{c['single_master_violations']}, monotonic epochs {c['monotonic_epochs_violations']}, "
        f"acknowledged alters {c['acknowledged_alters_violations']} ({c['unjudged_alters']} unjudged)"
    )


def _details(name: str, res: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if name == linearizable.NAME:
        for u in res["unknown"][:3]:
            out.append(f"key {u['key']!r}: unknown ({u['reason']})")
        for f in res["failures"][:2]:
            out.extend(_failure_lines(f))
    elif name == sets.NAME:
        for s in res["sets"]:
            if s["verdict"] == VALID:
                continue
            if "reason" in s:
                out.append(f"set {s['key']!r}: {s['reason']}")
                continue
            for kind in ("lost", "unexpected", "stale"):
                if s[kind]:
                    out.append(f"set {s['key']!r} {kind}: {', '.join(map(repr, s[kind][:10]))}")
    else:
        for v in res["single_master"][:3]:
            out.append(f"two masters of {v['brokerName']!r} at masterEpoch {v['masterEpoch']}: {v['masters']}")
        for v in res["monotonic_epochs"][:3]:
            out.append(
                f"process {v['process']} saw {v['field']} of {v['brokerName']!r} go from {v['from']} to {v['to']}"
            )
        for v in res["acknowledged_alters"][:3]:
            out.append(
                f"acknowledged SyncStateSet {v['syncStateSet']} (epoch {v['syncStateSetEpoch']}) of "
                f"{v['brokerName']!r} lost: {v['reason']}"
            )
        for v in res["unjudged_alters"][:1]:
            out.append(f"cannot judge the alter of {v['brokerName']!r} on lines {v['op']['lines']}: {v['reason']}")
    return out


def _failure_lines(f: dict[str, Any]) -> list[str]:
    op = f["op"]
    out = [
        f"key {f['key']!r}: cannot linearize {describe_op(Op.from_json(op)).strip()}",
        f"state after the longest linearizable prefix ({f['linearized_count']} ops): {f['state']!r}",
        f"smallest failing window ({f['window_count']} ops):"
        if f.get("window_minimal", True)
        else f"failing window ({f['window_count']} ops; the shrink budget ran out, a smaller one may exist):",
    ]
    out.extend("  " + describe_op(Op.from_json(o)) for o in f["window"][:12])
    if f["window_count"] > 12:
        out.append(f"  ... {f['window_count'] - 12} more in results.json")
    return out
