"""The linearizability checker, the engine the register workload's checker runs (docs/jepsen.md, "Checkers").

- `wgl`: the Wing & Gong / Lowe search, and the verdicts "valid", "invalid", "unknown";
- `models`: sequential specifications (the KV register) the search checks against;
- `linearizable`: per-key checking with budgets, pruning and counterexample shrinking.

Each workload's own checker lives with the workload (jepsen/workloads/); `jepsen.suite` runs the checkers of
the workloads found in a history.
"""

from jepsen.checker.wgl import INVALID, UNKNOWN, VALID

__all__ = ["INVALID", "UNKNOWN", "VALID"]
