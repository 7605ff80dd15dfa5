"""The checker suite: split a history by workload, run each workload's checker, and render `results.json`
and the one-screen summary (docs/jepsen.md, "Checkers").

Every verdict is "valid", "invalid" or "unknown" (a budget ran out, or nothing could be judged). Which
workload an op belongs to (`classify`): a controller endpoint's name is the controller's; `add`, and `read`
on a key that holds a set, are the set's; the rest of `read`, `write`, `cas`, `delete` are the register's.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from jepsen.checker.linearizable import CheckOptions
from jepsen.checker.wgl import INVALID, UNKNOWN, VALID, combine
from jepsen.history import History, HistoryError, Key, Op
from jepsen.workloads import WORKLOADS, controller, register
from jepsen.workloads import set as set_workload

__all__ = [
    "EXIT_CODE",
    "EXIT_MALFORMED",
    "INVALID",
    "UNKNOWN",
    "VALID",
    "CheckOptions",
    "check_history",
    "classify",
    "summary",
]


def classify(ops: Iterable[Op]) -> dict[str, list[Op]]:
    """Split client ops by workload (only the workloads present), validating each op's values. Raises
    HistoryError."""
    ops = list(ops)
    set_keys = set_workload.keys_of(ops)
    out: dict[str, list[Op]] = {name: [] for name in WORKLOADS}
    register_writers: dict[Key, Op] = {}
    for op in ops:
        if op.f in controller.FS:
            spec = controller.SPEC
        elif op.f in set_workload.FS and op.key in set_keys:
            spec = set_workload.SPEC
        elif op.f in register.FS:
            spec = register.SPEC
            register_writers.setdefault(op.key, op)
        else:
            raise HistoryError(
                op.invoke_line,
                "f",
                f"unknown operation {op.f!r} (register: {', '.join(sorted(register.FS))}; set: add, read; "
                f"controller: {', '.join(sorted(controller.FS))})",
            )
        spec.validate(op)
        out[spec.name].append(op)
    for key in set_keys & register_writers.keys():
        op = register_writers[key]
        raise HistoryError(op.invoke_line, "key", f"key {key!r} is used by both the set and the register workload")
    return {w: v for w, v in out.items() if v}


def check_history(history: History, options: CheckOptions | None = None) -> dict[str, Any]:
    """Every checker that applies to `history`, as the `results.json` object. Raises HistoryError when
    an op's values do not fit its workload."""
    options = options or CheckOptions()
    started = time.monotonic()
    by_workload = classify(history.ops)
    checkers = {WORKLOADS[w].checker: WORKLOADS[w].check(ops, options) for w, ops in by_workload.items()}
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
    by_checker = {spec.checker: spec for spec in WORKLOADS.values()}
    for name, res in results["checkers"].items():
        spec = by_checker[name]
        lines.append(f"{name:<22} {res['verdict']:<8} {spec.counts.format_map({**res, **res['counts']})}")
        lines.extend("    " + line for line in spec.details(res))
    lines.append(f"verdict: {results['verdict']}")
    return lines
